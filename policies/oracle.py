"""Shortest-first references that know every job's true size: oracles.

``sjf``: shortest job first, non-preemptive. Waiting jobs start in order of their true
running time at the requested allocation (the trace's duration); a job that does not fit
is passed over by smaller ones behind it.

``srtf``: shortest remaining time first, preemptive. At every arrival and completion all jobs
are ranked by true remaining time; each runs at its requested size, all-or-nothing, while it
fits; a running job that no longer fits is preempted.

Both are the Tiresias simulator's ``shortest`` baselines (SymbioticLab/Tiresias,
run_sim.py ``shortest_first_sim_jobs``; Gu et al., NSDI'19 §5 use SRTF as the
clairvoyant bound). With ``gpu_time`` the size is GPU-time (time x GPUs), the simulator's
``shortest-gpu``. They read ground truth, so they declare ``oracle = True``.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

from policies.base import Decision, JobView, Policy, View, register
from policies.placement import keep_in_place, release, strategy


class _ShortestFirst(Policy):
    oracle = True
    preemptive: ClassVar[bool] = False

    def __init__(self, placement: str = "first_fit", gpu_time: bool = False):
        self.place = strategy(placement)
        self.gpu_time = gpu_time

    def reset(self, view: View) -> None:
        self.waiting: list = []                  # heap of (size, submit, index, job): sizes fixed while waiting
        self.running: dict[str, JobView] = {}
        self.gpu_sizes: dict[float, int] = {}    # GPU demand -> active jobs: the smallest ends a scan early
        self.truth: dict[str, tuple] = {}        # job id -> (time, work, GPUs, demand): read once per job
        self.nodes_up = int(view.cluster.up.sum())

    def size(self, job: JobView) -> float:
        """True running time left at the requested allocation (the whole of it for sjf)."""
        t, work, gpus, _ = self.truth[job.job_id]
        if self.preemptive:
            t *= max(work - job.iterations_done, 0.0) / work
        return t * gpus if self.gpu_time else t

    def decide(self, view: View) -> Decision:
        up = int(view.cluster.up.sum())
        changed = bool(view.arrived or view.finished) or up != self.nodes_up
        self.nodes_up = up
        for job in view.finished:
            del self.running[job.job_id]
            del self.truth[job.job_id]
            self._count(job, -1)
        for job in view.arrived:
            t = job.duration if job.duration is not None else job.total_work
            self.truth[job.job_id] = (t, job.total_work, job.num_gpus, _demand(job))
            self._count(job, 1)
            self._wait(job)
        for job in view.stopped:  # a node failure (or our own preemption, already waiting)
            if self.running.pop(job.job_id, None) is not None:
                changed = True
                self._wait(job)
        if not changed:
            return Decision()
        return Decision(self._replan(view) if self.preemptive else self._fill(view))

    def _fill(self, view: View) -> dict:
        """Start waiting jobs, shortest first, on what is free now."""
        free = view.cluster.free_copy()
        started, passed = {}, []
        smallest = min(self.gpu_sizes, default=0.0)
        while self.waiting and free[:, 0].sum() + 1e-9 >= smallest:
            entry = heapq.heappop(self.waiting)
            job = entry[-1]
            alloc = self.place(free, job.roles, _requested(job))
            if alloc is None:
                passed.append(entry)
                continue
            started[job.job_id] = alloc
            self.running[job.job_id] = job
        for entry in passed:
            heapq.heappush(self.waiting, entry)
        return started

    def _replan(self, view: View) -> dict:
        """Rank every job by remaining size; admit while the cluster's totals allow; preempt
        running jobs left out; place the admitted waiting ones."""
        if not self.waiting:  # nothing could preempt or start
            return {}
        cluster = view.cluster
        budget = (cluster.capacity[cluster.up].sum(axis=0) + 1e-9).tolist()
        smallest = min(self.gpu_sizes, default=0.0)
        running = sorted((self.size(j), j.submit_time, j.index, j) for j in self.running.values())  # index: no ties
        admitted, popped, r = [], [], 0
        while budget[0] >= smallest:
            if r < len(running) and (not self.waiting or _order(running[r]) <= _order(self.waiting[0])):
                entry = running[r]
                r += 1
            elif self.waiting:
                entry = heapq.heappop(self.waiting)
                popped.append(entry)
            else:
                break
            job = entry[-1]
            g, c, m = self.truth[job.job_id][3]
            if g <= budget[0] and c <= budget[1] and m <= budget[2]:
                budget[0] -= g
                budget[1] -= c
                budget[2] -= m
                admitted.append(job)
        chosen = {j.job_id for j in admitted}
        stops = [e[-1] for e in running if e[-1].job_id not in chosen]
        free = cluster.free_copy()
        for job in stops:
            release(free, job)
        decision: dict = {}
        for job in admitted:
            if job.job_id not in self.running:
                alloc = self.place(free, job.roles, _requested(job))
                if alloc is not None:
                    decision[job.job_id] = alloc
        for job in stops:
            if not keep_in_place(free, job):  # still needed by an admitted job
                decision[job.job_id] = None
                del self.running[job.job_id]
        for entry in popped:
            if entry[-1].job_id not in decision:
                heapq.heappush(self.waiting, entry)
        for job_id, alloc in decision.items():
            if alloc is None:
                self._wait(view.running[job_id])
            else:
                self.running[job_id] = view.pending[job_id]
        return decision

    def _wait(self, job: JobView) -> None:
        heapq.heappush(self.waiting, (self.size(job), job.submit_time, job.index, job))

    def _count(self, job: JobView, sign: int) -> None:
        n = self.gpu_sizes.get(job.num_gpus, 0) + sign
        if n:
            self.gpu_sizes[job.num_gpus] = n
        else:
            del self.gpu_sizes[job.num_gpus]


def _order(entry: tuple) -> tuple:
    return entry[:3]


def _requested(job: JobView) -> dict[str, int]:
    return {r.name: r.count for r in job.roles}


def _demand(job: JobView) -> tuple[float, float, float]:
    """GPU, CPU and memory of the requested allocation."""
    return tuple(sum(r.count * r.demand[k] for r in job.roles) for k in range(3))


@register
class ShortestJobFirst(_ShortestFirst):
    name = "sjf"
    preemptive = False


@register
class ShortestRemainingTimeFirst(_ShortestFirst):
    name = "srtf"
    preemptive = True
