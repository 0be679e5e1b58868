"""Jobs: the immutable input (JobSpec) and the runtime record the engine keeps (JobState).

An allocation maps each role name to its tasks: ``{node index: task count}``, or a ``Tasks``
mapping that also grants each task its own CPU cores and memory (DLRover resizes parameter
servers without changing their count). An empty mapping means the job holds nothing. The
engine stores every allocation it accepts as read-only ``Tasks`` with the grants resolved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from operator import attrgetter
from enum import Enum
from types import MappingProxyType
from typing import Mapping, NamedTuple

Allocation = Mapping[str, Mapping[int, int]]
EMPTY: Allocation = MappingProxyType({})


class Tasks(dict):
    """The tasks of one role: ``{node: count}``, each task granted ``cpu`` cores and ``mem`` GB
    (``None``: what the job requested). Read-only once made, hashable; a dict underneath, so
    reading it costs what reading a dict costs."""

    __slots__ = ("cpu", "mem")

    def __init__(self, nodes: Mapping[int, int] = (), cpu: float | None = None, mem: float | None = None):
        dict.__init__(self, nodes)
        self.cpu, self.mem = cpu, mem

    def _read_only(self, *args, **kwargs):
        raise TypeError("an allocation is read-only; return a new one in a Decision")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _read_only

    def __eq__(self, other) -> bool:
        if isinstance(other, Tasks) and (self.cpu != other.cpu or self.mem != other.mem):
            return False
        return dict.__eq__(self, other)

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((tuple(self.items()), self.cpu, self.mem))

    def __reduce__(self):
        return (Tasks, (dict(self), self.cpu, self.mem))

    def __repr__(self) -> str:
        grant = "" if self.cpu is None and self.mem is None else f", cpu={self.cpu!r}, mem={self.mem!r}"
        return f"Tasks({dict.__repr__(self)}{grant})"


def task_demand(role: "RoleSpec", tasks: Mapping[int, int]) -> tuple[float, float, float]:
    """(GPUs, CPU cores, GB) each task of ``role`` holds under ``tasks``' grants."""
    cpu = getattr(tasks, "cpu", None)
    mem = getattr(tasks, "mem", None)
    return (role.gpu, role.cpu if cpu is None else cpu, role.mem if mem is None else mem)


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """A role (worker, ps, chief…): how many tasks, each task's demand, elastic bounds."""

    name: str
    count: int
    gpu: float
    cpu: float
    mem: float
    min_count: int
    max_count: int
    # worked out once: roles key the speed model's and the build's caches, hashed per change and per job
    _hash: int = field(init=False, repr=False, compare=False)
    # (resource index, amount) of each resource a task needs (GPUs 0, cores 1, GB 2; demands are >= 0,
    # the trace schema's rule): read at every take, release and first-fit placement of the role's
    # tasks without its grants, a slot read instead of a cache lookup that hashes the role
    needs: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.name, self.count, self.gpu, self.cpu, self.mem,
                                                self.min_count, self.max_count)))
        object.__setattr__(self, "needs", tuple((k, x) for k, x in enumerate((self.gpu, self.cpu, self.mem)) if x > 0))

    def __hash__(self) -> int:
        return self._hash

    @property
    def demand(self) -> tuple[float, float, float]:
        return (self.gpu, self.cpu, self.mem)

    @property
    def elastic(self) -> bool:
        return self.min_count != self.max_count


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a trace says about a job. ``total_work`` is in iterations: ground truth."""

    index: int
    job_id: str
    submit_time: float
    roles: tuple[RoleSpec, ...]
    total_work: float
    duration: float | None = None
    tenant: str | None = None
    user: str | None = None
    model: str | None = None
    profile: str | None = None
    deadline: float | None = None
    priority: int | None = None
    batch_size: int | None = None
    gpu_type: str | None = None
    curve: object | None = None   # simulator.convergence.LossCurve: ground truth, noisy epoch losses

    @property
    def num_gpus(self) -> float:
        """GPUs at the requested allocation."""
        roles = self.roles
        if len(roles) == 1:   # the common case, without a generator: ``sum``'s own arithmetic (0 + x)
            return 0 + roles[0].count * roles[0].gpu
        return sum(r.count * r.gpu for r in roles)

    @property
    def rigid(self) -> bool:
        return not any(r.elastic for r in self.roles)

    def role(self, name: str) -> RoleSpec:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(f"job {self.job_id!r} has no role {name!r}")

    def requested_counts(self) -> dict[str, int]:
        return {r.name: r.count for r in self.roles}

    def requested_demand(self) -> tuple[float, float, float]:
        """GPUs, CPU cores and memory of the requested allocation."""
        roles = self.roles
        if len(roles) == 1:   # the common case, without generators: ``sum``'s own arithmetic (0 + x)
            r = roles[0]
            n = r.count
            return (float(0 + n * r.gpu), float(0 + n * r.cpu), float(0 + n * r.mem))
        return tuple(float(sum(r.count * r.demand[k] for r in roles)) for k in range(3))


class StopReason(Enum):
    """Why a job that held resources stopped (``JobView.stop_reason``)."""

    PREEMPTED = "preempted"   # the policy stopped it
    FAILED = "failed"         # a task failed (fault models)
    NODE_DOWN = "node_down"   # a node under it went down
    OOM = "oom"               # a task needed more memory than it was granted


class Status(Enum):
    PENDING = "pending"      # arrived, holds nothing (never started, or preempted)
    RUNNING = "running"      # holds resources (possibly paused by a reconfiguration)
    FINISHED = "finished"
    FAILED = "failed"        # ended by failures: its retries ran out (simulator/faults.py)
    UNFINISHED = "unfinished"  # still pending or running when the simulation ended


ENDED = (Status.FINISHED, Status.FAILED)


class Failure(NamedTuple):
    """One failure of a running job (``JobView.last_failure``): when, why (a ``StopReason``),
    which task (role, node) and what it cost: iterations, seconds of training and GPU-seconds
    done since the last checkpoint, lost."""

    time: float
    cause: "StopReason"
    role: str | None
    node: int | None
    lost_iterations: float
    lost_s: float
    lost_gpu_s: float


def task_counts(alloc: Allocation) -> dict[str, int]:
    """Tasks per role in an allocation."""
    return {role: sum(nodes.values()) for role, nodes in alloc.items() if nodes}


def alloc_gpus(spec: JobSpec, alloc: Allocation) -> float:
    """GPUs an allocation holds."""
    return sum(spec.role(role).gpu * sum(nodes.values()) for role, nodes in alloc.items())


def alloc_demand(spec: JobSpec, alloc: Allocation) -> tuple[float, float, float]:
    """GPUs, CPU cores and GB an allocation holds, with its per-task grants."""
    total = [0.0, 0.0, 0.0]
    for role, tasks in alloc.items():
        n = sum(tasks.values())
        for k, d in enumerate(task_demand(spec.role(role), tasks)):
            total[k] += n * d
    return tuple(total)


def nodes_of(alloc: Allocation) -> set[int]:
    return {n for nodes in alloc.values() for n, c in nodes.items() if c}


@dataclass(slots=True)
class JobState:
    """The engine's runtime record of a job; policies see it only through JobView."""

    spec: JobSpec
    status: Status = Status.PENDING
    allocation: Allocation = field(default_factory=lambda: EMPTY)
    gpus: float = 0.0               # GPUs held now
    progress: float = 0.0           # iterations done, as of ``since``
    rate: float = 0.0               # iterations/s now (0 while paused)
    steady_rate: float = 0.0        # iterations/s once the current reconfiguration is over
    since: float = 0.0              # time progress and service were last brought up to date
    service: float = 0.0            # attained service, GPU-seconds held
    busy_until: float = 0.0         # end of the current reconfiguration pause
    first_start: float | None = None
    end_time: float | None = None
    phases: list | None = None      # (end time, rate) of the reconfiguration phases ahead, soonest last
    version: int = 0                # bumps whenever the completion time must be recomputed
    stop_reason: StopReason | None = None
    waited: float = 0.0             # seconds spent pending, before the first start and after stops
    pending_since: float = 0.0
    samples: list | None = None     # measured throughput: [t0, t1, measured it/s, allocation] per steady phase
    # the soonest checkpoint ahead (simulator/faults.py), read at every ``advance``: None without checkpoints
    ckpt_next: float | None = None
    # what a fault model records of the job (``FaultState``): made at its first checkpoint, failure
    # or slowdown, so that a job no fault touched holds one empty slot, not ten (docs/performance.md);
    # its fields read and write through the JobState (``st.lost_s``), with their defaults while it is None
    fault: "FaultState | None" = None
    # the job's stops and reshapes and what they cost (``Tally``): made at the first one, read and
    # written through the JobState (``st.preemptions``) as ``fault`` is
    tally: "Tally | None" = None

    def advance(self, now: float) -> None:
        """Bring progress and attained service up to ``now`` at the current rate."""
        dt = now - self.since
        if dt > 0:
            if self.ckpt_next is not None and self.ckpt_next <= now:
                self._checkpoint(now)
            # a completion computed in floating point may land a hair past the work: never report more
            # (``min`` written out, as it decides: the builtin's call costs ~5x the comparison, twice a job)
            done, work = self.progress + self.rate * dt, self.spec.total_work
            self.progress = work if work < done else done
            self.service += self.gpus * dt
            self.since = now

    def _checkpoint(self, now: float) -> None:
        """Record, per store, the latest checkpoint taken in (since, now]: the rate is constant
        there (the engine brings progress up to date at every rate change), so progress at a
        checkpoint time is exact."""
        soonest = math.inf
        for c in self.ckpts:
            interval, nxt = c[0], c[1]
            if nxt <= now:
                t = nxt + math.floor((now - nxt) / interval) * interval
                d = t - self.since
                c[2] = (t, min(self.progress + self.rate * d, self.spec.total_work), self.service + self.gpus * d)
                c[1] = nxt = t + interval
            soonest = min(soonest, nxt)
        self.ckpt_next = soonest


