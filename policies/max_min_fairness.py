"""Max-min fairness (Gavel's LAS, Narayanan et al., OSDI'20 §4.1) with Gavel's rounds.

**Allocation.** Each active job (running or pending) gets a share of the cluster's GPUs that
maximises the least weighted share (Gavel ``MaxMinFairnessPolicy`` on a homogeneous cluster, where
every throughput is 1: maximise ``min_i scale_i * x_i / w_i`` subject to ``sum_i scale_i * x_i <=
GPUs``, ``0 <= x_i <= 1``). Its solution is water-filling: ``share_i = min(scale_i, lambda *
w_i)``, lambda raised until the GPUs are used up; ``x_i = share_i / scale_i`` is the fraction of
time the job should run on its ``scale_i`` GPUs. ``w_i`` is the job's priority weight (the trace's
``priority``, 1 without one).

**Rounds** (Gavel §5, ``scheduler.py`` ``_schedule_jobs_on_workers``): every ``round_s`` seconds,
jobs are ranked by priority = ``x_i / f_i``, ``f_i`` the fraction of the time since the job
arrived that it has run (a job that never ran ranks first), and taken in that order while their
GPUs fit; the others wait for a later round. A job keeps its nodes while it keeps running.
Set ``decision_interval`` to ``round_s`` so that arrivals and completions wait for the round too.

docs/policies/max_min_fairness.md.
"""

from __future__ import annotations

import math

from clustersim.policies.admission import admit, budget
from clustersim.policies.base import Decision, Policy, View, register
from clustersim.policies.placement import _NO_NODES, PlacementName, keep_in_place, release, strategy
from clustersim.simulator.params import Positive


@register
class MaxMinFairness(Policy):
    name = "max_min_fairness"

    def __init__(self, round_s: Positive = 360.0, placement: PlacementName = "first_fit"):
        self.round_s = float(round_s)
        self.placement = placement
        self.place = strategy(placement, _NO_NODES)   # checks the name; bound to the cluster at reset

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)

    def decide(self, view: View) -> Decision:
        active = [*view.running.values(), *view.pending.values()]
        if not active:
            return Decision()
        x = self.fractions(active, budget(view.cluster)[0], view.now)
        order = sorted(active, key=lambda j: self._rank(j, x[j.job_id], view.now))
        left = budget(view.cluster)
        chosen = {j.job_id for j in order if admit(left, j.requested_demand())}
        free = view.cluster.free_copy()
        allocations: dict = {}
        for j in view.running.values():
            if j.job_id not in chosen:
                release(free, j)
                allocations[j.job_id] = None
        for j in order:
            if j.job_id in chosen and j.job_id in view.pending:
                alloc = self.place(free, j.roles, j.requested_counts())
                if alloc is not None:
                    allocations[j.job_id] = alloc
        for j in view.running.values():   # a stopped job whose nodes no one took keeps running
            if allocations.get(j.job_id, 0) is None and keep_in_place(free, j):
                del allocations[j.job_id]
        return Decision(allocations, wakeup=self.round_s)

    def fractions(self, active, gpus: float, now: float) -> dict[str, float]:
        """Each active job's fraction of time on its requested GPUs."""
        return time_fractions(active, gpus)

    def _rank(self, job, x: float, now: float) -> tuple:
        """Gavel's priority x / (fraction of the time since arrival the job has run), highest first;
        a job that has not run yet first of all; ties by arrival."""
        gpus = job.num_gpus or 1.0
        since = now - job.submit_time
        ran = job.attained_service / gpus / since if since > 0 else 0.0
        priority = math.inf if ran <= 0 else x / ran
        return (-priority, job.submit_time, job.index)


def time_fractions(jobs, gpus: float) -> dict[str, float]:
    """Water-filling of ``gpus`` over the jobs by priority weight: each job's fraction of time on
    its requested GPUs, ``min(scale, lambda * w) / scale``."""
    demand = {j.job_id: (max(j.num_gpus, 1e-12), float(j.priority or 1)) for j in jobs}
    share: dict[str, float] = {}
    left, open_ = gpus, dict(demand)
    while open_ and left > 1e-12:
        lam = left / sum(w for _, w in open_.values())
        capped = {k: v for k, v in open_.items() if v[0] <= lam * v[1]}
        if not capped:   # nobody reaches its size: all get lambda * w
            for k, (_, w) in open_.items():
                share[k] = lam * w
            break
        for k, (scale, _) in capped.items():
            share[k] = scale
            left -= scale
            del open_[k]
    return {k: min(share.get(k, 0.0) / scale, 1.0) for k, (scale, _) in demand.items()}
