"""EDF: earliest deadline first, rigid, the simplest deadline-aware baseline.

At every arrival, completion and stop, jobs are ranked by deadline (absolute seconds, the
trace's ``deadline``; a job without one ranks after every job with one), then submission time
and trace order. Jobs are admitted in that order while their requested GPUs, cores and memory
fit the cluster's totals (policies/admission.py), smaller jobs passing a blocked one; with
``preemptive`` a running job that is no longer admitted is stopped for an earlier deadline.
Admitted jobs are placed with the configured strategy; a running job keeps its nodes. This is
the rigid form of ElasticFlow's EDF baseline (Gu et al., ASPLOS'23, §6.1: "Earliest-Deadline-First
(EDF) ... schedules the job with the earliest deadline first").

``elastic: true`` is the EDF the ElasticFlow simulator runs (pkusys/ElasticFlow ``scheduler.py
--schedule=edf``: ``one_queue_edf_sim_jobs`` and ``edf_sim_allocation``): at every decision all
jobs, running or pending, are ranked by deadline and each in turn takes the most GPUs it can use
(its ``max_count``; the simulator's ``max_gpu``, the largest GPU count of its throughput table) if
that many are still free, else the largest power of two that is free (the table's GPU counts 1, 2,
4, ... 64), else none. Admission is by GPU count; jobs are then placed largest first with the
configured strategy, a running job whose count is unchanged keeping its nodes. docs/policies/edf.md.
"""

from __future__ import annotations

import math

from clustersim.policies.admission import admit, budget
from clustersim.policies.base import Decision, Policy, View, register
from clustersim.policies.placement import _NO_NODES, PlacementName, keep_in_place, release, strategy


@register
class Edf(Policy):
    name = "edf"

    def __init__(self, preemptive: bool = True, placement: PlacementName = "first_fit", elastic: bool = False):
        self.preemptive = preemptive
        self.elastic = elastic
        self.placement = placement
        self.place = strategy(placement, _NO_NODES)   # checks the name; bound to the cluster at reset

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)

    def decide(self, view: View) -> Decision:
        if not (view.arrived or view.finished or view.stopped) and not view.pending:
            return Decision()
        if self.elastic:
            return self._elastic(view)
        running = list(view.running.values())
        order = sorted([*running, *view.pending.values()], key=rank) if self.preemptive \
            else running + sorted(view.pending.values(), key=rank)
        left = budget(view.cluster)
        admitted = {j.job_id for j in order if admit(left, j.requested_demand())}
        stops = [j for j in running if j.job_id not in admitted]
        free = view.cluster.free_copy()
        for j in stops:
            release(free, j)
        allocations: dict = {}
        for j in order:
            if j.job_id in admitted and j.job_id in view.pending:
                alloc = self.place(free, j.roles, j.requested_counts())
                if alloc is not None:
                    allocations[j.job_id] = alloc
        for j in stops:
            if not keep_in_place(free, j):   # its nodes went to an earlier deadline
                allocations[j.job_id] = None
        return Decision(allocations)


    def _elastic(self, view: View) -> Decision:
        free_gpus = budget(view.cluster)[0]
        want: dict[str, dict[str, int]] = {}
        for j in sorted([*view.running.values(), *view.pending.values()], key=rank):
            n = _share(j, free_gpus)
            if n:
                free_gpus -= n * scaling(j).gpu
                want[j.job_id] = {**j.requested_counts(), scaling(j).name: n}
        return Decision(place_counts(view, want, self.place))


def place_counts(view: View, want: dict[str, dict[str, int]], place) -> dict:
    """Allocations that give each job in ``want`` its task counts: a running job whose counts are
    unchanged keeps its nodes; the others (and running jobs not in ``want``, which stop) give theirs
    back, and the jobs to place are placed largest first (the ElasticFlow simulator places
    ``run_jobs`` sorted by GPUs, largest first) with ``place``; one that does not fit waits."""
    free = view.cluster.free_copy()
    allocations: dict = {}
    moving = [j for j in view.running.values() if _counts(j) != want.get(j.job_id)]
    for j in moving:
        release(free, j)
        allocations[j.job_id] = None
    for j in sorted((j for j in (*moving, *view.pending.values()) if j.job_id in want),
                    key=lambda j: -sum(want[j.job_id].values())):   # stable: the caller's order among equals
        alloc = place(free, j.roles, want[j.job_id])
        if alloc is not None:
            allocations[j.job_id] = alloc
    return allocations


def scaling(job):
    """The role whose count EDF scales: the workers, else the first role."""
    return next((r for r in job.roles if r.name == "worker"), job.roles[0])


def _share(job, free_gpus: float) -> int:
    """Tasks of ``job``'s scaling role at ``free_gpus`` free GPUs: its maximum if they fit, else the
    largest power of two within its bounds that fits (ElasticFlow's table counts), else 0."""
    r = scaling(job)
    per = r.gpu if r.gpu > 0 else 0.0
    other = sum(x.gpu * x.count for x in job.roles if x is not r)
    room = (free_gpus - other) / per if per else math.inf
    if room >= r.max_count:
        return r.max_count
    n = 1 << int(math.log2(room)) if room >= 1 else 0
    return n if n >= r.min_count else 0


def _counts(job) -> dict[str, int] | None:
    return {role: sum(t.values()) for role, t in job.allocation.items()} if job.allocation else None


def rank(job) -> tuple:
    d = job.deadline
    return (math.inf if d is None else d, job.submit_time, job.index)