@dataclass(slots=True)
class FaultState:
    """What fault models (simulator/faults.py) record of a job, beside its ``JobState``.

    Checkpoints: while running, one every ``interval`` s of wall time from the (re)start, per
    store; ``ckpts`` holds [interval, next time, (time, progress, service) of the latest] per
    store (durable, and in memory with flash checkpoints), the soonest next time being
    ``JobState.ckpt_next``. Failures: how many per cause (a ``StopReason`` value), the last one,
    and what they lost since the last checkpoint; recoveries: the time from each failure until
    the job trains again, summed, and how many."""

    ckpts: list | None = None
    factor: float = 1.0             # fault slowdown on the speed model's rate (stragglers, hot PS)
    failed_by: dict | None = None   # failures per cause (StopReason value)
    last_failure: Failure | None = None
    lost_iterations: float = 0.0    # progress lost to failures (since the last checkpoint)
    lost_s: float = 0.0
    lost_gpu_s: float = 0.0
    recover_s: float = 0.0          # summed time from each failure until training again
    recoveries: int = 0


@dataclass(slots=True)
class Tally:
    """A job's stops and reshapes, beside its ``JobState``: preemptions (stops by the policy),
    failures, rescales (task count changes), migrations, resizes (grant changes), and the progress
    they cost (seconds, and GPU-seconds)."""

    preemptions: int = 0
    rescales: int = 0
    migrations: int = 0
    resizes: int = 0
    failures: int = 0
    overhead_s: float = 0.0         # seconds of progress lost to reconfiguration
    overhead_gpu_s: float = 0.0     # the same, in GPU-seconds


