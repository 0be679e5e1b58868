"""The policy interface: a read-only view in, desired allocations out.

At each decision point the engine calls ``Policy.decide(view)``. The policy returns a
``Decision``: the desired allocation of each job whose allocation it changes (an empty
mapping or ``None`` stops the job), and optionally when to be woken again. Jobs it does
not mention keep what they have. A policy never mutates the view; ground truth (a job's
total or remaining work, its recorded duration) is readable only by a policy that
declares ``oracle = True``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Mapping

from clustersim.simulator.job import Allocation, JobSpec, JobState, RoleSpec, Status

if TYPE_CHECKING:
    from clustersim.simulator.cluster import Cluster


class OracleError(PermissionError):
    """A non-oracle policy read ground truth."""


class PolicyError(RuntimeError):
    """A policy returned a decision the engine cannot carry out."""


@dataclass(slots=True)
class Decision:
    allocations: dict[str, Allocation | None] = field(default_factory=dict)
    wakeup: float | None = None  # seconds from now


class Clock:
    """A settable ``now`` for views built outside the engine (tests, tools); the engine
    hands its views the SimPy environment, whose ``now`` is the simulated time."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0


class JobView:
    """What a policy may observe of one job. Made once per job; reads the live state."""

    __slots__ = ("_state", "_clock", "_oracle")

    def __init__(self, state: JobState, clock: Clock, oracle: bool):
        self._state = state
        self._clock = clock
        self._oracle = oracle

    # --- what the job's owner submitted
    @property
    def job_id(self) -> str:
        return self._state.spec.job_id

    @property
    def index(self) -> int:
        return self._state.spec.index

    @property
    def submit_time(self) -> float:
        return self._state.spec.submit_time

    @property
    def roles(self) -> tuple[RoleSpec, ...]:
        return self._state.spec.roles

    @property
    def num_gpus(self) -> float:
        """GPUs at the requested allocation."""
        return self._state.spec.num_gpus

    @property
    def rigid(self) -> bool:
        return self._state.spec.rigid

    def requested_counts(self) -> dict[str, int]:
        """Tasks per role at the requested allocation."""
        return self._state.spec.requested_counts()

    def requested_demand(self) -> tuple[float, float, float]:
        """GPUs, CPU cores and memory of the requested allocation."""
        return self._state.spec.requested_demand()

    @property
    def tenant(self) -> str | None:
        return self._state.spec.tenant

    @property
    def user(self) -> str | None:
        return self._state.spec.user

    @property
    def model(self) -> str | None:
        return self._state.spec.model

    @property
    def priority(self) -> int | None:
        return self._state.spec.priority

    @property
    def deadline(self) -> float | None:
        return self._state.spec.deadline

    @property
    def batch_size(self) -> int | None:
        return self._state.spec.batch_size

    # --- what a running job reports
    @property
    def status(self) -> Status:
        return self._state.status

    @property
    def allocation(self) -> Allocation:
        return self._state.allocation

    @property
    def gpus(self) -> float:
        """GPUs held now."""
        return self._state.gpus

    @property
    def attained_service(self) -> float:
        """GPU-seconds held so far (Tiresias's attained service)."""
        s = self._state
        return s.service + s.gpus * (self._clock.now - s.since)

    @property
    def iterations_done(self) -> float:
        s = self._state
        return s.progress + s.rate * (self._clock.now - s.since)

    @property
    def first_start(self) -> float | None:
        return self._state.first_start

    @property
    def reconfiguring(self) -> bool:
        return self._state.busy_until > self._clock.now

    @property
    def preemptions(self) -> int:
        return self._state.preemptions

    @property
    def rescales(self) -> int:
        return self._state.rescales

    @property
    def loss_observations(self):
        """Noisy training loss at the end of each completed epoch (empty without a loss curve)."""
        curve = self._state.spec.curve
        return curve.observations(self.iterations_done) if curve is not None else ()

    @property
    def iterations_per_epoch(self) -> float | None:
        """Iterations in one epoch (dataset size / batch, known to the job's owner)."""
        curve = self._state.spec.curve
        return curve.iters_per_epoch if curve is not None else None

    # --- ground truth, oracles only
    def _truth(self, what: str) -> JobSpec:
        if not self._oracle:
            raise OracleError(f"job {self.job_id!r}: {what} is ground truth; only an oracle policy may read it")
        return self._state.spec

    @property
    def total_work(self) -> float:
        return self._truth("total_work").total_work

    @property
    def remaining_work(self) -> float:
        return self._truth("remaining_work").total_work - self.iterations_done

    @property
    def duration(self) -> float | None:
        return self._truth("duration").duration

    @property
    def spec(self) -> JobSpec:
        return self._truth("the full job spec")

    def __repr__(self) -> str:
        return f"JobView({self.job_id!r}, {self.status.value}, gpus={self.gpus:g})"


@dataclass(slots=True)
class View:
    """The read-only world a policy decides on. ``pending`` and ``running`` keep the order
    in which jobs entered them; ``arrived``, ``finished`` and ``stopped`` (preempted or failed)
    list the changes since the last decision, so a policy can keep its own queues incrementally."""

    clock: Clock
    cluster: "Cluster"
    pending: Mapping[str, JobView]
    running: Mapping[str, JobView]
    arrived: list[JobView]
    finished: list[JobView]
    stopped: list[JobView]

    @property
    def now(self) -> float:
        return self.clock.now


class Policy:
    """Base class. Subclasses set ``name`` and implement ``decide``; keyword arguments of
    ``__init__`` are the policy's parameters, set from ``configs/policy/<name>.yaml``."""

    name: ClassVar[str] = "base"
    oracle: ClassVar[bool] = False

    def reset(self, view: View) -> None:
        """Called once before the first event."""

    def decide(self, view: View) -> Decision:
        raise NotImplementedError


_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available by its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"policy name {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    return sorted(_REGISTRY)


def make(name: str, **params) -> Policy:
    """Instantiate a registered policy; unknown names or parameters are clear errors."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown policy {name!r}; registered: {', '.join(names())}")
    cls = _REGISTRY[name]
    accepted = inspect.signature(cls.__init__).parameters
    unknown = [k for k in params if k not in accepted]
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        raise TypeError(f"policy {name!r} has no parameter(s) {unknown}; it takes {sorted(set(accepted) - {'self'})}")
    return cls(**params)


def read_only(d: dict) -> Mapping:
    return MappingProxyType(d)

