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
import math
from typing import Literal

from clustersim.policies.base import View, register
from clustersim.policies.periodic import Active, Periodic, Step
from clustersim.policies.placement import PlacementAnyCluster
from clustersim.simulator.cluster import EPS
from clustersim.simulator.params import Positive


@register
class Drf(Periodic):
    name = "drf"
    tags = frozenset({"elastic", "multi-resource", "ps"})

    def __init__(self, interval: Positive = 1200.0, placement: PlacementAnyCluster = "spread", event_driven: bool = False,
                 fair_share: Literal["job", "tenant"] = "job"):
        super().__init__(interval, placement, event_driven)
        self.by_tenant = fair_share == "tenant"

    def allocate(self, view: View, jobs: list[Active]) -> list[Step]:
        # plain floats, the same operations as on 3-vectors: x / inf is 0 for a resource the cluster lacks
        cap = view.cluster.up_capacity().tolist()
        scale = [c if c > 0 else math.inf for c in cap]
        left = [c + EPS for c in cap]
        order = _seniority_order(jobs)
        ladders = [a.ladder for a in order]
        smallest = self.smallest_step()
        if not self.by_tenant:
            taken, first = _fill_jobs(ladders, left, scale, smallest)
            return [Step(order[n].job, ladders[n].counts[taken[n] - 1]) for n in first]
        taken = [0] * len(order)       # steps each job got
        users: dict = {}               # user -> [held, heap of (share, n)]: n, the seniority rank, breaks ties
        for n, job in enumerate(a.job for a in order):
            user = (job.tenant or f"job:{job.job_id}") if self.by_tenant else n   # a job of its own: its rank
            users.setdefault(user, [[0.0, 0.0, 0.0], []])[1].append((0.0, n))  # ascending n: a heap already
        heap = [(0.0, mine[0][1], user) for user, (_, mine) in users.items()]
        heapq.heapify(heap)
        first: list[int] = []          # jobs in the order they got their first step
        while heap and (smallest <= 0 or left[0] >= smallest):
            _, _, user = heapq.heappop(heap)
            held, mine = users[user]
            _, n = heapq.heappop(mine)
            ladder, k = ladders[n], taken[n]
            g, c, m = ladder.step[k]
            if g <= left[0] and c <= left[1] and m <= left[2]:
                taken[n] = k + 1
                left[0] -= g
                left[1] -= c
                left[2] -= m
                held[0] += g
                held[1] += c
                held[2] += m
                if not k:
                    first.append(n)
                if ladder.has(k + 1):
                    heapq.heappush(mine, (_share(ladder.total[k], scale), n))
            if mine:  # a step that did not fit saturates that job; the user's other jobs go on
                heapq.heappush(heap, (_share(held, scale), mine[0][1], user))
        return [Step(order[n].job, ladders[n].counts[taken[n] - 1]) for n in first]


def _fill_jobs(ladders: list, left: list[float], scale: list[float], smallest: float) -> tuple[list, list]:
    """Progressive filling with every job a user of its own (``fair_share: job``): ``allocate``'s
    loop without the per-user heaps, the same picks (share, then seniority rank ``n``). Returns
    the steps each job got and the jobs in the order they got their first."""
    taken = [0] * len(ladders)
    held: dict[int, list[float]] = {}
    heap = [(0.0, n) for n in range(len(ladders))]   # ascending n: a heap already
    first: list[int] = []
    while heap and (smallest <= 0 or left[0] >= smallest):
        _, n = heapq.heappop(heap)
        ladder, k = ladders[n], taken[n]
        g, c, m = ladder.step[k]
        if g <= left[0] and c <= left[1] and m <= left[2]:   # else the job is saturated
            taken[n] = k + 1
            left[0] -= g
            left[1] -= c
            left[2] -= m
            mine = held.setdefault(n, [0.0, 0.0, 0.0])
            mine[0] += g
            mine[1] += c
            mine[2] += m
            if not k:
                first.append(n)
            if ladder.has(k + 1):
                heapq.heappush(heap, (_share(mine, scale), n))
    return taken, first


def _share(demand, scale) -> float:
    """Dominant share: the largest fraction of any resource's capacity."""
    return max(demand[0] / scale[0], demand[1] / scale[1], demand[2] / scale[2])


def _seniority_order(jobs: list[Active]) -> list[Active]:
    """Ties between equal shares: jobs already running first (no needless preemption), then by
    arrival (the order ``jobs`` come in)."""
    running, waiting = [], []
    for a in jobs:
        (running if a.job.gpus != 0 else waiting).append(a)
    return running + waiting
