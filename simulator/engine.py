"""The event loop: arrivals, completions, reconfiguration phases, policy wake-ups, failures.

Between events every job runs at a constant rate, so completion times are computed, not
stepped (``simulator/progress.py``). Any event that may change what a policy would do asks for
one decision, which runs after every other event of the same instant (or, with a decision
interval, at the next multiple of it). The policy's desired allocations are reconciled with the
actual ones (``simulator/reconcile.py``: all changed jobs release, then all take, each change
charged by the overhead model); the engine turns the changes into job states and events.
Guards end a run that runs away (an event budget, a simulated-time limit, a livelock
detector) with a message naming the policy and the state.

Events sit in one heap of (time, priority, order scheduled, handler, arguments): at one instant
urgent events (a fault model's ``first``) run before normal ones. The one pending decision is not
an event in the heap: the loop runs it once every event up to its time has been handled.
"""

from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from dataclasses import dataclass
from heapq import heappop, heappush
from operator import attrgetter
from typing import Annotated

from tqdm import tqdm

from clustersim.simulator import arrow
from clustersim.simulator.cluster import EPS, Cluster
from clustersim.simulator.errors import PolicyError
from clustersim.simulator.faults import Capabilities, World
from clustersim.simulator.job import EMPTY, Failure, JobSpec, JobState, JobStates, Status, StopReason, alloc_gpus, nodes_of
from clustersim.simulator.metrics import Recorder
from clustersim.simulator.overhead import (FAIL, MIGRATE, RESIZE, RESUME, START, Change, ConstantOverhead, OverheadModel,
                                           PerModelOverhead)
from clustersim.simulator.params import NonNegative, PositiveCount, Range
from clustersim.simulator.progress import Next, Progress
from clustersim.simulator.reconcile import JobChange, reconcile
from clustersim.simulator.rng import component_rng
from clustersim.simulator.speed import LinearSpeed, SpeedModel
from clustersim.simulator.usage import BoundUsage
from clustersim.simulator.view import ClusterView, Decision, JobView, Observer, View, read_only

URGENT, NORMAL = 0, 1   # priorities at one instant (the pending decision runs after both)
# Status's members the per-job steps read, as module constants (as overhead.py's Change members)
_PENDING, _RUNNING, _FINISHED = Status.PENDING, Status.RUNNING, Status.FINISHED
_PREEMPTED = StopReason.PREEMPTED


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


