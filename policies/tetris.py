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

from math import isfinite

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

    def reset(self, view: View) -> None:
        super().reset(view)
        self._scale = None   # the capacity (scale) the jobs' kept first-step shares are for

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
        work = np.array(self._first_work(order, scale))   # at each job's first step
        mean_a, mean_r = a0.mean(), work.mean()
        mean_a = mean_a if mean_a > 0 else 1.0
        mean_r = mean_r if mean_r > 0 else 1.0
        # the SRTF term, +inf once a job takes no more: its score is then -inf, below every live job's
        penalty = self.weight * work / mean_r
        smallest = self.smallest_step()
        first: list[int] = []               # jobs in the order they got their first step
        # what is left, as plain floats: the elementwise arithmetic is the same IEEE operations
        # as on the arrays; only the dot products (matmul) stay in numpy, to keep their rounding
        lf = left.tolist()
        s0, s1, s2 = scale.tolist()
        # The scores, worked out in numpy whenever what is free changed. Numpy's rounding of a
        # matmul row depends on the matrix (its size, the row's place), so every job stays in it, in
        # arrival order, and no score is worked out on its own. A job that does not fit changes only
        # its own score, to -inf: the kept vector, with that entry set, serves the next pick.
        f = np.array((lf[0] / s0, lf[1] / s1, lf[2] / s2))
        score = np.empty(len(order))
        kept = False                        # whether score is the vector at f and penalty
        live = len(order)
        while live and (smallest <= 0 or lf[0] >= smallest):
            if not kept:
                np.matmul(unit, f, out=score)
                np.divide(score, mean_a, out=score)
                np.subtract(score, penalty, out=score)
                kept = True
            i = int(score.argmax())  # ties: the earlier arrival
            k = taken[i]
            steps = ladders[i].step
            g, c, m = steps[k]
            if g <= lf[0] and c <= lf[1] and m <= lf[2]:
                taken[i] = k + 1
                lf[0] -= g
                lf[1] -= c
                lf[2] -= m
                f[0], f[1], f[2] = lf[0] / s0, lf[1] / s1, lf[2] / s2
                kept = False
                if not k:
                    first.append(i)
                if k + 1 < len(steps) or not ladders[i].known and ladders[i].has(k + 1):
                    g, c, m = steps[k + 1]
                    unit[i] = (g / s0, c / s1, m / s2)
                    penalty[i] = self.weight * self._remaining_work(order[i], k + 1, scale) / mean_r
                    continue
            penalty[i] = np.inf
            live -= 1
            if kept and isfinite(score[i]):   # its alignment is finite: its score becomes -inf
                score[i] = -np.inf
            else:
                kept = False
        return [Step(order[i].job, ladders[i].counts[taken[i] - 1]) for i in first]

    def _first_work(self, jobs: list[Active], scale) -> list[float]:
        """Each job's remaining work at its first step, ``_remaining_work(a, 0, scale)`` with the same
        operations: per job the time a unit of work takes there and the share of the cluster it holds
        are kept (the share for as long as the cluster's capacity stays the same); only the remaining
        iterations are read again."""
        if tuple(scale.tolist()) != self._scale:   # nodes went down or came up: new shares
            self._scale = tuple(scale.tolist())       # one object per capacity: checked by identity
        key = self._scale
        for a in jobs:
            if a.truth is None or a.truth[2] is not key:
                self._learn(a, key)
        return [max(t[0] - a.job.iterations_done, 0.0) * t[3] * t[4] for a in jobs for t in (a.truth,)]

    def _learn(self, active: Active, scale: tuple) -> list:
        """The job's constants: [total work, time a unit of work takes per step, the capacity the
        rest is for, the time and the share of that capacity at the first step]."""
        if active.truth is None:
            active.truth = [active.job.total_work, {}, None, 0.0, 0.0]
        truth = active.truth
        g, c, m = active.ladder.total[0]
        truth[2:] = (scale, self._unit_time(active, 0), g / scale[0] + c / scale[1] + m / scale[2])
        return truth

    def _remaining_work(self, active: Active, k: int, scale) -> float:
        """Remaining time at the job's step ``k`` times the share of the cluster it then holds
        (ground truth: oracle only). The speed is the job's profiled one at those counts, each task
        on its own server; a job without a speed model (a bare test engine) runs at its request's
        speed scaled by its tasks (the time at the request, ``duration``, x request / tasks)."""
        if active.truth is None:
            self._learn(active, tuple(scale.tolist()))
        left = max(active.truth[0] - active.job.iterations_done, 0.0)
        g, c, m = active.ladder.total[k]
        return left * self._unit_time(active, k) * (g / scale[0] + c / scale[1] + m / scale[2])

    def _unit_time(self, active: Active, k: int) -> float:
        """The time a unit of work takes at the job's step ``k`` (kept per job and step)."""
        per_step = active.truth[1]
        t = per_step.get(k)
        if t is None:
            rate = self._rate(active.job, active.ladder.counts[k])
            t = per_step[k] = 1.0 / rate if rate > 0 else np.inf
        return t

    @staticmethod
    def _rate(job, counts: dict) -> float:
        try:
            return job.profiled.counts_rate(counts, max(1, sum(counts.values())))
        except PolicyError:   # no speed model to profile with: linear in the scaling role's tasks
            request = {r.name: r.count for r in job.roles}
            base = job.total_work / job.duration if job.duration else 1.0
            n = [counts[r] / request[r] for r in request if request[r] and counts.get(r)]
            return base * (min(n) if n else 0.0)
