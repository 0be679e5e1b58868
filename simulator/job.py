"""Jobs: the immutable input (JobSpec) and the runtime record the engine keeps (JobState).

An allocation maps each role name to ``{node index: task count}``; an empty mapping
means the job holds nothing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Mapping

Allocation = Mapping[str, Mapping[int, int]]
EMPTY: Allocation = MappingProxyType({})


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
        return sum(r.count * r.gpu for r in self.roles)

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
        return tuple(float(sum(r.count * r.demand[k] for r in self.roles)) for k in range(3))


class Status(Enum):
    PENDING = "pending"      # arrived, holds nothing (never started, or preempted)
    RUNNING = "running"      # holds resources (possibly paused by a reconfiguration)
    FINISHED = "finished"
    UNFINISHED = "unfinished"  # still pending or running when the simulation ended


def task_counts(alloc: Allocation) -> dict[str, int]:
    """Tasks per role in an allocation."""
    return {role: sum(nodes.values()) for role, nodes in alloc.items() if nodes}


def alloc_gpus(spec: JobSpec, alloc: Allocation) -> float:
    """GPUs an allocation holds."""
    return sum(spec.role(role).gpu * sum(nodes.values()) for role, nodes in alloc.items())


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
    preemptions: int = 0
    rescales: int = 0
    migrations: int = 0
    failures: int = 0
    overhead_s: float = 0.0         # seconds of progress lost to reconfiguration
    overhead_gpu_s: float = 0.0     # the same, in GPU-seconds
    phases: deque = field(default_factory=deque)  # (end time, rate) of the reconfiguration phases ahead
    version: int = 0                # bumps whenever the completion time must be recomputed
    extra: dict = field(default_factory=dict)

    def advance(self, now: float) -> None:
        """Bring progress and attained service up to ``now`` at the current rate."""
        dt = now - self.since
        if dt > 0:
            self.progress += self.rate * dt
            self.service += self.gpus * dt
            self.since = now