@contextmanager
def fewer_collections(young: int = 100_000):
    """Python's cyclic collector with a larger youngest generation (``young`` new containers
    between collections; CPython's default is 700), the old thresholds restored on exit. The engine
    makes a job state per job and short-lived tuples per event, almost none of them cyclic, so the
    default's many young collections, each re-walking the survivors, cost 5-10% of a replay's CPU
    (choice; docs/performance.md). Garbage is the same; only when cycles are freed changes. The
    threshold is process-wide: engines run one at a time per process (nested ones restore in order),
    and one already set higher is kept."""
    old = gc.get_threshold()
    gc.set_threshold(max(young, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _by_arrival(jobs: list[JobSpec]) -> list[JobSpec]:
    """The jobs in arrival order: by submit time, then trace index (a stable sort). A trace's jobs
    mostly come in that order already: checked in one pass, a list copy then instead of a sort whose
    key makes a tuple per job (~1 s of a million-job build). The pass allocates nothing: numpy
    arrays of the times, freed before the run, raised glibc's mmap threshold and the run's peak RSS."""
    t_prev, i_prev = -math.inf, -math.inf
    for j in jobs:
        t, i = j.submit_time, j.index
        if t < t_prev or t != t or (t == t_prev and i < i_prev):   # out of order (or NaN: sorted's rule)
            return sorted(jobs, key=attrgetter("submit_time", "index"))
        t_prev, i_prev = t, i
    return list(jobs)


class Engine:
    # Called as ``_wait_until(t)`` before anything at time ``t`` is handled; it must schedule
    # nothing. None in a simulation (time jumps); the testbed (clustersim/testbed/real.py) waits
    # there for the wall clock to reach ``t``.
    _wait_until = None

    def __init__(self, jobs: list[JobSpec], cluster: Cluster, policy, *,
                 speed: SpeedModel | None = None, overhead: OverheadModel | None = None,
                 until: float | None = None, progress: bool | None = None,
                 decision_interval: float | None = None, slot_from_last: bool = False, limits: Limits | None = None,
                 observe: Observe | None = None, usage=None, seed: int = 0, faults=None):
        self.faults = faults   # simulator.faults.FaultModel or None: failures, slowdowns, checkpoints (via Hooks)
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
        self.jobs = _by_arrival(jobs)
        if len({j.job_id for j in self.jobs}) != len(self.jobs):
            raise ValueError("job ids must be unique")
        self.states = JobStates(self.jobs)   # a job's state is made at its arrival
        self.now = 0.0
        self._queue: list = []     # (time, priority, order, handler, args): the events ahead
        self._order = 0            # events scheduled so far: ties at one time and priority go in this order
        self._halted = False
        # the views' clock: the loop sets its ``now`` with the engine's; a policy reads the per-model
        # costs the overhead model charges (``Profiled.costs``)
        costs_of = self.overhead.costs_of if isinstance(self.overhead, PerModelOverhead) else None
        self.clock = Observer(speed=self.speed, cluster=cluster, profiled_error=self.observe.profiled_error,
                              seed=seed, faults=faults, costs_of=costs_of)
        # what tasks use: at the job's rate and progress, with its hidden memory need (simulator/usage.py)
        self.usage = usage   # the usage model given (another engine of the same jobs binds its own)
        self._usage = BoundUsage(usage, self.states, self.clock, faults) if usage is not None else None
        self.clock.usage = self._usage.observed if self._usage else None
        self._oracle = bool(policy.oracle)
        # decisions a policy declares no-ops are skipped (policies/base.py): with nothing pending
        # (decides_only_when_waiting), and, with jobs left waiting, when jobs only arrived since
        # the last decision (decides_only_when_freed)
        self._lazy = bool(getattr(policy, "decides_only_when_waiting", False))
        self._lazy_freed = bool(getattr(policy, "decides_only_when_freed", False))
        self._on_slowdown = bool(getattr(policy, "decides_on_slowdown", False))   # refresh_rate asks for a decision
        self._only_arrivals = False   # since the last decision, only arrivals asked for one
        self._left_pending = False    # the last decision left a job pending
        # and with fewer free GPUs than the policy declared it waits for (Policy.waits_for_gpus),
        # when no job stopped and no node changed since its last decision
        self._waits_for = getattr(policy, "waits_for_gpus", None)
        self._waiting_for: float | None = None   # what the last decision declared (None: nothing)
        # whether the policy declared any of the three: else no decision is a declared no-op
        self._may_skip = self._lazy or self._lazy_freed or self._waits_for is not None
        self._none_stopped = False    # since the last decision, only arrivals and ends asked for one
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
        self._wake_queued: float | None = None   # time of the last wake-up event put in the heap
        self._lingering: dict[str, list] = {}   # job -> [(allocation, gpus)] a graceful scale-in still holds
        noise = self.observe.throughput_noise
        self.progress = Progress(noise, self.observe.samples_kept,
                                 component_rng(seed, "observe") if noise > 0 else None)
        self._on_stop: list = []   # subscribers: fn(now, state, reason) at every stop of a running job
        self._on_rate: list = []   # subscribers: fn(now, state) at every change of a job's rate
        self.recorder = Recorder(cluster, self.jobs)   # an ended job's row is its trace index
        self.recorder.speed = self.speed   # for the efficiency metrics (metrics.efficiency)
        self._who = f"policy {getattr(policy, 'name', type(policy).__name__)!r}"
        self.events = 0
        self.decisions = 0
        self._max_events = self.limits.max_events or 1000 * len(self.jobs) + 100_000
        self._max_sim_time = self.limits.max_sim_time   # read at every handled event
        self._moving = 0          # jobs training at a positive rate now
        self._moved = False       # some job trained since the last decision
        self._idle_decisions = 0  # consecutive decisions at which nothing progressed
        self._decided_at, self._done_before = -1.0, 0   # time and jobs finished at the last decision
        self._done = 0
        horizon = max((j.submit_time + (j.duration or 0) for j in self.jobs), default=0.0)
        self._bar = tqdm(total=round(horizon), unit="sim s", delay=2.0, disable=None if progress is None else not progress,
                         leave=False, dynamic_ncols=True)
        self._check_fit()

    # ------------------------------------------------------------------ running
    def run(self) -> Recorder:
        arrow.release_unused()   # the trace's table is dropped by now (the callers let it go after the build)
        self.policy.reset(self._view())
        if self.faults is not None:
            world = World(self.jobs, self.cluster.num_nodes, self.speed, self.cluster,
                          self._usage.peak if self._usage else None)
            self.faults.attach(self, world, Capabilities.of(self.policy))
        if self.jobs:
            self._at(self.jobs[0].submit_time, self._arrive)
        try:
            with fewer_collections():
                self._loop()
        finally:
            self._bar.close()
        now = self.now
        states = self.states.every()   # with the jobs that never arrived, reported unfinished
        for st in states:
            if st.status in (Status.PENDING, Status.RUNNING):
                st.advance(now)
        self.recorder.finish(states, now, self._unfinished_reason)
        return self.recorder

    def _loop(self) -> None:
        """Handle the events in time order (ties: priority, then the order they were scheduled) and
        the pending decision once every event up to its time is handled, until nothing is left, the
        run halts (then the pending decision alone still runs), or ``until`` comes (nothing at
        ``until`` itself runs). With a ``_wait_until`` hook, the loop calls it with each one's time first."""
        queue, clock, wait = self._queue, self.clock, self._wait_until
        until = math.inf if self.until is None else self.until
        while not self._halted:
            decide_at = self._decision_at
            if queue and (decide_at is None or queue[0][0] <= decide_at):
                if queue[0][0] >= until:
                    break
                if wait is not None:
                    wait(queue[0][0])
                t, _, _, handle, args = heappop(queue)
                self.now = clock.now = t
                handle(*args)
            elif decide_at is not None and decide_at < until:
                if wait is not None:
                    wait(decide_at)
                self.now = clock.now = decide_at
                self._decide()
            else:
                break
        if self._halted and self._decision_at is not None and self._decision_at < until:
            # a run halts once every job has ended, before anything else at that instant (a fault
            # model's events would go on): the decision that reports the last ends still runs,
            # when it would have run without the halt, so that the policy hears of every end
            if wait is not None:
                wait(self._decision_at)
            self.now = clock.now = self._decision_at
            self._decide()
        if self.until is not None and not self._halted:
            self.now = clock.now = self.until

    def _at(self, delay: float, handle, *args, priority: int = NORMAL) -> None:
        """Call ``handle(*args)`` ``delay`` s from now."""
        if not delay >= 0:
            raise ValueError(f"cannot schedule an event {delay!r} s in the past")
        heappush(self._queue, (self.now + delay, priority, self._order, handle, args))
        self._order += 1

    # --- hooks for fault models (simulator/faults.py Hooks)
    def at(self, delay: float, fn, first: bool = False) -> None:
        """Call ``fn()`` after ``delay`` s (``first``: before the other events of that instant)."""
        self._at(delay, fn, priority=URGENT if first else NORMAL)

    def state(self, job_id: str) -> JobState:
        return self.states[job_id]

    def fail_node(self, at: float, node: int, repair_after: float | None = None) -> None:
        """``node`` goes down at ``at``, its jobs stop and re-queue; up again ``repair_after`` s later."""
        if not at >= self.now or (repair_after is not None and not repair_after >= 0):
            raise ValueError(f"node {node}: a failure at {at!r} (repair after {repair_after!r}) is in the past")
        self._at(at - self.now, self._node_down, node, repair_after)

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
        progress up to date, every rate ahead scaled, completion computed afresh, and, for a policy
        that declares ``decides_on_slowdown`` (policies/base.py), a decision asked for, so that it
        hears of the change when it happens instead of polling for it."""
        st = self.states[job_id]
        if st.status is not Status.RUNNING:
            return
        self._count()
        st.advance(self.now)
        f = self.faults.factor(st, st.allocation)
        if f != st.factor:
            k, st.factor = f / st.factor, f
            was_moving = st.rate > 0
            self._rate_changed(st, was_moving, self.progress.rescale(st, k, self.now))
            if self._on_slowdown:
                self._request_decision()

    def ended(self) -> bool:
        """Every job finished or failed."""
        return self._done == len(self.jobs)

    def subscribe(self, kind: str, fn) -> None:
        """Hear of engine events as they happen: ``"stop"``, ``fn(now, state, reason)`` at every
        stop of a running job (preemption or failure); ``"rate"``, ``fn(now, state)`` at every
        change of a job's rate (phases, starts, stops, slowdowns). Subscribers change nothing."""
        {"stop": self._on_stop, "rate": self._on_rate}[kind].append(fn)

    def view_of(self, job_id: str) -> JobView:
        """What a policy sees of a job. The engine makes one per job as it arrives and keeps it
        while the job is pending or running: a replay holds no view per finished job."""
        return self._job_view(self.states[job_id])

    def _job_view(self, st: JobState) -> JobView:
        # with observe.declared_iterations, the trace's iterations are what the owner asked for
        return JobView(st, self.clock, self._oracle, st.spec.total_work if self.observe.declared_iterations else None)

    def _count(self) -> None:
        """Every handled event: the runaway guards."""
        self.events += 1
        if self.events > self._max_events:
            raise RunawayError(f"{self._who}: the run passed its event budget ({self._max_events:,} events; "
                               f"limits.max_events) at t={self.now:g} s with {len(self.running)} running, "
                               f"{len(self.pending)} pending, {self._done} finished, {self.decisions:,} decisions: "
                               "the policy is likely waking or changing allocations without end")
        cap = self._max_sim_time
        if cap is not None and self.now > cap:
            raise RunawayError(f"{self._who}: simulated time passed limits.max_sim_time={cap:g} s with "
                               f"{len(self.running)} running and {len(self.pending)} pending")

    # ------------------------------------------------------------------ events
    def _arrive(self) -> None:
        self._count()
        now = self.now
        jobs, i, n = self.jobs, self._next, len(self.jobs)
        pending, arrived, states = self.pending, self._arrived, self.states
        while i < n and jobs[i].submit_time <= now:
            st = states.arrive(jobs[i])
            st.pending_since = now
            view = self._job_view(st)
            pending[st.spec.job_id] = view
            arrived.append(view)
            i += 1
        self._next = i
        if i < n:
            self._at(jobs[i].submit_time - now, self._arrive)
        self._request_decision(arrival=True)

    def _complete(self, st: JobState, version: int) -> None:
        if version == st.version:
            self._count()
            self._finish(st)

    def _phase_end(self, st: JobState, version: int) -> None:
        if version != st.version:
            return
        self._count()
        st.advance(self.now)
        was_moving = st.rate > 0
        nxt = self.progress.end_phase(st, self.now)
        if nxt is None:   # done exactly as the phase ended
            self._finish(st)
        else:
            self._rate_changed(st, was_moving, nxt)

    def _node_down(self, node: int, repair_after: float | None) -> None:
        self._count()
        self.cluster.set_up(node, False)
        for view in list(self.running.values()):
            st = self.states[view.job_id]
            if node in nodes_of(st.allocation):
                role = next(r for r, tasks in st.allocation.items() if tasks.get(node))
                self._fail(st, StopReason.NODE_DOWN, role, node)
        self.recorder.node(self.now, node, up=False)
        self._sample_usage()
        if repair_after is not None:
            self._at(repair_after, self._node_up, node)
        self._request_decision()

    def _node_up(self, node: int) -> None:
        self._count()
        self.cluster.set_up(node, True)
        self.recorder.node(self.now, node, up=True)
        self._request_decision()

    def _wake(self) -> None:
        if self._wakeup_at == self.now:
            self._count()
            self._wakeup_at = None
            self._request_decision()

    def _linger_end(self, st: JobState, entry) -> None:
        held = self._lingering.get(st.spec.job_id)
        if held and entry in held:
            self._count()
            held.remove(entry)
            st.advance(self.now)
            self.cluster.release(st.spec, entry[0])
            st.gpus -= entry[1]
            self._sample_usage()
            self._request_decision(freed=True)

    def _halt(self) -> None:
        self._halted = True

    # ------------------------------------------------------------------ decisions
    def _request_decision(self, arrival: bool = False, freed: bool = False) -> None:
        """Ask for a decision: for an ``arrival``, for resources ``freed`` (an end, a graceful
        exit's), or (neither) for anything else: a stop, a node change, a wake-up."""
        if not arrival:
            self._only_arrivals = False
            if not freed:
                self._none_stopped = False
        now = self.now
        if self.interval is None:   # decisions as events come: this instant's
            if self._decision_at is None or now < self._decision_at:
                self._decision_at = now
            return
        at = now
        if self.slot_from_last:   # ElasticFlow's scheduler.py: events within a
            at = max(now, self._slot_start + self.interval)      # slot of the last decision wait for its end
        else:
            # rounds: the next multiple of the interval, a time within rounding error (1e-12
            # relative) past a multiple being on it; never before now (k x interval rounds too).
            # Past 2**53 intervals the multiples are finer than a float at now: now is on one.
            k = now / self.interval * (1 - 1e-12)
            if k < 2.0**53:
                at = max(math.ceil(k) * self.interval, now)
        if self._decision_at is None or at < self._decision_at:
            self._decision_at = at   # the loop runs it after the events of that instant

    def _view(self) -> View:
        for job in self._reported:   # policies have seen them ended: their samples are done with, and
            st = job._state             # their numbers go to the recorder's columns, the state let go
            st.samples = None
            self.states[st.spec.job_id] = self.recorder.ended(st)
        # most decisions have one or two kinds of change: an empty list is passed on as ``()``, kept
        arrived, finished, stopped = self._arrived, self._finished, self._stopped
        view = View(self.clock, self._cluster_view, self._ro_pending, self._ro_running,
                    tuple(arrived) if arrived else (), tuple(finished) if finished else (),
                    tuple(stopped) if stopped else ())
        self._reported = view.finished
        if arrived:
            self._arrived = []
        if finished:
            self._finished = []
        if stopped:
            self._stopped = []
        return view

    def _decide(self) -> None:
        self._decision_at = None
        now = self.now
        self._slot_start = now
        recorder = self.recorder
        if self._may_skip and self._declared_no_op():
            # the policy declared that this decision changes nothing and asks for nothing
            # (policies/base.py): no view, no call; it hears of what happened meanwhile at its
            # next decision (at the latest, the one after the last job ends). Only this
            # instant's timeline row is written.
            recorder.sample(now, len(self.running), len(self.pending))
            return
        self._count()
        self.decisions += 1
        view = self._view()
        self._watch_livelock(view.arrived)
        decision = self.policy.decide(view)
        if not isinstance(decision, Decision):
            raise PolicyError(f"{self._who} returned {type(decision).__name__}, not a Decision")
        changed = False
        if decision.allocations:
            changed = self._apply(reconcile(decision.allocations, self.states, self._active, self.cluster,
                                            self.overhead, self._who))
        pending = self.pending
        self._only_arrivals, self._left_pending = True, bool(pending)
        self._none_stopped = True
        wakeup = decision.wakeup
        self._waiting_for = self._waits_for() if self._waits_for is not None and wakeup is None else None
        recorder.sample(now, len(self.running), len(pending))   # this instant's timeline row (_sample_usage)
        if self._bar.disable is False:
            self._bar.update(min(round(now), self._bar.total) - self._bar.n)
        if wakeup is not None:
            self._schedule_wakeup(wakeup, changed)

    def _declared_no_op(self) -> bool:
        """Whether the policy declared the decision due now a no-op (policies/base.py), one of:
        nothing is pending (``decides_only_when_waiting``), while jobs remain to end; its last
        decision left jobs pending and only arrivals asked for one since (``decides_only_when_freed``:
        they join behind a job that did not fit); fewer GPUs are free (by more than the cluster's
        ``EPS``) than it declared it waits for and no job stopped and no node changed since its
        last decision (``waits_for_gpus``: an end that freed too little), while jobs remain to end."""
        if self._only_arrivals and self._left_pending and self._lazy_freed:
            return True
        if self._done == len(self.jobs):
            return False
        if self._lazy and not self.pending:
            return True
        waiting = self._waiting_for
        return waiting is not None and self._none_stopped and self.cluster.free_gpus + EPS < waiting

    def _active(self, job_id: str) -> bool:
        return job_id in self.pending or job_id in self.running

    def _sample_usage(self) -> None:
        """A timeline row: resources in use and job counts, at every change of them (decisions, and
        releases between decision rounds), so the timeline integrates to the jobs' GPU-seconds."""
        self.recorder.sample(self.now, len(self.running), len(self.pending))

    def _watch_livelock(self, arrived: tuple) -> None:
        """Count consecutive decisions at which nothing arrived (``arrived``: the decision's
        arrivals), finished or trained."""
        now, done = self.now, self._done
        if arrived or done != self._done_before or (now > self._decided_at and self._moved):
            self._idle_decisions = 0
            self._decided_at, self._done_before = now, done
            self._moved = self._moving > 0
            return   # progress: nothing more to watch
        self._idle_decisions += 1
        self._decided_at = now
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
            at = self._wakeup_at = self.now + delay
            # a policy that asks again for the time it asked for last (Tiresias's next queue jump)
            # finds that wake-up in the heap still, when it is later than now: no second event
            if at != self._wake_queued or at <= self.now:
                self._wake_queued = at
                heappush(self._queue, (at, NORMAL, self._order, self._wake, ()))   # _at(delay, ...), written out
                self._order += 1

    def _apply(self, changes: list[JobChange]) -> bool:
        """Turn reconciled changes into job states and events: lingering tasks first (their exits
        are scheduled before any phase), then each job's new allocation or stop."""
        for c in changes:
            if c.lingering is not None:
                self._linger(c.state, c.lingering, c.transition.release_s)
        for c in changes:
            if c.new:
                self._reconfigure(c)
            else:
                self._stop(c.state, c.kind, _PREEMPTED, released=True)
        return bool(changes)

    def _linger(self, st: JobState, leaving, seconds: float) -> None:
        entry = (leaving, alloc_gpus(st.spec, leaving))
        self._lingering.setdefault(st.spec.job_id, []).append(entry)
        st.advance(self.now)
        st.gpus += entry[1]
        self._at(seconds, self._linger_end, st, entry)

    def _release_all(self, st: JobState, allocation: bool = True) -> None:
        """A finished or stopped job gives back everything, lingering tasks too (its allocation
        only if the caller has not released it already)."""
        if allocation and st.allocation:
            self.cluster.release(st.spec, st.allocation)
        for alloc, _ in self._lingering.pop(st.spec.job_id, ()):
            self.cluster.release(st.spec, alloc)

    # ------------------------------------------------------------------ state changes
    def _reconfigure(self, c: JobChange) -> None:
        st, new, change, now = c.state, c.new, c.kind, self.now
        st.advance(now)
        job_id = st.spec.job_id
        old_gpus = st.gpus
        rate = self.speed.rate(st.spec, new, self.cluster)
        if not rate > 0:
            raise PolicyError(f"{self._who}: job {job_id!r} would make no progress on {dict(new)}")
        if self.faults is not None:   # stragglers, a hot PS, the cost of taking checkpoints
            st.factor = self.faults.factor(st, new)
            rate *= st.factor
        held = alloc_gpus(st.spec, st.allocation) if st.allocation else 0.0
        lingering = st.gpus - held if st.allocation else 0.0   # tasks a graceful scale-in still holds
        st.allocation = new
        if change is START or change is RESUME:
            st.status = _RUNNING
            st.waited += now - st.pending_since
            if st.first_start is None:
                st.first_start = now
            self.running[job_id] = self.pending.pop(job_id)
        elif change is MIGRATE:
            st.migrations += 1
        elif change is RESIZE:
            st.resizes += 1
        else:
            st.rescales += 1
        was_moving = st.rate > 0
        lost, nxt = self.progress.change(st, rate, c.transition, now,
                                         c.gpus + (0.0 if 0.0 > lingering else lingering))   # max(.., 0.0)
        self._rate_changed(st, was_moving, nxt)
        # the event's kind: Enum's ``value`` is a Python-level property, its ``_value_`` a plain attribute
        if lingering > 0:   # the event is the change itself, old allocation to new: not the exiting
            # tasks, which the job holds (and is charged for, st.gpus) until their graceful exit ends
            self.recorder.event(now, st, change._value_, lost, held, c.gpus)
        else:
            self.recorder.event(now, st, change._value_, lost, old_gpus)
        if self.faults is not None:
            self.faults.changed(st, change)

    def _rate_changed(self, st: JobState, was_moving: bool, nxt: Next | None = None) -> None:
        """The job's rate changed: count it training or not; schedule its phase end and completion."""
        if st.rate > 0:   # (a speed model may give a numpy float: compared, not counted)
            self._moved = True
            if not was_moving:
                self._moving += 1
        elif was_moving:
            self._moving -= 1
        # Next has a completion only when it comes before the phase's end, which would then be stale
        if nxt is not None:
            phase_end, completion = nxt
            at, handle = ((completion, self._complete) if completion is not None else
                          (phase_end, self._phase_end) if phase_end is not None else (None, None))
            if at is not None:   # pushed here, not through _at: two calls a change fewer
                now = self.now
                delay = at - now
                if delay < 0.0:   # rounding put it a hair in the past: now
                    delay = 0.0
                elif not delay >= 0.0:
                    raise ValueError(f"cannot schedule an event {delay!r} s in the past")
                heappush(self._queue, (now + delay, NORMAL, self._order, handle, (st, st.version)))
                self._order += 1
        for fn in self._on_rate:
            fn(self.now, st)

    def _finish(self, st: JobState) -> None:
        now = self.now
        st.advance(now)
        if self._lingering:
            self._release_all(st)
        elif st.allocation:   # _release_all with no graceful exit under way (the common case)
            self.cluster.release(st.spec, st.allocation)
        was_moving = st.rate > 0
        self.progress.finish(st, now)
        self._hold_nothing(st, was_moving)
        st.status, st.end_time = _FINISHED, now
        self._done += 1
        view = self.running.pop(st.spec.job_id)
        self._finished.append(view)
        recorder = self.recorder
        recorder.event(now, st, "finish", 0.0)
        self._request_decision(freed=True)
        if self._decision_at != now or self.faults is not None or recorder.watchers:
            self._sample_usage()
            self._stop_when_all_ended()
        # else the decision at this instant writes this instant's timeline row (the recorder keeps
        # one row per time, the last one): a row here would be overwritten. With a fault model the
        # run may halt before that decision (_stop_when_all_ended); watchers hear of every sample.

    def _stop_when_all_ended(self) -> None:
        """With a fault model, nothing after the last job's end matters (failures would go on)."""
        if self.faults is not None and self.ended():
            self._at(0.0, self._halt, priority=URGENT)

    def _fail(self, st: JobState, cause: StopReason, role: str | None, node: int | None) -> None:
        """A task (or the node) under a running job failed: the job stops at once. A fault model
        takes it back to its last checkpoint and, once its retries are spent, ends it failed."""
        now = self.now
        self._stop(st, FAIL, cause)
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
        now = self.now
        for fn in self._on_stop:
            fn(now, st, reason)
        st.advance(now)
        self._release_all(st, allocation=not released)
        old_gpus = st.gpus
        was_moving = st.rate > 0
        self.progress.stop(st, now)
        self._hold_nothing(st, was_moving)
        st.status, st.stop_reason, st.pending_since = _PENDING, reason, now
        if change is FAIL:
            st.failures += 1
        else:
            st.preemptions += 1
        job_id = st.spec.job_id
        view = self.running.pop(job_id)
        self.pending[job_id] = view
        self._stopped.append(view)
        self.recorder.event(now, st, change._value_, 0.0, old_gpus)

    def _hold_nothing(self, st: JobState, was_moving: bool) -> None:
        """A finished or stopped job: no resources (its progress is already still)."""
        st.allocation, st.gpus = EMPTY, 0.0
        self._rate_changed(st, was_moving)

    def _check_fit(self) -> None:
        """Every job's requested allocation must fit the empty cluster (else no policy that starts
        jobs at their request ever starts it): the trace's oversize rule drops or clamps such jobs."""
        seen: dict = {}   # by the roles tuple's identity (the build interns them; the specs hold them all along)
        for spec in self.jobs:
            ok = seen.get(id(spec.roles))
            if ok is None:
                ok = seen[id(spec.roles)] = self.cluster.fits(spec)
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
        if self.until is not None and self.now >= self.until:
            return f"still {st.status.value} at until={self.until:g} s"
        if st.status is Status.RUNNING:
            return "running when the run ended"
        if st.first_start is None:
            need = ", ".join(f"{r.name} {r.count} x ({r.gpu:g} GPU, {r.cpu:g} cores, {r.mem:g} GB)" for r in st.spec.roles)
            return f"never started: {self._who} never placed it ({need})"
        return (f"stopped ({st.stop_reason.value if st.stop_reason else 'stopped'}) and never resumed by "
                f"{self._who}")
