"""Tetris (Grandl et al., SIGCOMM'14): multi-resource packing blended with shortest remaining work.

Each pick scores every job's next step by its *alignment* with the resources still free,
the dot product of the step's demand and the free vector, each normalised by capacity
(Grandl §3.2), minus a shortest-remaining-work term (§3.3):

    score = a / mean(a) - srtf_weight * r / mean(r)

``r`` is the job's remaining *work* at the allocation the step would give it: its remaining
time there times the resources it would hold (Grandl §3.3 weighs a job's remaining tasks by
duration times demand; the demand here is the sum of the allocation's shares of GPU, CPU and
memory). A bundle that barely speeds a job up makes its remaining work larger, so the job
yields to others: Tetris packs many jobs, as Optimus §6.1 describes it, where the job's
remaining time alone (the same whatever it holds) would hand the shortest job bundle after
bundle up to its maximum and run one job at a time. The means are over the candidates' first
steps, Tetris's default balance of the two terms (ε = mean(a)/mean(r); note optimus.md §4.2).
The best step is taken if it fits; a job whose step does not fit takes no more this interval.
Steps are placed by alignment too: the nodes with the most of what the tasks need first
(placement ``align``).

As configured in Optimus's comparison (seed 004 §6.1): reallocated every interval, elastic in
PS+worker bundles (1:1), and fed the remaining time that Optimus's estimators would give it.
Here that time is the true remaining work over the job's profiled speed at the step's task
counts, each task on a server of its own (``JobView.profiled``), so this policy is an oracle.
See periodic.py.
"""

from __future__ import annotations


import numpy as np

from clustersim.policies.base import View, register
from clustersim.policies.periodic import Active, Periodic, PeriodicPlacement, Step
from clustersim.simulator.cluster import EPS
from clustersim.simulator.errors import PolicyError
from clustersim.simulator.params import NonNegative, Positive


@register
class Tetris(Periodic):
    name = "tetris"
    oracle = True
    tags = frozenset({"oracle", "elastic", "multi-resource", "ps"})

    def __init__(self, interval: Positive = 1200.0, placement: PeriodicPlacement = "align",
                 event_driven: bool = False,
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
        unit = need / scale  # each step's demand as a share of capacity
        a0 = unit @ (left / scale)
        work = np.array([self._remaining_work(a, 0, scale) for a in order])   # at each job's first step
        mean_a = a0.mean() if a0.mean() > 0 else 1.0
        mean_r = work.mean() if work.mean() > 0 else 1.0
        # the SRTF term, +inf once a job takes no more: its score is then -inf, below every live job's
        penalty = self.weight * work / mean_r
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
                    penalty[i] = self.weight * self._remaining_work(order[i], k + 1, scale) / mean_r
                    continue
            penalty[i] = np.inf
            live -= 1
        return [Step(order[i].job, ladders[i].counts[taken[i] - 1]) for i in first]

    def _remaining_work(self, active: Active, k: int, scale) -> float:
        """Remaining time at the job's step ``k`` times the share of the cluster it then holds
        (ground truth: oracle only). The speed is the job's profiled one at those counts, each task
        on its own server; a job without a speed model (a bare test engine) runs at its request's
        speed scaled by its tasks (the time at the request, ``duration``, x request / tasks)."""
        job, ladder = active.job, active.ladder
        if active.truth is None:   # work, and per step: the time a unit of work takes
            active.truth = (job.total_work, {})
        work, per_step = active.truth
        left = max(work - job.iterations_done, 0.0)
        t = per_step.get(k)
        if t is None:
            counts = ladder.counts[k]
            rate = self._rate(job, counts)
            t = per_step[k] = 1.0 / rate if rate > 0 else np.inf
        g, c, m = ladder.total[k]
        return left * t * (g / scale[0] + c / scale[1] + m / scale[2])

    @staticmethod
    def _rate(job, counts: dict) -> float:
        try:
            return job.profiled.counts_rate(counts, max(1, sum(counts.values())))
        except PolicyError:   # no speed model to profile with: linear in the scaling role's tasks
            request = {r.name: r.count for r in job.roles}
            base = job.total_work / job.duration if job.duration else 1.0
            n = [counts[r] / request[r] for r in request if request[r] and counts.get(r)]
            return base * (min(n) if n else 0.0)
