"""ElasticFlow (Gu et al., ASPLOS'23): deadline-aware elastic scheduling with admission control.

At every decision (§4, Algorithm 1, in the form this simulator's engine can run):

- **Minimum satisfactory share** (§4.1): the fewest GPUs, among the job's levels (powers of two
  within its bounds: ElasticFlow's throughput-table GPU counts), at which the job run from now on
  finishes its remaining iterations by its deadline, at its profiled throughput on that many GPUs
  packed (the job declares its iterations: ``observe.declared_iterations``; the throughput is
  ElasticFlow's offline profile, ``JobView.profiled``).
- **Admission control** (§4.2): an arriving job is admitted if the minimum satisfactory shares of
  every admitted job still running, taken in deadline order, and its own fit the cluster's GPUs;
  otherwise it is not admitted. ElasticFlow drops such a job; the engine runs every job to the end,
  so here it runs as a best-effort job (§4: jobs without deadlines), on what admitted jobs leave.
  A job without a deadline or without declared iterations is best-effort from the start.
- **Allocation** (§4.3): admitted jobs get their minimum satisfactory shares in deadline order (a
  job that can no longer meet its deadline gets its levels' least); best-effort jobs then their
  least level in arrival order; every GPU left goes, one level step at a time, to the job whose next
  level saves the largest share of its remaining time per added GPU (the highest marginal return),
  while a step saves any.

Jobs are placed with the configured strategy (``first_fit``: ElasticFlow's elastic scheme, admission
by GPU count), largest first; a running job whose count is unchanged keeps its nodes.

Departures (documented in docs/policies/elasticflow.md): shares are constant from now to the
deadline (ElasticFlow's planner fills future time slots as jobs end, admitting more); a job not
admitted runs best-effort instead of being dropped.
"""

from __future__ import annotations

import math

from clustersim.policies.admission import budget
from clustersim.policies.base import Decision, Policy, View, register
from clustersim.policies.edf import place_counts, rank, scaling
from clustersim.policies.placement import _NO_NODES, PlacementName, min_nodes, strategy


@register
class ElasticFlow(Policy):
    name = "elasticflow"
    tags = frozenset({"elastic"})

    def __init__(self, placement: PlacementName = "first_fit", admission: bool = True):
        self.placement = placement
        self.admission = admission
        self.place = strategy(placement, _NO_NODES)   # checks the name; bound to the cluster at reset
        self.admitted: set[str] = set()
        self.not_admitted: list[str] = []   # jobs admission control turned away (run best-effort), in order

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)
        self._capacity = view.cluster.capacity
        self.admitted, self.not_admitted = set(), []

    def decide(self, view: View) -> Decision:
        if not (view.arrived or view.finished or view.stopped) and not view.pending:
            return Decision()
        for j in view.finished:
            self.admitted.discard(j.job_id)
        total = budget(view.cluster)[0]
        active = sorted([*view.running.values(), *view.pending.values()], key=rank)
        for j in sorted(view.arrived, key=rank):
            if j.deadline is None or j.declared_iterations is None:
                continue
            shares = [self._min_share(a, view.now) for a in active if a.job_id in self.admitted]
            own = self._min_share(j, view.now)
            if not self.admission or (own is not None and sum(s or 0 for s in shares) + own <= total):
                self.admitted.add(j.job_id)
            else:
                self.not_admitted.append(j.job_id)
        left, want = total, {}
        for j in active:   # admitted jobs, by deadline: their minimum satisfactory shares
            if j.job_id in self.admitted:
                n = self._min_share(j, view.now) or _levels(j)[0]
                left = self._give(j, n, left, want)
        for j in sorted((j for j in active if j.job_id not in self.admitted), key=lambda j: (j.submit_time, j.index)):
            left = self._give(j, _levels(j)[0], left, want)   # best-effort: the least level, in arrival order
        while left > 0:   # the highest marginal return: share of remaining time saved per added GPU
            best, gain = None, 0.0
            for j in active:
                if j.job_id not in want:
                    continue
                n = want[j.job_id][scaling(j).name]
                up = next((x for x in _levels(j) if x > n), None)
                if up is None or (up - n) * scaling(j).gpu > left:
                    continue
                g = (1 - self._rate(j, n) / self._rate(j, up)) / (up - n)
                if g > gain:
                    best, gain = (j, up), g
            if best is None:
                break
            j, up = best
            left -= (up - want[j.job_id][scaling(j).name]) * scaling(j).gpu
            want[j.job_id][scaling(j).name] = up
        return Decision(place_counts(view, want, self.place))

    def _give(self, job, n: int, left: float, want: dict) -> float:
        """Give ``job`` ``n`` tasks of its scaling role if their GPUs are left; the GPUs left after."""
        r = scaling(job)
        other = sum(x.gpu * x.count for x in job.roles if x is not r)
        need = n * r.gpu + other
        if need <= left:
            want[job.job_id] = {**job.requested_counts(), r.name: n}
            return left - need
        return left

    def _rate(self, job, n: int) -> float:
        counts = {**job.requested_counts(), scaling(job).name: n}
        return job.profiled.counts_rate(counts, min(min_nodes(self._capacity, job.roles, counts), 1 << 20))

    def _min_share(self, job, now: float) -> int | None:
        """The least level at which ``job`` finishes its declared iterations by its deadline, if any."""
        if job.deadline is None or job.declared_iterations is None:
            return None
        left = max(job.declared_iterations - job.iterations_done, 0.0)
        time = job.deadline - now
        for n in _levels(job):
            if time > 0 and self._rate(job, n) * time >= left:
                return n
        return None


def _levels(job) -> list[int]:
    """The task counts ``job`` may run at: powers of two within its scaling role's bounds (the GPU
    counts of ElasticFlow's throughput tables), its bounds themselves included."""
    r = scaling(job)
    out = {r.min_count, r.max_count}
    out |= {1 << k for k in range(int(math.log2(max(r.max_count, 1))) + 1) if r.min_count <= 1 << k <= r.max_count}
    return sorted(out)
