"""Finish-time fairness (Themis, Mahajan et al., NSDI'20), as Gavel runs it in rounds (Gavel
``FinishTimeFairnessPolicyWithPerf``, OSDI'20 §4.1; the Shockwave simulator's baseline).

A job's finish-time fairness ``rho = (t + R / (T x)) / (C + R / T_iso)``: ``t`` the time since it
arrived, ``R`` its remaining iterations (it declares its size: ``observe.declared_iterations``),
``T`` its throughput on its requested GPUs (``JobView.profiled``), ``x`` its fraction of time on
them; below the line, its finish time had it had an equal ``1/n`` share of the cluster all along:
``C`` the time its work so far would have taken at that share (accumulated decision by decision,
as Gavel does), ``T_iso = T * min(1, GPUs / (n * scale))``. The fractions minimise the largest rho
subject to ``sum scale * x <= GPUs`` and ``x <= 1``: the least rho every job can reach (each at
``x = 1`` at most) is raised by bisection until the jobs' needs ``x(rho) = R / (T (rho D - t))``
fit the GPUs. Rounds then run as in max-min fairness (policies/max_min_fairness.py): jobs ranked
by ``x`` over the fraction of time they have run. A job that declares no size gets its equal share
``min(1, GPUs / (n * scale))`` (departure: Gavel always knows the remaining steps).
docs/policies/themis.md.
"""

from __future__ import annotations

from clustersim.policies.base import View, register
from clustersim.policies.max_min_fairness import MaxMinFairness


@register
class Themis(MaxMinFairness):
    name = "themis"

    def reset(self, view: View) -> None:
        super().reset(view)
        self._isolated: dict[str, float] = {}    # job -> C, the isolated time of its work so far
        self._last: dict[str, tuple[float, float]] = {}   # job -> (iterations done, T_iso) at the last decision

    def fractions(self, active, gpus: float, now: float) -> dict[str, float]:
        n = len(active)
        x: dict[str, float] = {}
        need = []   # (job, t, R, T, D) for the jobs that declare a size
        for j in active:
            scale = max(j.num_gpus, 1e-12)
            share = min(1.0, gpus / (n * scale))
            done = j.iterations_done
            rate = j.profiled.counts_rate(j.requested_counts())
            if j.job_id in self._last:
                prev_done, prev_iso = self._last[j.job_id]
                if prev_iso > 0:
                    self._isolated[j.job_id] = self._isolated.get(j.job_id, 0.0) + (done - prev_done) / prev_iso
            self._last[j.job_id] = (done, rate * share)
            if j.declared_iterations is None or rate <= 0:
                x[j.job_id] = share
                continue
            left = max(j.declared_iterations - done, 0.0)
            need.append((j, now - j.submit_time, left, rate, self._isolated.get(j.job_id, 0.0) + left / (rate * share)))
        ids = {j.job_id for j in active}   # forget ended jobs: a long replay keeps nothing per finished job
        self._last = {k: v for k, v in self._last.items() if k in ids}
        self._isolated = {k: v for k, v in self._isolated.items() if k in ids}
        room = gpus - sum(x[j.job_id] * j.num_gpus for j in active if j.job_id in x)
        x.update(_min_max_rho(need, room))
        return x


def _min_max_rho(need, gpus: float) -> dict[str, float]:
    """Fractions that minimise the largest finish-time fairness of ``need`` on ``gpus`` GPUs."""
    if not need:
        return {}

    def fractions(rho):
        out = {}
        for j, t, left, rate, d in need:
            slack = rho * d - t
            out[j.job_id] = 1.0 if slack <= 0 else min(1.0, left / (rate * slack)) if left > 0 else 0.0
        return out

    def used(fr):
        return sum(fr[j.job_id] * j.num_gpus for j, *_ in need)

    lo = max(((t + left / rate) / d if d > 0 else 0.0) for j, t, left, rate, d in need)   # each at x = 1
    if used(fractions(lo)) <= gpus + 1e-9:
        return fractions(lo)
    hi = max(lo, 1.0) * 2
    while used(fractions(hi)) > gpus + 1e-9 and hi < 1e12:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if used(fractions(mid)) <= gpus + 1e-9 else (mid, hi)
    return fractions(hi)