FAULT_FIELDS = tuple(f.name for f in fields(FaultState))
TALLY_FIELDS = tuple(f.name for f in fields(Tally))


def _forwarded(slot: str, record: type, name: str) -> property:
    """``JobState.<name>``, kept in the record (a ``record``) in its slot ``slot``: the default
    while the job has none, which a write of anything else makes."""
    default = getattr(record(), name)
    read = attrgetter(slot)

    def get(st: JobState):
        r = read(st)
        return default if r is None else getattr(r, name)

    def set_(st: JobState, value) -> None:
        r = read(st)
        if r is None:
            if type(value) is type(default) and value == default \
                    and not (type(value) is float and math.copysign(1.0, value) < 0):
                return   # the default (a float's sign included): nothing to record
            r = record()
            setattr(st, slot, r)
        setattr(r, name, value)

    return property(get, set_, doc=f"``{record.__name__}.{name}`` of the job")


for _name in FAULT_FIELDS:
    setattr(JobState, _name, _forwarded("fault", FaultState, _name))
for _name in TALLY_FIELDS:
    setattr(JobState, _name, _forwarded("tally", Tally, _name))
del _name


class JobStates(dict):
    """The engine's ``job id -> JobState`` (or the recorder's ``Ended`` once a job has ended).

    A job's state is made when it arrives (``arrive``), in the jobs' arrival order, so that a
    replay never holds a state for every job it has not reached yet (a million states are ~190
    MiB: docs/performance.md). Reading a job not yet arrived (a fault or usage model, a report, a
    test) makes its state then and keeps it aside until the arrival takes it, so the mapping's
    own entries, and the order they iterate in, are the arrived jobs' alone, as the trace's order
    has them. Unknown ids raise ``KeyError`` as a dict does."""

    __slots__ = ("_jobs", "_specs", "_early")

    def __init__(self, jobs: list[JobSpec]):
        super().__init__()
        self._jobs = jobs      # every job, in arrival order
        self._specs = None     # job id -> spec, made at the first read of a job not yet arrived
        self._early: dict[str, JobState] = {}   # states read before their job arrived

    def __missing__(self, job_id: str) -> JobState:
        st = self._early.get(job_id)
        if st is None:
            if self._specs is None:
                self._specs = {j.job_id: j for j in self._jobs}
            st = self._early[job_id] = JobState(self._specs[job_id])
        return st

    def arrive(self, spec: JobSpec) -> JobState:
        """The arriving job's state, made now (or the one made when it was read before)."""
        st = self._early.pop(spec.job_id, None) if self._early else None
        if st is None:
            st = JobState(spec)
        self[spec.job_id] = st
        return st

    def every(self) -> list:
        """Every job's state (``Ended`` for an ended job), in arrival order; those of jobs that
        never arrived are made now, so the run's end reports them as it reports every job."""
        for spec in self._jobs[len(self):]:
            self.arrive(spec)
        return self.values()
