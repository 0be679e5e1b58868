"""The event loop: arrivals, completions, reconfiguration phases, policy wake-ups, failures.

Between events every job runs at a constant rate, so completion times are computed, not
stepped. Any event that may change what a policy would do asks for one decision, which
runs after every other event of the same instant. The policy's desired allocations are
reconciled with the actual ones: all changed jobs release, then all take, and each change
is charged by the overhead model.
"""

from __future__ import annotations

from collections import deque
from functools import partial

import simpy
from simpy.events import NORMAL, Event
from tqdm import tqdm

from clustersim.policies.base import Decision, JobView, Policy, PolicyError, View, read_only
from clustersim.simulator.cluster import Cluster
from clustersim.simulator.job import EMPTY, Allocation, JobSpec, JobState, Status, alloc_gpus, nodes_of, task_counts
from clustersim.simulator.metrics import Recorder
from clustersim.simulator.overhead import Change, ConstantOverhead, OverheadModel
from clustersim.simulator.speed import LinearSpeed, SpeedModel

DECIDE = NORMAL + 1  # decisions run after every other event of the same instant


class _Call(Event):
    """An event that calls ``fn(event)`` after ``delay`` (SimPy's Timeout, with a priority)."""

    def __init__(self, env: simpy.Environment, delay: float, fn, priority: int = NORMAL):
        super().__init__(env)
        self._ok = True
        self._value = None
        self.callbacks.append(fn)
        env.schedule(self, priority, delay)


