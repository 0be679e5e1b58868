"""ES, the elastic scheduler of Or et al. (MLSys'20) as DLRover §6.3 configures it (seed 000):
jobs start at their owner's request; every ``interval`` s a job that has trained at its size
gets ``step`` more workers (4 for the IO-bound Wide&Deep and DeepFM, 1 for the compute-bound
xDeepFM and DCN) while the last step's scaling efficiency -- the throughput one added worker
brought over the throughput per worker before it -- is at least ``min_efficiency`` (0.3); a step
below it is taken back and the job stays at that size. ES never changes the PS or any task's
CPU, and keeps each job within its CPU cap ([D] §6.1). Pending jobs start in arrival order
wherever they fit (backfilling, as Kubernetes).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Annotated

from clustersim.policies.base import Decision, JobView, Policy, View, register
from clustersim.policies.placement import PlacementAnyCluster, merge, shrink, strategy
from clustersim.simulator.job import task_counts
from clustersim.simulator.params import Fraction, Positive, Range

# workers added per step: 1 to 1,024 (choice: a bound on one scale-out)
Step = Annotated[int, Range(ge=1, le=1024)]
IO_BOUND_STEP = {"wide_deep": 4, "deepfm": 4, "xdeepfm": 1, "dcn": 1}   # [D] §6.3


@register
class ElasticScheduler(Policy):
    name = "es"
    tags = frozenset({"elastic", "multi-resource", "ps"})

    def __init__(self, interval: Positive = 180.0, min_efficiency: Fraction = 0.3,
                 steps: dict[str, Step] | None = MappingProxyType(IO_BOUND_STEP), default_step: Step = 1,
                 job_cpu_cap: Positive = 200.0, placement: PlacementAnyCluster = "spread"):
        self.interval, self.min_efficiency = float(interval), float(min_efficiency)
        self.steps = dict(IO_BOUND_STEP if steps is None else steps)   # None: the default, as a config has it
        self.default_step, self.job_cpu_cap = default_step, float(job_cpu_cap)
        self.placement = placement
        self.place = strategy(placement)

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)
        self.queue: dict[str, JobView] = {}
        self.last: dict[str, tuple] = {}      # job -> (workers, rate) before its last step
        self.done: set[str] = set()
        self.changed: dict[str, float] = {}
        self.next_round = 0.0

    def decide(self, view: View) -> Decision:
        for job in view.finished:
            self.queue.pop(job.job_id, None)
            self.last.pop(job.job_id, None)
        for job in (*view.arrived, *view.stopped):
            self.queue[job.job_id] = job
        self.queue = dict(sorted(self.queue.items(), key=lambda kv: (kv[1].submit_time, kv[1].index)))
        free = view.cluster.free_copy()
        decision = Decision()
        for jid, job in list(self.queue.items()):
            alloc = self.place(free, job.roles, job.requested_counts())
            if alloc is not None:
                decision.allocations[jid] = alloc
                self.changed[jid] = view.now
                del self.queue[jid]
        if view.now >= self.next_round - 1e-9:
            self.next_round = view.now + self.interval
            for jid, job in view.running.items():
                if jid not in decision.allocations and "worker" in task_counts(job.allocation) and len(job.roles) > 1:
                    self._step(view, job, free, decision)
        if self.queue or view.running or decision.allocations:
            decision.wakeup = max(self.next_round - view.now, 1e-3)
        return decision

    def _rate(self, job: JobView, since: float) -> float | None:
        """The last steady throughput measured at the current allocation since ``since``."""
        s = job.throughput_samples
        if s and s[-1].start >= since and task_counts(s[-1].allocation) == task_counts(job.allocation):
            return s[-1].rate
        return None

    def _step(self, view: View, job: JobView, free, decision: Decision) -> None:
        jid = job.job_id
        if jid in self.done or job.reconfiguring:
            return
        rate = self._rate(job, self.changed.get(jid, 0.0))
        if rate is None:
            return
        counts = task_counts(job.allocation)
        w = counts["worker"]
        before = self.last.get(jid)
        if before is not None:
            w0, r0 = before
            eff = ((rate - r0) / max(w - w0, 1)) / (r0 / w0) if r0 > 0 else 0.0
            if eff < self.min_efficiency:   # take the step back and stay
                decision.allocations[jid] = shrink(job.allocation, {**counts, "worker": w0})
                self.changed[jid] = view.now
                self.done.add(jid)
                return
        role = next(r for r in job.roles if r.name == "worker")
        step = min(self.steps.get(job.model or "", self.default_step), role.max_count - w)
        while step > 0 and alloc_demand_cpu(job, step) > self.job_cpu_cap + 1e-9:
            step -= 1
        if step <= 0:
            self.done.add(jid)
            return
        placed = self.place(free, [role], {"worker": step})
        if placed is None:
            return
        decision.allocations[jid] = merge(job.allocation, placed)
        self.last[jid] = (w, rate)
        self.changed[jid] = view.now


def alloc_demand_cpu(job: JobView, extra_workers: int) -> float:
    """Cores the job would hold with ``extra_workers`` more workers."""
    role = next(r for r in job.roles if r.name == "worker")
    return alloc_demand_spec(job) + extra_workers * role.cpu


def alloc_demand_spec(job: JobView) -> float:
    total = 0.0
    for r in job.roles:
        total += task_counts(job.allocation).get(r.name, 0) * r.cpu
    return total
