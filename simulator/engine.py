"""The event loop: arrivals, completions, reconfiguration phases, policy wake-ups, failures.

Between events every job runs at a constant rate, so completion times are computed, not
stepped. Any event that may change what a policy would do asks for one decision, which
runs after every other event of the same instant (or, with a decision interval, at the next
multiple of it). The policy's desired allocations are reconciled with the actual ones: all
changed jobs release, then all take, and each change is charged by the overhead model.
Guards end a run that runs away (an event budget, a simulated-time limit, a livelock
detector) with a message naming the policy and the state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Annotated

import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, URGENT, Event
from tqdm import tqdm

from clustersim.simulator.cluster import CapacityError, Cluster
from clustersim.simulator.errors import PolicyError
from clustersim.simulator.job import (EMPTY, Allocation, Failure, JobSpec, JobState, Status, StopReason, Tasks,
                                      alloc_gpus, nodes_of, task_counts)
from clustersim.simulator.metrics import Recorder
from clustersim.simulator.overhead import FREE, STOPS, Change, ConstantOverhead, OverheadModel, Transition
from clustersim.simulator.params import NonNegative, PositiveCount, Range
from clustersim.simulator.rng import component_rng
from clustersim.simulator.speed import LinearSpeed, SpeedModel
from clustersim.simulator.view import ClusterView, Decision, JobView, Observer, View, read_only

DECIDE = NORMAL + 1  # decisions run after every other event of the same instant


class RunawayError(PolicyError):
    """The run hit a guard: the event budget, the simulated-time limit, or a livelock."""


@dataclass(frozen=True)
class Limits:
    """Guards against runs that never end (config ``limits``).

    ``max_events``: handled events before the run stops (null: 1,000 per job + 100,000, far
    above what any policy needs: a replay takes a few events per job). ``max_sim_time``: a
    simulated time the run must not pass (null: none). ``livelock_decisions``: consecutive
    decisions with nothing arriving, finishing or training (null: off)."""

    max_events: Annotated[int, Range(ge=1)] | None = None
    max_sim_time: Annotated[float, Range(gt=0)] | None = None
    livelock_decisions: PositiveCount | None = 2_000


@dataclass(frozen=True)
class Observe:
    """What policies observe (config ``observe``): throughput samples carry a relative
    measurement error of ``throughput_noise`` (standard deviation, drawn per steady interval);
    the last ``samples_kept`` intervals are kept per job; profiled rates carry a fixed per-job
    relative error of ``profiled_error``. Defaults are docs/ARCHITECTURE.md's choices."""

    throughput_noise: NonNegative = 0.02
    samples_kept: PositiveCount = 32
    profiled_error: NonNegative = 0.0
    declared_iterations: bool = False   # jobs declare their iterations (JobView.declared_iterations)


class _Call(Event):
    """An event that calls ``fn(event)`` after ``delay`` (SimPy's Timeout, with a priority)."""

    def __init__(self, env: simpy.Environment, delay: float, fn, priority: int = NORMAL):
        if not delay >= 0:
            raise ValueError(f"cannot schedule an event {delay!r} s in the past")
        # Event.__init__'s fields, set at once: one event per handled event is the hot path
        self.env, self.callbacks, self._ok, self._value = env, [fn], True, None
        env.schedule(self, priority, delay)


class _Clock(Observer):
    """The observer the engine's views read: ``now`` is the simulated time."""

    def __init__(self, env: simpy.Environment, **kw):
        super().__init__(**kw)
        self._env = env

    @property
    def now(self) -> float:
        return self._env._now   # Environment.now's own field: views read it in every policy's hot loop

    @now.setter
    def now(self, _value) -> None:   # the dataclass sets a default; the environment owns time
        pass