class Engine:
    def __init__(self, jobs: list[JobSpec], cluster: Cluster, policy: Policy, *,
                 speed: SpeedModel | None = None, overhead: OverheadModel | None = None,
                 until: float | None = None, progress: bool | None = None):
        self.env = simpy.Environment()
        self.cluster = cluster
        self.policy = policy
        self.speed = speed or LinearSpeed()
        self.overhead = overhead or ConstantOverhead()
        self.until = until
        self.jobs = sorted(jobs, key=lambda j: (j.submit_time, j.index))
        self.states = {j.job_id: JobState(j) for j in self.jobs}
        if len(self.states) != len(self.jobs):
            raise ValueError("job ids must be unique")
        self.views = {k: JobView(s, self.env, policy.oracle) for k, s in self.states.items()}
        self.pending: dict[str, JobView] = {}
        self.running: dict[str, JobView] = {}
        self._arrived: list[JobView] = []
        self._finished: list[JobView] = []
        self._stopped: list[JobView] = []
        self._next = 0  # index of the next job to arrive
        self._deciding = False
        self._wakeup_at: float | None = None
        self.recorder = Recorder(cluster)
        self._who = f"policy {policy.name!r}"
        self.events = 0
        horizon = max((j.submit_time + (j.duration or 0) for j in self.jobs), default=0.0)
        self._bar = tqdm(total=round(horizon), unit="sim s", delay=2.0, disable=None if progress is None else not progress,
                         leave=False, dynamic_ncols=True)
        self._check_fit()

    # ------------------------------------------------------------------ running
    def run(self) -> Recorder:
        view = self._view()
        self.policy.reset(view)
        if self.jobs:
            _Call(self.env, self.jobs[0].submit_time, self._arrive)
        self.env.run(until=self.until)
        self.events = next(self.env._eid)  # SimPy numbers every event it schedules
        self._bar.close()
        now = self.env.now
        for st in self.states.values():
            if st.status in (Status.PENDING, Status.RUNNING):
                st.advance(now)
        self.recorder.finish(self.states.values(), now)
        return self.recorder

    def fail_node(self, at: float, node: int, repair_after: float | None = None) -> None:
        """Hook for the fault models: ``node`` goes down at ``at``, its jobs stop and re-queue."""
        _Call(self.env, at - self.env.now, partial(self._node_down, node, repair_after))

    # ------------------------------------------------------------------ events
    def _arrive(self, _ev) -> None:
        now = self.env.now
        jobs = self.jobs
        while self._next < len(jobs) and jobs[self._next].submit_time <= now:
            view = self.views[jobs[self._next].job_id]
            self.pending[view.job_id] = view
            self._arrived.append(view)
            self._next += 1
        if self._next < len(jobs):
            _Call(self.env, jobs[self._next].submit_time - now, self._arrive)
        self._request_decision()

    def _complete(self, st: JobState, version: int, _ev) -> None:
        if version == st.version:
            self._finish(st)

    def _finish(self, st: JobState) -> None:
        now = self.env.now
        st.advance(now)
        st.progress = st.spec.total_work
        self.cluster.release(st.spec, st.allocation)
        _hold_nothing(st)
        st.status, st.end_time = Status.FINISHED, now
        view = self.running.pop(st.spec.job_id)
        self._finished.append(view)
        self.recorder.event(now, st, "finish", 0.0)
        self._request_decision()

    def _phase_end(self, st: JobState, version: int, _ev) -> None:
        if version != st.version:
            return
        st.advance(self.env.now)
        if st.progress >= st.spec.total_work * (1 - 1e-12):  # done exactly as the phase ended
            self._finish(st)
            return
        st.phases.popleft()
        st.version += 1
        self._enter_phase(st)

    def _node_down(self, node: int, repair_after: float | None, _ev) -> None:
        self.cluster.up[node] = False
        for view in list(self.running.values()):
            st = self.states[view.job_id]
            if node in nodes_of(st.allocation):
                self.cluster.release(st.spec, st.allocation)
                self._reconfigure(st, EMPTY, Change.FAIL)
        self.recorder.node(self.env.now, node, up=False)
        if repair_after is not None:
            _Call(self.env, repair_after, partial(self._node_up, node))
        self._request_decision()

    def _node_up(self, node: int, _ev) -> None:
        self.cluster.up[node] = True
        self.recorder.node(self.env.now, node, up=True)
        self._request_decision()

    def _wake(self, _ev) -> None:
        if self._wakeup_at == self.env.now:
            self._wakeup_at = None
            self._request_decision()

    # ------------------------------------------------------------------ decisions
    def _request_decision(self) -> None:
        if not self._deciding:
            self._deciding = True
            _Call(self.env, 0.0, self._decide, DECIDE)

    def _view(self) -> View:
        view = View(self.env, self.cluster, read_only(self.pending), read_only(self.running),
                    self._arrived, self._finished, self._stopped)
        self._arrived, self._finished, self._stopped = [], [], []
        return view

    def _decide(self, _ev) -> None:
        self._deciding = False
        now = self.env.now
        decision = self.policy.decide(self._view())
        if not isinstance(decision, Decision):
            raise PolicyError(f"{self._who} returned {type(decision).__name__}, not a Decision")
        changed = self._apply(decision.allocations) if decision.allocations else False
        self.recorder.sample(now, len(self.running), len(self.pending))
        if self._bar.disable is False:
            self._bar.update(min(round(now), self._bar.total) - self._bar.n)
        if decision.wakeup is not None:
            self._schedule_wakeup(decision.wakeup, changed)

    def _schedule_wakeup(self, delay: float, changed: bool) -> None:
        if not delay > 0:
            raise PolicyError(f"{self._who} asked to be woken after {delay!r} s; it must be > 0")
        # with nothing running, nothing to arrive and nothing changed, waking again would loop forever
        if self.running or self._next < len(self.jobs) or changed:
            self._wakeup_at = self.env.now + delay
            _Call(self.env, delay, self._wake)

    def _apply(self, wanted: dict[str, Allocation | None]) -> bool:
        changes = []
        for job_id, alloc in wanted.items():
            st = self.states.get(job_id)
            if st is None or (job_id not in self.pending and job_id not in self.running):
                raise PolicyError(f"{self._who}: job {job_id!r} is not pending or running")
            new = self._validated(st.spec, alloc)
            if new != st.allocation:
                changes.append((st, new))
        for st, _ in changes:
            if st.allocation:
                self.cluster.release(st.spec, st.allocation)
        for st, new in changes:
            if new:
                self.cluster.take(st.spec, new, self._who)
        for st, new in changes:
            self._reconfigure(st, new, _classify(st, new))
        return bool(changes)

    def _validated(self, spec: JobSpec, alloc: Allocation | None) -> Allocation:
        """Normalise a wanted allocation and check it against the job's roles and bounds."""
        if not alloc:
            return EMPTY
        new = {}
        for role, nodes in alloc.items():
            placed = {int(n): int(c) for n, c in nodes.items() if c}
            if any(c < 0 for c in placed.values()):
                raise PolicyError(f"{self._who}: job {spec.job_id!r} role {role!r} has a negative task count")
            if placed:
                new[role] = placed
        for r in spec.roles:
            n = sum(new.get(r.name, {}).values())
            if not r.min_count <= n <= r.max_count:
                raise PolicyError(f"{self._who}: job {spec.job_id!r} role {r.name!r} gets {n} tasks; "
                                  f"it must run with {r.min_count}..{r.max_count} (gang)")
        unknown = set(new) - {r.name for r in spec.roles}
        if unknown:
            raise PolicyError(f"{self._who}: job {spec.job_id!r} has no role(s) {sorted(unknown)}")
        return new

    # ------------------------------------------------------------------ state changes
    def _reconfigure(self, st: JobState, new: Allocation, change: Change) -> None:
        now = self.env.now
        st.advance(now)
        job_id = st.spec.job_id
        old_gpus = st.gpus
        if not new:
            _hold_nothing(st)
            st.busy_until = now
            st.status = Status.PENDING
            if change is Change.FAIL:
                st.failures += 1
            else:
                st.preemptions += 1
            view = self.running.pop(job_id)
            self.pending[job_id] = view
            self._stopped.append(view)
            self.recorder.event(now, st, change.value, 0.0, old_gpus)
            return
        old_rate = st.steady_rate
        new_rate = self.speed.rate(st.spec, new, self.cluster)
        if not new_rate > 0:
            raise PolicyError(f"{self._who}: job {job_id!r} would make no progress on {dict(new)}")
        tr = self.overhead.transition(st.spec, change, st.allocation, new)
        prep_rate = min(old_rate, new_rate)
        carry = st.busy_until - now
        if carry > 0:  # still reconfiguring: the new change waits for the old one to end
            lost = tr.prepare_s + tr.pause_s
            phases = [(carry + lost, 0.0)]
        else:
            lost = tr.pause_s + tr.prepare_s * (1.0 - prep_rate / new_rate)
            phases = [(tr.prepare_s, prep_rate), (tr.pause_s, 0.0)]
        st.allocation, st.gpus, st.steady_rate = new, alloc_gpus(st.spec, new), new_rate
        st.overhead_s += lost
        st.overhead_gpu_s += lost * st.gpus
        if change in (Change.START, Change.RESUME):
            st.status = Status.RUNNING
            if st.first_start is None:
                st.first_start = now
            self.running[job_id] = self.pending.pop(job_id)
        elif change is Change.MIGRATE:
            st.migrations += 1
        else:
            st.rescales += 1
        self._set_phases(st, phases)
        self.recorder.event(now, st, change.value, lost, old_gpus)

    def _set_phases(self, st: JobState, phases: list[tuple[float, float]]) -> None:
        t = self.env.now
        st.phases = deque()
        for duration, rate in phases:
            if duration > 0:
                t += duration
                st.phases.append((t, rate))
        st.busy_until = t
        st.version += 1
        self._enter_phase(st)

    def _enter_phase(self, st: JobState) -> None:
        """Set the rate of the current phase; schedule its end and, if sooner, the completion."""
        now = self.env.now
        end = None
        if st.phases:
            end, st.rate = st.phases[0]
            _Call(self.env, end - now, partial(self._phase_end, st, st.version))
        else:
            st.rate = st.steady_rate
        if st.rate > 0:
            finish = now + (st.spec.total_work - st.progress) / st.rate
            if end is None or finish < end:
                _Call(self.env, max(finish - now, 0.0), partial(self._complete, st, st.version))

    def _check_fit(self) -> None:
        seen: dict = {}
        for spec in self.jobs:
            ok = seen.get(spec.roles)
            if ok is None:
                ok = seen[spec.roles] = self.cluster.fits(spec)
            if not ok:
                need = ", ".join(f"{r.name} {r.min_count} x {r.gpu:g} GPU/{r.cpu:g} cores/{r.mem:g} GB"
                                 for r in spec.roles)
                have = "/".join(f"{x:g}" for x in self.cluster.total)
                raise ValueError(f"job {spec.job_id!r} asks for more than the whole cluster "
                                 f"({spec.num_gpus:g} GPUs of {self.cluster.total_gpus:g}; at its smallest: {need}; "
                                 f"cluster GPU/cores/GB {have}, node by node); "
                                 "drop or clamp such jobs with the trace's oversize rule")


def _hold_nothing(st: JobState) -> None:
    """A finished or stopped job: no resources, no rate, no phase or completion pending."""
    st.allocation, st.gpus, st.rate, st.steady_rate = EMPTY, 0.0, 0.0, 0.0
    st.phases.clear()
    st.version += 1


def _classify(st: JobState, new: Allocation) -> Change:
    old = st.allocation
    if not new:
        return Change.STOP
    if not old:
        return Change.RESUME if st.first_start is not None else Change.START
    a, b = task_counts(old), task_counts(new)
    if a == b:
        return Change.MIGRATE
    roles = set(a) | set(b)
    if all(b.get(r, 0) >= a.get(r, 0) for r in roles):
        return Change.SCALE_OUT
    if all(b.get(r, 0) <= a.get(r, 0) for r in roles):
        return Change.SCALE_IN
    return Change.RESCALE
