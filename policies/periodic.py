"""Elastic reallocation every scheduling interval, shared by DRF and Tetris.

As in Optimus's setup (seed 004 §4, §6.1; note optimus.md §3.1, §4), every ``interval``
seconds the policy recomputes, from nothing, how many tasks each active job gets, in steps:
a job's first step is its gang minimum (``min_count`` of every role), each later step one
*bundle*, one more task of every elastic role (for a PS/worker job one PS and one worker:
the PS:worker ratio 1:1 of Optimus §6.1), up to ``max_count``. Allocation works on the
cluster's total capacity (Optimus Eq. 7); the counts are then placed: jobs keep the tasks
they have where they can, shrink by dropping tasks, and grow or start through a placement
strategy, in the policy's priority order. A job whose step cannot be placed gets the largest
smaller step that can; a job whose gang minimum cannot be placed waits for the next interval
(Optimus §4.2 "temporarily paused"). With ``event_driven`` the plan is also rebuilt at every
arrival and completion, not only at interval boundaries.
"""

from __future__ import annotations

import numpy as np

from clustersim.policies.base import Decision, JobView, Policy, View
from clustersim.policies.placement import PlacementName, merge, shrink, strategy
from clustersim.simulator.params import Positive
from clustersim.simulator.job import task_counts, task_demand


class Step:
    """A job's allocation as planned: task counts per role and the demand of its next step."""

    __slots__ = ("job", "counts", "next")

    def __init__(self, job: JobView):
        self.job = job
        self.counts = {r.name: 0 for r in job.roles}
        self.next = {r.name: r.min_count for r in job.roles}

    def demand(self, counts: dict | None = None) -> np.ndarray:
        counts = self.next if counts is None else counts
        gpu = cpu = mem = 0
        for r in self.job.roles:
            n = counts[r.name]
            gpu, cpu, mem = gpu + n * r.gpu, cpu + n * r.cpu, mem + n * r.mem
        return np.array([gpu, cpu, mem])

    def take(self) -> None:
        """Apply the next step; the one after it is a bundle, or nothing once every role is at its max."""
        for name, n in self.next.items():
            self.counts[name] += n
        self.next = {r.name: int(r.elastic and self.counts[r.name] < r.max_count) for r in self.job.roles}
        if not any(self.next.values()):
            self.next = None


class Periodic(Policy):
    def __init__(self, interval: Positive = 1200.0, placement: PlacementName = "spread", event_driven: bool = False):
        if not interval > 0:
            raise ValueError(f"{self.name}: interval must be > 0 s, got {interval}")
        self.interval = float(interval)
        self.place = strategy(placement)
        self.event_driven = event_driven

    def reset(self, view: View) -> None:
        self.active: dict[str, JobView] = {}
        self.least: dict[str, float] = {}  # job id -> GPUs of its smallest step
        self.next_at = 0.0

    def decide(self, view: View) -> Decision:
        for job in view.finished:
            del self.active[job.job_id]
            del self.least[job.job_id]
        for job in view.arrived:
            self.active[job.job_id] = job
            self.least[job.job_id] = _least_step(job)
        due = view.now >= self.next_at - 1e-9
        changed = bool(view.arrived or view.finished or view.stopped)
        decision = Decision()
        if due or (self.event_driven and changed):
            if due:
                self.next_at = view.now + self.interval
            decision.allocations = self._apply(view, self.allocate(view, list(self.active.values())))
        decision.wakeup = self.next_at - view.now
        return decision

    def allocate(self, view: View, jobs: list[JobView]) -> list[Step]:
        """Planned task counts of the jobs that get any, in priority order."""
        raise NotImplementedError

    def smallest_step(self) -> float:
        """The fewest GPUs any active job's step needs: with fewer left, planning can stop."""
        return min(self.least.values(), default=0.0)

    # ------------------------------------------------------------------ counts -> allocations
    def _apply(self, view: View, plan: list[Step]) -> dict:
        free = view.cluster.free_copy()
        wanted = {s.job.job_id: s for s in plan}
        kept: dict[str, dict] = {}
        changes: dict = {}
        for job in view.running.values():
            step = wanted.get(job.job_id)
            now = task_counts(job.allocation)
            if step is not None and step.counts == now:  # planned as it runs: it keeps its nodes
                del wanted[job.job_id]
                continue
            keep = {} if step is None else {r: min(now.get(r, 0), step.counts[r]) for r in step.counts}
            smaller = shrink(job.allocation, keep) if any(keep.values()) else {}
            _give_back(free, job, job.allocation, smaller)
            kept[job.job_id] = smaller
            if not smaller:
                changes[job.job_id] = None
        for step in plan:
            job = step.job
            if job.job_id not in wanted:
                continue
            base = kept.get(job.job_id, {})
            alloc = self._grow(free, step, base)
            if alloc is None:
                continue
            if alloc != job.allocation:
                changes[job.job_id] = alloc
            else:
                changes.pop(job.job_id, None)
        return changes

    def _grow(self, free: np.ndarray, step: Step, base: dict) -> dict | None:
        """``base`` plus as much of the planned growth as the placement finds room for."""
        job = step.job
        have = task_counts(base)
        floor = {r.name: max(have.get(r.name, 0), r.min_count if not base else 0) for r in job.roles}
        target = dict(step.counts)
        while True:
            extra = {r: target[r] - have.get(r, 0) for r in target if target[r] > have.get(r, 0)}
            if not extra:
                return base or None
            placed = self.place(free, job.roles, extra)
            if placed is not None:
                return merge(base, placed)
            smaller = {r.name: target[r.name] - int(r.elastic and target[r.name] > floor[r.name])
                       for r in job.roles}
            if smaller == target or any(smaller[r] < floor[r] for r in smaller):
                return base or None
            target = smaller


def _give_back(free: np.ndarray, job: JobView, old, new) -> None:
    for role in job.roles:
        before, after = old.get(role.name, {}), new.get(role.name, {})
        d = np.asarray(task_demand(role, before))
        for node, c in before.items():
            free[node] += (c - after.get(node, 0)) * d


def _least_step(job: JobView) -> float:
    """The fewest GPUs any step of the job needs (its gang minimum, or a bundle that has GPUs)."""
    first = sum(r.min_count * r.gpu for r in job.roles)
    bundle = sum(r.gpu for r in job.roles if r.elastic)
    return float(min(first, bundle)) if bundle > 0 else float(first)