class Engine:
    def __init__(self, jobs: list[JobSpec], cluster: Cluster, policy, *,
                 speed: SpeedModel | None = None, overhead: OverheadModel | None = None,
                 until: float | None = None, progress: bool | None = None,
                 decision_interval: float | None = None, slot_from_last: bool = False, limits: Limits | None = None,
                 observe: Observe | None = None, usage=None, seed: int = 0, faults=None):
        self.env = simpy.Environment()
        self.faults = faults   # simulator.faults.FaultModel or None: failures, slowdowns, checkpoints
        self.cluster = cluster
        self.policy = policy
        self.speed = speed or LinearSpeed()
        self.overhead = overhead or ConstantOverhead()
        if until is not None and not (math.isfinite(until) and until >= 0):
            raise ValueError(f"until must be a finite time >= 0, got {until!r}")
        if decision_interval is not None and not (math.isfinite(decision_interval) and decision_interval > 0):
            raise ValueError(f"decision_interval must be a finite number of seconds > 0, got {decision_interval!r}")
        self.until = until
        self.interval = decision_interval
        self.slot_from_last = slot_from_last   # rounds start a slot after the last decision, not at multiples
        self._slot_start = -math.inf           # time of the last decision (slot_from_last)
        self.limits = limits or Limits()
        self.observe = observe or Observe()
        self.jobs = sorted(jobs, key=lambda j: (j.submit_time, j.index))
        self.states = {j.job_id: JobState(j) for j in self.jobs}
        if len(self.states) != len(self.jobs):
            raise ValueError("job ids must be unique")
        self.clock = _Clock(self.env, speed=self.speed, usage=usage, cluster=cluster,
                            profiled_error=self.observe.profiled_error, seed=seed, faults=faults)
        self._oracle = bool(policy.oracle)
        self.pending: dict[str, JobView] = {}
        self.running: dict[str, JobView] = {}
        self._ro_pending, self._ro_running = read_only(self.pending), read_only(self.running)
        self._cluster_view = ClusterView(cluster)
        self._arrived: list[JobView] = []
        self._finished: list[JobView] = []
        self._reported: tuple[JobView, ...] = ()   # ended jobs the last decision reported
        self._stopped: list[JobView] = []
        self._next = 0  # index of the next job to arrive
        self._decision_at: float | None = None
        self._wakeup_at: float | None = None
        self._lingering: dict[str, list] = {}   # job -> [(allocation, gpus)] a graceful scale-in still holds
        self._noise = component_rng(seed, "observe") if self.observe.throughput_noise > 0 else None
        self._noise_block: list[float] = []   # draws of _noise ahead, last first (a block: the same sequence)
        self.recorder = Recorder(cluster)
        self.recorder.speed = self.speed   # for the efficiency metrics (metrics.efficiency)
        self._who = f"policy {getattr(policy, 'name', type(policy).__name__)!r}"
        self.events = 0
        self.decisions = 0
        self._max_events = self.limits.max_events or 1000 * len(self.jobs) + 100_000
        self._moving = 0          # jobs training at a positive rate now
        self._moved = False       # some job trained since the last decision
        self._idle_decisions = 0  # consecutive decisions at which nothing progressed
        self._last_decision = (-1.0, 0)   # (time, jobs finished) at the last decision
        self._done = 0
        horizon = max((j.submit_time + (j.duration or 0) for j in self.jobs), default=0.0)
        self._bar = tqdm(total=round(horizon), unit="sim s", delay=2.0, disable=None if progress is None else not progress,
                         leave=False, dynamic_ncols=True)
        self._check_fit()

    # ------------------------------------------------------------------ running
    def run(self) -> Recorder:
        self.policy.reset(self._view())
        if self.faults is not None:
            self.faults.attach(self)
        if self.jobs:
            self._at(self.jobs[0].submit_time, self._arrive)
        try:
            self.env.run(until=self.until)
        finally:
            self._bar.close()
        now = self.env.now
        for st in self.states.values():
            if st.status in (Status.PENDING, Status.RUNNING):
                st.advance(now)
        self.recorder.finish(self.states.values(), now, self._unfinished_reason)
        return self.recorder

    def fail_node(self, at: float, node: int, repair_after: float | None = None) -> None:
        """Hook for the fault models: ``node`` goes down at ``at``, its jobs stop and re-queue."""
        if not at >= self.env.now or (repair_after is not None and not repair_after >= 0):
            raise ValueError(f"node {node}: a failure at {at!r} (repair after {repair_after!r}) is in the past")
        self._at(at - self.env.now, partial(self._node_down, node, repair_after))

    # --- hooks for fault models (simulator/faults.py)
    def at(self, delay: float, fn, first: bool = False) -> None:
        """Call ``fn()`` after ``delay`` s (``first``: before the other events of that instant)."""
        self._at(delay, lambda _ev: fn(), URGENT if first else NORMAL)

    def fail_job(self, job_id: str, cause: StopReason, role: str | None = None, node: int | None = None) -> None:
        """A task of running job ``job_id`` failed now (``cause``): the job stops at once."""
        st = self.states[job_id]
        if st.status is Status.RUNNING:
            self._count()
            self._fail(st, cause, role, node)
            self._sample_usage()
            self._request_decision()

    def refresh_rate(self, job_id: str) -> None:
        """The fault model's slowdown of a running job changed (a straggler began or ended):
        progress up to date, every rate ahead scaled, completion computed afresh."""
        st = self.states[job_id]
        if st.status is not Status.RUNNING:
            return
        self._count()
        st.advance(self.env.now)
        f = self.faults.factor(st, st.allocation)
        if f != st.factor:
            k, st.factor = f / st.factor, f
            st.steady_rate *= k
            if st.phases:
                st.phases = [(end, rate * k) for end, rate in st.phases]
            st.version += 1
            self._enter_phase(st)

    def view_of(self, job_id: str) -> JobView:
        """What a policy sees of a job. The engine makes one per job as it arrives and keeps it
        while the job is pending or running: a replay holds no view per finished job."""
        st = self.states[job_id]
        # with observe.declared_iterations, the trace's iterations are what the owner asked for
        return JobView(st, self.clock, self._oracle, st.spec.total_work if self.observe.declared_iterations else None)

    def ended(self) -> bool:
        """Every job finished or failed."""
        return self._done == len(self.jobs)

    def _at(self, delay: float, fn, priority: int = NORMAL) -> None:
        _Call(self.env, delay, fn, priority)

    def _count(self) -> None:
        """Every handled event: the runaway guards."""
        self.events += 1
        if self.events > self._max_events:
            raise RunawayError(f"{self._who}: the run passed its event budget ({self._max_events:,} events; "
                               f"limits.max_events) at t={self.env.now:g} s with {len(self.running)} running, "
                               f"{len(self.pending)} pending, {self._done} finished, {self.decisions:,} decisions: "
                               "the policy is likely waking or changing allocations without end")
        cap = self.limits.max_sim_time
        if cap is not None and self.env.now > cap:
            raise RunawayError(f"{self._who}: simulated time passed limits.max_sim_time={cap:g} s with "
                               f"{len(self.running)} running and {len(self.pending)} pending")

    # ------------------------------------------------------------------ events
    def _arrive(self, _ev) -> None:
        self._count()
        now = self.env.now
        jobs = self.jobs
        while self._next < len(jobs) and jobs[self._next].submit_time <= now:
            spec = jobs[self._next]
            view = self.view_of(spec.job_id)
            view._state.pending_since = now
            self.pending[view.job_id] = view
            self._arrived.append(view)
            self._next += 1
        if self._next < len(jobs):
            self._at(jobs[self._next].submit_time - now, self._arrive)
        self._request_decision()

    def _complete(self, st: JobState, version: int, _ev) -> None:
        if version == st.version:
            self._count()
            self._finish(st)

    def _finish(self, st: JobState) -> None:
        now = self.env.now
        st.advance(now)
        st.progress = st.spec.total_work
        self._release_all(st)
        self._hold_nothing(st)
        st.status, st.end_time = Status.FINISHED, now
        self._done += 1
        view = self.running.pop(st.spec.job_id)
        self._finished.append(view)
        self.recorder.event(now, st, "finish", 0.0)
        self._sample_usage()
        self._request_decision()
        self._stop_when_all_ended()

    def _stop_when_all_ended(self) -> None:
        """With a fault model, nothing after the last job's end matters (failures would go on)."""
        if self.faults is not None and self.ended():
            self._at(0.0, StopSimulation.callback, URGENT)

    def _phase_end(self, st: JobState, version: int, _ev) -> None:
        if version != st.version:
            return
        self._count()
        st.advance(self.env.now)
        if st.progress >= st.spec.total_work * (1 - 1e-12):  # done exactly as the phase ended
            self._finish(st)
            return
        st.phases.pop()
        st.version += 1
        self._enter_phase(st)

    def _node_down(self, node: int, repair_after: float | None, _ev) -> None:
        self._count()
        self.cluster.set_up(node, False)
        for view in list(self.running.values()):
            st = self.states[view.job_id]
            if node in nodes_of(st.allocation):
                role = next(r for r, tasks in st.allocation.items() if tasks.get(node))
                self._fail(st, StopReason.NODE_DOWN, role, node)
        self.recorder.node(self.env.now, node, up=False)
        self._sample_usage()
        if repair_after is not None:
            self._at(repair_after, partial(self._node_up, node))
        self._request_decision()

    def _node_up(self, node: int, _ev) -> None:
        self._count()
        self.cluster.set_up(node, True)
        self.recorder.node(self.env.now, node, up=True)
        self._request_decision()

    def _wake(self, _ev) -> None:
        if self._wakeup_at == self.env.now:
            self._count()
            self._wakeup_at = None
            self._request_decision()

    def _linger_end(self, st: JobState, entry, _ev) -> None:
        held = self._lingering.get(st.spec.job_id)
        if held and entry in held:
            self._count()
            held.remove(entry)
            st.advance(self.env.now)
            self.cluster.release(st.spec, entry[0])
            st.gpus -= entry[1]
            self._sample_usage()
            self._request_decision()

    # ------------------------------------------------------------------ decisions
    def _request_decision(self) -> None:
        now = self.env.now
        at = now
        if self.interval is not None and self.slot_from_last:   # ElasticFlow's scheduler.py: events within a
            at = max(now, self._slot_start + self.interval)      # slot of the last decision wait for its end
        elif self.interval is not None:   # rounds: the next multiple of the interval
            at = max(now, math.ceil(now / self.interval - 1e-9) * self.interval)   # never before now (float drift)
        if self._decision_at is None or at < self._decision_at:
            self._decision_at = at
            self._at(at - now, partial(self._decide, at), DECIDE)

    def _view(self) -> View:
        for job in self._reported:   # policies have seen them ended: their samples are done with
            job._state.samples = None
        view = View(self.clock, self._cluster_view, self._ro_pending, self._ro_running,
                    tuple(self._arrived), tuple(self._finished), tuple(self._stopped))
        self._reported = view.finished
        self._arrived, self._finished, self._stopped = [], [], []
        return view

    def _decide(self, at: float, _ev) -> None:
        if self._decision_at != at:
            return
        self._count()
        self._decision_at = None
        self.decisions += 1
        now = self.env.now
        self._slot_start = now
        view = self._view()
        self._watch_livelock(view)
        decision = self.policy.decide(view)
        if not isinstance(decision, Decision):
            raise PolicyError(f"{self._who} returned {type(decision).__name__}, not a Decision")
        changed = self._apply(decision.allocations) if decision.allocations else False
        self._sample_usage()
        if self._bar.disable is False:
            self._bar.update(min(round(now), self._bar.total) - self._bar.n)
        if decision.wakeup is not None:
            self._schedule_wakeup(decision.wakeup, changed)

    def _sample_usage(self) -> None:
        """A timeline row: resources in use and job counts, at every change of them (decisions, and
        releases between decision rounds), so the timeline integrates to the jobs' GPU-seconds."""
        self.recorder.sample(self.env.now, len(self.running), len(self.pending))

    def _watch_livelock(self, view: View) -> None:
        """Count consecutive decisions at which nothing arrived, finished or trained."""
        now = self.env.now
        t, done = self._last_decision
        progressed = bool(view.arrived) or self._done != done or (now > t and self._moved)
        self._idle_decisions = 0 if progressed else self._idle_decisions + 1
        self._last_decision = (now, self._done)
        self._moved = self._moving > 0
        n = self.limits.livelock_decisions
        if n is not None and self._idle_decisions >= n and (self.running or self.pending):
            stuck = ", ".join(list(self.running)[:3] + list(self.pending)[:3])
            raise RunawayError(f"{self._who}: livelock: {n:,} decisions in a row with no job arriving, finishing "
                               f"or training, at t={now:g} s ({len(self.running)} running, {len(self.pending)} "
                               f"pending, e.g. {stuck}); the policy keeps changing or holding jobs without progress "
                               "(limits.livelock_decisions)")

    def _schedule_wakeup(self, delay: float, changed: bool) -> None:
        if not (delay > 0 and math.isfinite(delay)):
            raise PolicyError(f"{self._who} asked to be woken after {delay!r} s; it must be a finite number > 0")
        # with nothing running, pending or to arrive, and nothing changed, waking again would loop forever
        if self.running or self.pending or self._next < len(self.jobs) or changed:
            self._wakeup_at = self.env.now + delay
            self._at(delay, self._wake)

    def _apply(self, wanted: dict[str, Allocation | None]) -> bool:
        changes = []
        states, pending, running, transition = self.states, self.pending, self.running, self.overhead.transition
        for job_id, alloc in wanted.items():
            st = states.get(job_id)
            if st is None or (job_id not in pending and job_id not in running):
                raise PolicyError(f"{self._who}: job {job_id!r} is not pending or running")
            new, gpus = self._validated(st.spec, alloc)
            if new != st.allocation:
                change = _classify(st, new)
                tr = FREE if change in STOPS else transition(st.spec, change, st.allocation, new)
                changes.append((st, new, change, tr, gpus))
        cluster = self.cluster
        for st, _, _, _, _ in changes:
            if st.allocation:
                cluster.release(st.spec, st.allocation)
        for st, new, _, _, _ in changes:
            if new:
                cluster.take(st.spec, new, self._who)
        handed = self._exit_gracefully(changes)
        for st, new, change, tr, gpus in changes:
            if new:
                if handed:
                    wait = max((handed.get(n, 0.0) for n in nodes_of(new) - nodes_of(st.allocation)), default=0.0)
                    tr = _after(tr, wait)
                self._reconfigure(st, new, change, tr, gpus)
            else:
                self._stop(st, change, StopReason.PREEMPTED, released=True)
        return bool(changes)

    def _exit_gracefully(self, changes) -> dict[int, float]:
        """Tasks a scale-in removes keep their resources until they have exited (``release_s``).
        Where the same decision gave those resources to another job, they are handed over: that
        job waits for the exit on those nodes. Returns {node: seconds to wait}."""
        handed: dict[int, float] = {}
        for st, new, change, tr, _ in changes:
            if tr.release_s > 0 and change is Change.SCALE_IN:
                leaving = _minus(st.allocation, new)
                try:
                    self._linger(st, leaving, tr.release_s)
                except CapacityError:
                    for n in nodes_of(leaving):
                        handed[n] = max(handed.get(n, 0.0), tr.release_s)
        return handed

    def _linger(self, st: JobState, leaving: Allocation, seconds: float) -> None:
        self.cluster.take(st.spec, leaving, self._who)
        entry = (leaving, alloc_gpus(st.spec, leaving))
        self._lingering.setdefault(st.spec.job_id, []).append(entry)
        st.advance(self.env.now)
        st.gpus += entry[1]
        self._at(seconds, partial(self._linger_end, st, entry))

    def _release_all(self, st: JobState, allocation: bool = True) -> None:
        """A finished or stopped job gives back everything, lingering tasks too (its allocation
        only if the caller has not released it already)."""
        if allocation and st.allocation:
            self.cluster.release(st.spec, st.allocation)
        for alloc, _ in self._lingering.pop(st.spec.job_id, ()):
            self.cluster.release(st.spec, alloc)

    def _validated(self, spec: JobSpec, alloc: Allocation | None) -> tuple[Allocation, float]:
        """Normalise a wanted allocation (read-only ``Tasks`` per role, grants equal to the request
        left implicit) and check it against the job's roles, bounds and grants; with the GPUs it
        holds (``alloc_gpus``'s sum, worked out on the way)."""
        if not alloc:
            return EMPTY, 0
        new, tasks, gpus = {}, {}, 0
        for role, nodes in alloc.items():
            try:
                r = spec.role(role)
            except KeyError:
                raise PolicyError(f"{self._who}: job {spec.job_id!r} has no role {role!r}") from None
            placed, n = {}, 0
            for node, c in nodes.items():
                if c != int(c) or c < 0:
                    raise PolicyError(f"{self._who}: job {spec.job_id!r} role {role!r} has {c!r} tasks on node "
                                      f"{node}; task counts are integers >= 0")
                if c:
                    placed[int(node)] = int(c)
                    n += int(c)
            cpu, mem = getattr(nodes, "cpu", None), getattr(nodes, "mem", None)
            if cpu is not None or mem is not None:
                for what, v in (("cpu", cpu), ("mem", mem)):
                    if v is not None and not (math.isfinite(v) and v >= 0):
                        raise PolicyError(f"{self._who}: job {spec.job_id!r} role {role!r} grants {what}={v!r} "
                                          "per task; it must be a finite number >= 0")
            if placed:
                new[role] = Tasks(placed, None if cpu == r.cpu else cpu, None if mem == r.mem else mem)
                tasks[role] = n
                gpus += r.gpu * n
        for r in spec.roles:
            n = tasks.get(r.name, 0)
            if not r.min_count <= n <= r.max_count:
                raise PolicyError(f"{self._who}: job {spec.job_id!r} role {r.name!r} gets {n} tasks; "
                                  f"it must run with {r.min_count}..{r.max_count} (gang)")
        return MappingProxyType(new), gpus

    # ------------------------------------------------------------------ state changes
    def _fail(self, st: JobState, cause: StopReason, role: str | None, node: int | None) -> None:
        """A task (or the node) under a running job failed: the job stops at once. A fault model
        takes it back to its last checkpoint and, once its retries are spent, ends it failed."""
        now = self.env.now
        self._stop(st, Change.FAIL, cause)
        lost = self.faults.restore(st, cause) if self.faults is not None else (0.0, 0.0, 0.0)
        st.last_failure = Failure(now, cause, role, node, *lost)
        st.failed_by = st.failed_by or {}
        st.failed_by[cause.value] = st.failed_by.get(cause.value, 0) + 1
        if self.faults is not None and self.faults.gives_up(st):
            st.status, st.end_time = Status.FAILED, now
            view = self.pending.pop(st.spec.job_id)
            self._stopped.remove(view)
            self._finished.append(view)   # ended: policies drop it from their queues
            self._done += 1
            self.recorder.event(now, st, "failed", 0.0)
            self._stop_when_all_ended()

    def _stop(self, st: JobState, change: Change, reason: StopReason, released: bool = False) -> None:
        """The job gives back its resources and waits again, keeping its progress (it resumes
        from a checkpoint; the resume cost is charged then)."""
        now = self.env.now
        st.advance(now)
        self._release_all(st, allocation=not released)
        old_gpus = st.gpus
        self._refund(st)
        self._hold_nothing(st)
        st.busy_until = now
        st.status, st.stop_reason, st.pending_since = Status.PENDING, reason, now
        if change is Change.FAIL:
            st.failures += 1
        else:
            st.preemptions += 1
        job_id = st.spec.job_id
        view = self.running.pop(job_id)
        self.pending[job_id] = view
        self._stopped.append(view)
        self.recorder.event(now, st, change.value, 0.0, old_gpus)

    def _reconfigure(self, st: JobState, new: Allocation, change: Change, tr: Transition, gpus: float) -> None:
        now = self.env.now
        st.advance(now)
        job_id = st.spec.job_id
        old_gpus, old_rate = st.gpus, st.steady_rate
        new_rate = self.speed.rate(st.spec, new, self.cluster)
        if not new_rate > 0:
            raise PolicyError(f"{self._who}: job {job_id!r} would make no progress on {dict(new)}")
        if self.faults is not None:   # stragglers, a hot PS, the cost of taking checkpoints
            st.factor = self.faults.factor(st, new)
            new_rate *= st.factor
        # phases still ahead of an earlier change keep their own rates; what they were charged
        # against the old rate is refunded and charged again against the new one
        if st.phases or tr.prepare_s or tr.pause_s:
            phases = [(d, min(r, new_rate)) for d, r in self._refund(st)] if st.phases else []
            phases += [(tr.prepare_s, min(old_rate, new_rate)), (tr.pause_s, 0.0)]
            lost = sum(d * (1.0 - r / new_rate) for d, r in phases)
        else:   # a free change with nothing ahead (a replay without overheads): no phase, nothing lost
            phases, lost = (), 0.0
        lingering = st.gpus - alloc_gpus(st.spec, st.allocation) if st.allocation else 0.0
        st.allocation, st.steady_rate = new, new_rate
        st.gpus = gpus + max(lingering, 0.0)
        if lost:
            st.overhead_s += lost
            st.overhead_gpu_s += lost * st.gpus
        if change is Change.START or change is Change.RESUME:
            st.status = Status.RUNNING
            st.waited += now - st.pending_since
            if st.first_start is None:
                st.first_start = now
            self.running[job_id] = self.pending.pop(job_id)
        elif change is Change.MIGRATE:
            st.migrations += 1
        elif change is Change.RESIZE:
            st.resizes += 1
        else:
            st.rescales += 1
        self._set_phases(st, phases)
        self.recorder.event(now, st, change.value, lost, old_gpus)
        if self.faults is not None:
            self.faults.changed(st, change)

    def _refund(self, st: JobState) -> list[tuple[float, float]]:
        """The reconfiguration phases still ahead as (duration, rate), soonest first; what they
        were charged as lost (against the steady rate) is taken back."""
        if not st.phases:
            return []
        now, out, refund = self.env.now, [], 0.0
        t = now
        for end, rate in reversed(st.phases):
            d = end - t
            t = end
            if d > 0:
                out.append((d, rate))
                refund += d * (1.0 - rate / st.steady_rate) if st.steady_rate > 0 else d
        st.overhead_s -= refund
        st.overhead_gpu_s -= refund * st.gpus
        return out

    def _set_phases(self, st: JobState, phases) -> None:
        t = self.env.now
        ahead = []
        for duration, rate in phases:
            if duration > 0:
                t += duration
                ahead.append((t, rate))
        ahead.reverse()   # soonest last: pop() ends a phase
        st.phases = ahead or None
        st.busy_until = t
        st.version += 1
        self._enter_phase(st)

    def _enter_phase(self, st: JobState) -> None:
        """Set the rate of the current phase; schedule its end and, if sooner, the completion."""
        now = self.env.now
        end = None
        was_moving = 1 if st.rate > 0 else 0
        if st.phases:
            end, st.rate = st.phases[-1]
            self._at(end - now, partial(self._phase_end, st, st.version))
        else:
            st.phases = None
            st.rate = st.steady_rate
        moving = 1 if st.rate > 0 else 0
        self._moving += moving - was_moving
        self._moved = self._moved or moving == 1
        self._sample(st, steady=end is None)
        if st.rate > 0:
            finish = now + (st.spec.total_work - st.progress) / st.rate
            if end is None or finish < end:
                self._at(max(finish - now, 0.0), partial(self._complete, st, st.version))

    def _sample(self, st: JobState, steady: bool) -> None:
        """Close the job's open throughput sample; open one for a steady phase."""
        now = self.env.now
        samples = st.samples
        if samples and samples[-1][1] is None:
            samples[-1][1] = now
            if samples[-1][1] <= samples[-1][0]:
                samples.pop()
        if steady and st.rate > 0:
            noise = 1.0
            if self._noise is not None:
                if not self._noise_block:
                    self._noise_block = self._noise.standard_normal(1024).tolist()[::-1]
                noise = max(1.0 + self.observe.throughput_noise * self._noise_block.pop(), 0.01)
            if samples is None:
                samples = st.samples = []
            samples.append([now, None, st.rate * noise, st.allocation])
            if len(samples) > self.observe.samples_kept:
                del samples[0]

    def _hold_nothing(self, st: JobState) -> None:
        """A finished or stopped job: no resources, no rate, no phase or completion pending."""
        self._moving -= 1 if st.rate > 0 else 0
        st.allocation, st.gpus, st.rate, st.steady_rate = EMPTY, 0.0, 0.0, 0.0
        st.phases = None
        st.version += 1
        self._sample(st, steady=False)

    def _check_fit(self) -> None:
        """Every job's requested allocation must fit the empty cluster (else no policy that starts
        jobs at their request ever starts it): the trace's oversize rule drops or clamps such jobs."""
        seen: dict = {}
        for spec in self.jobs:
            ok = seen.get(spec.roles)
            if ok is None:
                ok = seen[spec.roles] = self.cluster.fits(spec)
            if not ok:
                need = ", ".join(f"{r.name} {r.count} x {r.gpu:g} GPU/{r.cpu:g} cores/{r.mem:g} GB"
                                 for r in spec.roles)
                have = "/".join(f"{x:g}" for x in self.cluster.total)
                raise ValueError(f"job {spec.job_id!r} asks for more than the whole cluster "
                                 f"({spec.num_gpus:g} GPUs of {self.cluster.total_gpus:g}; requested: {need}; "
                                 f"cluster GPU/cores/GB {have}, node by node); "
                                 "drop or clamp such jobs with the trace's oversize rule")

    def _unfinished_reason(self, st: JobState) -> str:
        """Why a job did not finish, for summary.json."""
        if self.until is not None and self.env.now >= self.until:
            return f"still {st.status.value} at until={self.until:g} s"
        if st.status is Status.RUNNING:
            return "running when the run ended"
        if st.first_start is None:
            need = ", ".join(f"{r.name} {r.count} x ({r.gpu:g} GPU, {r.cpu:g} cores, {r.mem:g} GB)" for r in st.spec.roles)
            return f"never started: {self._who} never placed it ({need})"
        return (f"stopped ({st.stop_reason.value if st.stop_reason else 'stopped'}) and never resumed by "
                f"{self._who}")


