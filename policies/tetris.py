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

from clustersim.policies.base import View, register
from clustersim.policies.periodic import Active, Periodic, Step
from clustersim.policies.placement import PlacementAnyCluster
from clustersim.simulator.cluster import EPS
from clustersim.simulator.params import NonNegative, Positive


@register
class Tetris(Periodic):
    name = "tetris"
    oracle = True
    tags = frozenset({"oracle", "elastic", "multi-resource", "ps"})

    def __init__(self, interval: Positive = 1200.0, placement: PlacementAnyCluster = "align", event_driven: bool = False,
                 srtf_weight: NonNegative = 1.0):
        super().__init__(interval, placement, event_driven)
        self.weight = float(srtf_weight)

    def allocate(self, view: View, jobs: list[Active]) -> list[Step]:
        if not jobs:
            return []
        cap = view.cluster.up_capacity()
        scale = np.where(cap > 0, cap, np.inf)
        left = cap + EPS
        order = jobs                        # in arrival order
        ladders = [a.ladder for a in order]
        taken = [0] * len(order)            # steps each job got
        need = np.array([lad.step[0] for lad in ladders])
        remaining = np.array([self._remaining_time(j) for j in order])
        unit = need / scale  # each step's demand as a share of capacity
        a0 = unit @ (left / scale)
        mean_a = a0.mean() if a0.mean() > 0 else 1.0
        mean_t = remaining.mean() if remaining.mean() > 0 else 1.0
        # the SRTF term, +inf once a job takes no more: its score is then -inf, below every live job's
        penalty = self.weight * remaining / mean_t
        live = len(order)
        smallest = self.smallest_step()
        first: list[int] = []               # jobs in the order they got their first step
        # what is left, as plain floats: the elementwise arithmetic is the same IEEE operations
        # as on the arrays; only the dot products (matmul) stay in numpy, to keep their rounding
        lf = left.tolist()
        s0, s1, s2 = scale.tolist()
        while live and (smallest <= 0 or lf[0] >= smallest):
            score = unit @ np.array((lf[0] / s0, lf[1] / s1, lf[2] / s2)) / mean_a - penalty
            i = int(score.argmax())  # ties: the earlier arrival
            k = taken[i]
            g, c, m = ladders[i].step[k]
            if g <= lf[0] and c <= lf[1] and m <= lf[2]:
                taken[i] = k + 1
                lf[0] -= g
                lf[1] -= c
                lf[2] -= m
                if not k:
                    first.append(i)
                if ladders[i].has(k + 1):
                    g, c, m = ladders[i].step[k + 1]
                    unit[i] = (g / s0, c / s1, m / s2)
                    continue
            penalty[i] = np.inf
            live -= 1
        return [Step(order[i].job, ladders[i].counts[taken[i] - 1]) for i in first]

    def _remaining_time(self, active: Active) -> float:
        """True remaining running time at the requested allocation (ground truth: oracle only)."""
        job, truth = active.job, active.truth
        if truth is None:   # (running time, work): read once per job
            t = job.duration if job.duration is not None else job.total_work
            truth = active.truth = (t, job.total_work)
        t, work = truth
        return t * max(work - job.iterations_done, 0.0) / work
