"""Tetris (Grandl et al., SIGCOMM'14): multi-resource packing blended with shortest remaining work.

Each pick scores every job's next step by its *alignment* with the resources still free,
the dot product of the step's demand and the free vector, each normalised by capacity
(Grandl §3.2), minus a shortest-remaining-time term (§3.3):

    score = a / mean(a) - srtf_weight * t / mean(t)

where ``t`` is the job's remaining running time at its requested allocation and the means
are over the candidates, Tetris's default balance of the two terms (ε = mean(a)/mean(t);
note optimus.md §4.2). The best step is taken if it fits; a job whose step does not fit
takes no more this interval. Steps are placed by alignment too: the nodes with the most of
what the tasks need first (placement ``align``).

As configured in Optimus's comparison (seed 004 §6.1): reallocated every interval, elastic in
PS+worker bundles (1:1), and fed the remaining time that Optimus's estimators would give it.
Here that time is the true one, so this policy is an oracle. See periodic.py.
"""

from __future__ import annotations

import numpy as np

from clustersim.policies.base import JobView, View, register
from clustersim.policies.periodic import Periodic, Step
from clustersim.policies.placement import PlacementName
from clustersim.simulator.cluster import EPS
from clustersim.simulator.params import NonNegative, Positive


@register
class Tetris(Periodic):
    name = "tetris"
    oracle = True
    tags = frozenset({"oracle", "elastic", "multi-resource", "ps"})

    def __init__(self, interval: Positive = 1200.0, placement: PlacementName = "align", event_driven: bool = False,
                 srtf_weight: NonNegative = 1.0):
        super().__init__(interval, placement, event_driven)
        if srtf_weight < 0:
            raise ValueError(f"tetris: srtf_weight must be >= 0, got {srtf_weight}")
        self.weight = float(srtf_weight)

    def allocate(self, view: View, jobs: list[JobView]) -> list[Step]:
        if not jobs:
            return []
        cap = view.cluster.up_capacity()
        scale = np.where(cap > 0, cap, np.inf)
        left = cap + EPS
        steps = [Step(j) for j in sorted(jobs, key=lambda j: (j.submit_time, j.index))]
        need = np.array([s.demand() for s in steps])
        remaining = np.array([_remaining_time(s.job) for s in steps])
        unit = need / scale  # each step's demand as a share of capacity
        alive = np.ones(len(steps), dtype=bool)
        a0 = unit @ (left / scale)
        mean_a = a0.mean() if a0.mean() > 0 else 1.0
        mean_t = remaining.mean() if remaining.mean() > 0 else 1.0
        srtf = self.weight * remaining / mean_t
        smallest = self.smallest_step()
        plan: dict[int, Step] = {}
        while alive.any() and (smallest <= 0 or left[0] >= smallest):
            score = np.where(alive, unit @ (left / scale) / mean_a - srtf, -np.inf)
            i = int(np.argmax(score))  # ties: the earlier arrival
            step = steps[i]
            if (need[i] <= left).all():
                step.take()
                left -= need[i]
                plan.setdefault(i, step)
                if step.next is None:
                    alive[i] = False
                else:
                    need[i] = step.demand()
                    unit[i] = need[i] / scale
            else:
                alive[i] = False
        return list(plan.values())


def _remaining_time(job: JobView) -> float:
    """True remaining running time at the requested allocation (ground truth: oracle only)."""
    t = job.duration if job.duration is not None else job.total_work
    return t * max(job.remaining_work, 0.0) / job.total_work