def _after(tr: Transition, wait: float) -> Transition:
    """``tr`` delayed by ``wait`` s: the new tasks cannot begin before the resources they take are free."""
    if wait <= 0:
        return tr
    if tr.prepare_s > 0:
        return Transition(tr.prepare_s + wait, tr.pause_s, tr.release_s)
    return Transition(tr.prepare_s, tr.pause_s + wait, tr.release_s)


def _minus(old: Allocation, new: Allocation) -> dict:
    """The tasks of ``old`` that ``new`` no longer has, per role and node (grants of ``old``)."""
    out = {}
    for role, tasks in old.items():
        keep = new.get(role, {})
        gone = {n: c - keep.get(n, 0) for n, c in tasks.items() if c > keep.get(n, 0)}
        if gone:
            out[role] = Tasks(gone, getattr(tasks, "cpu", None), getattr(tasks, "mem", None))
    return out


def _classify(st: JobState, new: Allocation) -> Change:
    old = st.allocation
    if not new:
        return Change.STOP
    if not old:
        return Change.RESUME if st.first_start is not None else Change.START
    a, b = task_counts(old), task_counts(new)
    if a == b:
        same_nodes = all(dict(old[r]) == dict(new.get(r, {})) for r in old)
        return Change.RESIZE if same_nodes else Change.MIGRATE
    roles = set(a) | set(b)
    if all(b.get(r, 0) >= a.get(r, 0) for r in roles):
        return Change.SCALE_OUT
    if all(b.get(r, 0) <= a.get(r, 0) for r in roles):
        return Change.SCALE_IN
    return Change.RESCALE
