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

from clustersim.policies.admission import GpuSizes, budget
from clustersim.policies.base import Decision, JobView, Policy, View, register
from clustersim.policies.placement import PlacementAnyCluster, keep_in_place, release, strategy
from clustersim.simulator.cluster import EPS


class _ShortestFirst(Policy):
    oracle = True
    tags = frozenset({"oracle", "multi-resource", "ps"})
    preemptive: ClassVar[bool] = False
    decides_only_when_waiting = True   # nothing waiting: _fill and _replan return {}, and no wakeup

    def __init__(self, placement: PlacementAnyCluster = "first_fit", gpu_time: bool = False):
        self.place = strategy(placement)
        self.gpu_time = gpu_time

    def reset(self, view: View) -> None:
        self.waiting: list = []                  # heap of (size, submit, index, job, demand): sizes fixed while waiting
        self.running: dict[str, JobView] = {}
        self.gpu_sizes = GpuSizes()
        self.truth: dict[str, tuple] = {}        # job id -> (time, work, demand): read once per job
        self.nodes_up = int(view.cluster.up.sum())

    def size(self, job: JobView) -> float:
        """True running time left at the requested allocation (the whole of it for sjf)."""
        t, work, demand, _, _ = self.truth[job.job_id]
        if self.preemptive:
            t *= max(work - job.iterations_done, 0.0) / work
        return t * demand[0] if self.gpu_time else t

    def decide(self, view: View) -> Decision:
        up = int(view.cluster.up.sum())
        changed = bool(view.arrived or view.finished) or up != self.nodes_up
        self.nodes_up = up
        for job in view.finished:
            del self.running[job.job_id]
            del self.truth[job.job_id]
            self.gpu_sizes.remove(job.num_gpus)
        for job in view.arrived:
            t = job.duration if job.duration is not None else job.total_work
            self.truth[job.job_id] = (t, job.total_work, job.requested_demand(), job.submit_time, job.index)
            self.gpu_sizes.add(job.num_gpus)
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
        smallest = self.gpu_sizes.smallest()
        while self.waiting and free[:, 0].sum() + EPS >= smallest:
            entry = heapq.heappop(self.waiting)
            job = entry[3]
            alloc = self.place(free, job.roles, job.requested_counts())
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
        left = budget(view.cluster)
        smallest = self.gpu_sizes.smallest()
        running = self._ranked()
        waiting = self.waiting
        starting, stops, popped, r, n = [], [], [], 0, len(running)
        # entries are (size, submit, index, job, demand): the index differs between any two jobs, so
        # neither jobs nor demands are ever compared
        while left[0] >= smallest:
            ran = r < n and (not waiting or running[r] <= waiting[0])
            if ran:
                entry = running[r]
                r += 1
            elif waiting:
                entry = heapq.heappop(waiting)
                popped.append(entry)
            else:
                break
            g, c, m = entry[4]
            if g <= left[0] and c <= left[1] and m <= left[2]:  # admission.admit, inline: the hot loop
                left[0] -= g
                left[1] -= c
                left[2] -= m
                if not ran:
                    starting.append(entry[3])
            elif ran:
                stops.append(entry[3])
        stops.extend(e[3] for e in running[r:])   # in rank order, as those that did not fit
        free = view.cluster.free_copy()
        for job in stops:
            release(free, job)
        decision: dict = {}
        for job in starting:
            alloc = self.place(free, job.roles, job.requested_counts())
            if alloc is not None:
                decision[job.job_id] = alloc
        for job in stops:
            if not keep_in_place(free, job):  # still needed by an admitted job
                decision[job.job_id] = None
                del self.running[job.job_id]
        for entry in popped:
            if entry[3].job_id not in decision:
                heapq.heappush(self.waiting, entry)
        for job_id, alloc in decision.items():
            if alloc is None:
                self._wait(view.running[job_id])
            else:
                self.running[job_id] = view.pending[job_id]
        return decision

    def _ranked(self) -> list[tuple]:
        """The running jobs as (size, submit, index, job, demand), smallest first: ``size`` inline, with the
        per-job constants read once (this runs over every running job at every replan)."""
        truth, gpu_time, rows = self.truth, self.gpu_time, []
        append = rows.append
        for job_id, job in self.running.items():
            t, work, demand, submit, index = truth[job_id]
            rest = work - job.iterations_done
            t *= (rest if rest > 0.0 else 0.0) / work   # max(rest, 0.0), without the call
            append((t * demand[0] if gpu_time else t, submit, index, job, demand))
        rows.sort()
        return rows

    def _wait(self, job: JobView) -> None:
        heapq.heappush(self.waiting, (self.size(job), job.submit_time, job.index, job, self.truth[job.job_id][2]))


@register
class ShortestJobFirst(_ShortestFirst):
    name = "sjf"
    preemptive = False


@register
class ShortestRemainingTimeFirst(_ShortestFirst):
    name = "srtf"
    preemptive = True
