"""Dominant Resource Fairness (Ghodsi et al., NSDI'11), elastic, as Optimus's baseline.

A user's dominant share is the largest, over GPU, CPU and memory, of its allocation over the
cluster's capacity. Progressive filling (Ghodsi §4): repeatedly give the next step to the
user with the lowest dominant share, until the cluster is full; a user whose next step no
longer fits is saturated and the others go on (work-conserving, as Optimus §6.2 notes of its
DRF baseline). The users are jobs (``fair_share: job``) or tenants (``fair_share: tenant``:
a tenant's next step goes to its job with the lowest dominant share; a job without a tenant
is a user of its own).

As configured in Optimus (seed 004 §6.1, note optimus.md §4.1): reallocated every scheduling
interval (20 min), steps of one PS plus one worker (ratio 1:1) up to the job's ``max_count``,
tasks spread over the least-loaded nodes (Kubernetes' default placement). See periodic.py.
"""

from __future__ import annotations

import heapq
from typing import Literal

import numpy as np

from clustersim.policies.base import JobView, View, register
from clustersim.policies.periodic import Periodic, Step
from clustersim.policies.placement import PlacementName
from clustersim.simulator.cluster import EPS
from clustersim.simulator.params import Positive


@register
class Drf(Periodic):
    name = "drf"
    tags = frozenset({"elastic", "multi-resource", "ps"})

    def __init__(self, interval: Positive = 1200.0, placement: PlacementName = "spread", event_driven: bool = False,
                 fair_share: Literal["job", "tenant"] = "job"):
        super().__init__(interval, placement, event_driven)
        if fair_share not in ("job", "tenant"):
            raise ValueError(f"drf: fair_share must be 'job' or 'tenant', got {fair_share!r}")
        self.by_tenant = fair_share == "tenant"

    def allocate(self, view: View, jobs: list[JobView]) -> list[Step]:
        cap = view.cluster.up_capacity()
        scale = np.where(cap > 0, cap, np.inf)
        left = cap + EPS
        users: dict[str, list] = {}  # user -> [held, heap of (share, tie, n, step)]
        for n, job in enumerate(sorted(jobs, key=_seniority)):
            user = (job.tenant or f"job:{job.job_id}") if self.by_tenant else job.job_id
            users.setdefault(user, [np.zeros(3), []])[1].append((0.0, _seniority(job), n, Step(job)))
        heap = [(0.0, min(e[1] for e in jobs_), user) for user, (_, jobs_) in users.items()]
        heapq.heapify(heap)
        plan: dict[int, Step] = {}
        smallest = self.smallest_step()
        while heap and (smallest <= 0 or left[0] >= smallest):
            _, _, user = heapq.heappop(heap)
            held, mine = users[user]
            share, tie, n, step = heapq.heappop(mine)
            need = step.demand()
            if (need <= left).all():
                step.take()
                left -= need
                held += need
                plan.setdefault(n, step)
                if step.next is not None:
                    heapq.heappush(mine, (float((step.demand(step.counts) / scale).max()), tie, n, step))
            if mine:  # a step that did not fit saturates that job; the user's other jobs go on
                heapq.heappush(heap, (float((held / scale).max()), mine[0][1], user))
        return list(plan.values())  # in the order jobs got their first step


def _seniority(job: JobView) -> tuple:
    """Ties between equal shares: jobs already running first (no needless preemption), then by arrival."""
    return (job.gpus == 0, job.submit_time, job.index)
