"""EDF: earliest deadline first, rigid, the simplest deadline-aware baseline.

At every arrival, completion and stop, jobs are ranked by deadline (absolute seconds, the
trace's ``deadline``; a job without one ranks after every job with one), then submission time
and trace order. Jobs are admitted in that order while their requested GPUs, cores and memory
fit the cluster's totals (policies/admission.py), smaller jobs passing a blocked one; with
``preemptive`` a running job that is no longer admitted is stopped for an earlier deadline.
Admitted jobs are placed with the configured strategy; a running job keeps its nodes. This is
the ``edf`` baseline of ElasticFlow (Gu et al., ASPLOS'23, §6.1: "Earliest-Deadline-First
(EDF) ... schedules the job with the earliest deadline first"; pkusys/ElasticFlow
``scheduler.py --schedule=edf``, jobs keep their requested GPU count). docs/policies/edf.md.
"""

from __future__ import annotations

import math

from clustersim.policies.admission import admit, budget
from clustersim.policies.base import Decision, Policy, View, register
from clustersim.policies.placement import _NO_NODES, PlacementName, keep_in_place, release, strategy


@register
class Edf(Policy):
    name = "edf"

    def __init__(self, preemptive: bool = True, placement: PlacementName = "first_fit"):
        self.preemptive = preemptive
        self.placement = placement
        self.place = strategy(placement, _NO_NODES)   # checks the name; bound to the cluster at reset

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)

    def decide(self, view: View) -> Decision:
        if not (view.arrived or view.finished or view.stopped) and not view.pending:
            return Decision()
        running = list(view.running.values())
        order = sorted([*running, *view.pending.values()], key=_rank) if self.preemptive \
            else running + sorted(view.pending.values(), key=_rank)
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


def _rank(job) -> tuple:
    d = job.deadline
    return (math.inf if d is None else d, job.submit_time, job.index)
