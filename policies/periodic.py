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

from typing import Literal

import numpy as np

from clustersim.policies.base import Decision, JobView, Policy, View
from clustersim.policies.optimus import theorem1
from clustersim.policies.placement import merge, shrink, strategy
from clustersim.simulator.params import Positive
from clustersim.simulator.job import task_counts, task_demand


class Ladder:
    """A job's steps, worked out once per job (they depend only on its roles): after ``k + 1``
    steps it has ``counts[k]`` tasks per role, holding ``total[k]`` (GPUs, cores, memory); step
    ``k`` itself needs ``step[k]``. A step is a bundle, one more task of every elastic role below
    its max; there is none once every role is at its max. Extended as far as a plan climbs;
    ``known`` says whether every step is listed (a rigid job's one step, at once)."""

    __slots__ = ("roles", "counts", "step", "total", "_next", "known")

    def __init__(self, job: JobView):
        self.roles = job.roles
        self.counts: list[dict] = []
        self.step: list[tuple] = []
        self.total: list[tuple] = []
        self._next: dict | None = {r.name: r.min_count for r in self.roles}
        self.known = False
        self._climb()   # the first step, the gang minimum, always exists

    def has(self, k: int) -> bool:
        """Whether there is a step ``k`` (0: the gang minimum)."""
        while len(self.step) <= k and self._next is not None:
            self._climb()
        return k < len(self.step)

    def _climb(self) -> None:
        nxt = self._next
        counts = dict(self.counts[-1]) if self.counts else {r.name: 0 for r in self.roles}
        for name, n in nxt.items():
            counts[name] += n
        self.step.append(_demand(self.roles, nxt))
        self.total.append(_demand(self.roles, counts))
        self.counts.append(counts)
        nxt = {r.name: int(r.elastic and counts[r.name] < r.max_count) for r in self.roles}
        self._next = nxt if any(nxt.values()) else None
        self.known = self._next is None


def _demand(roles, counts: dict) -> tuple:
    gpu = cpu = mem = 0
    for r in roles:
        n = counts[r.name]
        gpu, cpu, mem = gpu + n * r.gpu, cpu + n * r.cpu, mem + n * r.mem
    return (gpu, cpu, mem)


class Active:
    """An active job with what is worked out once for it: its arrival order (``key``) and its
    ladder; ``truth`` holds a subclass's own per-job constants (Tetris: its work, the time a unit of
    work takes per step, its first step's share of the cluster)."""

    __slots__ = ("job", "key", "ladder", "truth")

    def __init__(self, job: JobView):
        self.job = job
        self.key = (job.submit_time, job.index)
        self.ladder = Ladder(job)
        self.truth = None


class Step:
    """A job's allocation as planned: task counts per role."""

    __slots__ = ("job", "counts")

    def __init__(self, job: JobView, counts: dict):
        self.job = job
        self.counts = counts


# a placement strategy of policies/placement.py that needs no cluster, or Optimus's own (theorem1:
# Optimus Fig. 17's ablations); one flat Literal so that a bad value lists the choices
PeriodicPlacement = Literal["first_fit", "best_fit", "consolidate", "spread", "align", "most_free", "theorem1"]


class Periodic(Policy):
    def __init__(self, interval: Positive = 1200.0, placement: PeriodicPlacement = "spread",
                 event_driven: bool = False):
        self.interval = float(interval)
        # theorem1: Optimus's placement for this allocation (Optimus Fig. 17's ablations)
        self.place = theorem1 if placement == "theorem1" else strategy(placement)
        self.event_driven = event_driven

    def reset(self, view: View) -> None:
        self.active: dict[str, Active] = {}  # in arrival order: (submit time, index)
        self.least: dict[str, float] = {}  # job id -> GPUs of its smallest step
        self.held: dict[str, tuple] = {}   # job id -> (allocation, its task counts) as last seen
        self.next_at = 0.0

    def decide(self, view: View) -> Decision:
        for job in view.finished:
            del self.active[job.job_id]
            del self.least[job.job_id]
            self.held.pop(job.job_id, None)
        if view.arrived:
            self._arrive(view.arrived)
        due = view.now >= self.next_at - 1e-9
        changed = bool(view.arrived or view.finished or view.stopped)
        decision = Decision()
        if due or (self.event_driven and changed):
            if due:
                self.next_at = view.now + self.interval
            decision.allocations = self._apply(view, self.allocate(view, list(self.active.values())))
        decision.wakeup = self.next_at - view.now
        return decision

    def _arrive(self, jobs) -> None:
        """Add arrivals keeping ``active`` in arrival order, so that no plan sorts its jobs again."""
        new = sorted((Active(job) for job in jobs), key=_key)
        newest = next(reversed(self.active.values()), None)
        for a in new:
            self.active[a.job.job_id] = a
            self.least[a.job.job_id] = _least_step(a.job)
        if newest is not None and new[0].key < newest.key:   # arrived out of order: sort again
            self.active = dict(sorted(self.active.items(), key=lambda item: item[1].key))

    def allocate(self, view: View, jobs: list[Active]) -> list[Step]:
        """Planned task counts of the jobs that get any, in priority order; ``jobs`` are the
        active jobs in arrival order."""
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
        held = self.held
        for job_id, job in view.running.items():
            step = wanted.get(job_id)
            # its tasks per role, counted again only when its allocation changed
            alloc = job.allocation
            seen = held.get(job_id)
            if seen is None or seen[0] is not alloc:
                seen = held[job_id] = (alloc, task_counts(alloc))
            now = seen[1]
            if step is not None and step.counts == now:  # planned as it runs: it keeps its nodes
                del wanted[job_id]
                continue
            keep = {} if step is None else {r: min(now.get(r, 0), step.counts[r]) for r in step.counts}
            smaller = shrink(alloc, keep) if any(keep.values()) else {}
            _give_back(free, job, alloc, smaller)
            kept[job_id] = smaller
            if not smaller:
                changes[job_id] = None
        for job_id, step in wanted.items():   # in plan order
            job = step.job
            alloc = self._grow(free, step, kept.get(job_id, {}))
            if alloc is None:
                continue
            if alloc != job.allocation:
                changes[job_id] = alloc
            else:
                changes.pop(job_id, None)
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


def _key(active: Active) -> tuple:
    return active.key


def _least_step(job: JobView) -> float:
    """The fewest GPUs any step of the job needs (its gang minimum, or a bundle that has GPUs)."""
    first = sum(r.min_count * r.gpu for r in job.roles)
    bundle = sum(r.gpu for r in job.roles if r.elastic)
    return float(min(first, bundle)) if bundle > 0 else float(first)
