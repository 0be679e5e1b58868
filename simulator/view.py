"""What the engine hands a policy, and what a policy hands back.

At each decision point the engine calls ``Policy.decide(view)`` with a read-only ``View``:
the time, the cluster (``ClusterView``), the pending and running jobs (``JobView``) and the
changes since the last decision. The policy returns a ``Decision``: the desired allocation
of each job whose allocation it changes (``None`` or an empty mapping stops the job), and
optionally when to be woken again. Jobs it does not mention keep what they have.

A ``JobView`` shows what a real scheduler observes: the request, the allocation, attained
service, progress, measured throughput samples, per-task resource usage, loss observations
and why the job last stopped. ``JobView.profiled`` is offline knowledge a scheduler may have
profiled before the job runs (SideCar's iteration times, Optimus's pre-run samples): the
speed model's rate at any allocation, with its own error. Ground truth (total and remaining
work, the recorded duration, the spec) raises ``OracleError`` unless the policy is an oracle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping, NamedTuple

import numpy as np

from clustersim.simulator.errors import OracleError, PolicyError  # noqa: F401  (part of the contract)
from clustersim.simulator.job import Allocation, JobSpec, JobState, RoleSpec, Status, StopReason, task_demand
from clustersim.simulator.overhead import DEFAULT_COSTS, ModelCosts

if TYPE_CHECKING:
    from clustersim.simulator.cluster import Cluster

_PENDING = Status.PENDING   # a module constant: on Python 3.11 ``Status.PENDING`` costs an EnumType hook call


@dataclass(slots=True)
class Decision:
    allocations: dict[str, Allocation | None] = field(default_factory=dict)
    wakeup: float | None = None  # seconds from now


class ThroughputSample(NamedTuple):
    """Iterations/s measured over ``[start, end)`` at ``allocation`` (with measurement noise)."""

    start: float
    end: float
    rate: float
    allocation: Allocation


@dataclass
class Observer:
    """The engine's side of the views: the clock and the models that turn state into
    observations. Tests and tools build one with ``Observer()`` and set ``now`` themselves."""

    now: float = 0.0
    speed: object = None           # SpeedModel: what ``profiled`` predicts
    usage: object = None           # usage(spec, alloc) -> {role: (cpu, mem) per task}
    cluster: object = None
    profiled_error: float = 0.0    # relative error of profiled rates (0: exact)
    seed: int = 0
    faults: object = None          # FaultModel: what per-worker step times show (slowest_task)
    costs_of: object = None        # spec -> ModelCosts: the profiled reconfiguration costs (None: the defaults)


class ClusterView:
    """A read-only window on the cluster: arrays cannot be written, counts are live."""

    __slots__ = ("_c",)

    def __init__(self, cluster: "Cluster"):
        self._c = cluster

    @property
    def num_nodes(self) -> int:
        return self._c.num_nodes

    @property
    def capacity(self) -> np.ndarray:
        return self._c.capacity            # already read-only

    @property
    def free(self) -> np.ndarray:
        """Free resources per node (read-only; down nodes show what they would have)."""
        return _read_only(self._c.free)

    @property
    def up(self) -> np.ndarray:
        return self._c.up                  # already read-only (set_up unlocks it only to write)

    @property
    def total(self) -> np.ndarray:
        return self._c.total               # already read-only

    @property
    def total_gpus(self) -> float:
        return self._c.total_gpus

    @property
    def free_gpus(self) -> float:
        return self._c.free_gpus

    @property
    def gpu_type(self) -> tuple[str, ...]:
        return self._c.gpu_type

    @property
    def rack(self) -> tuple[int, ...]:
        return self._c.rack

    def free_copy(self) -> np.ndarray:
        """Free resources per node, for a policy to plan on; down nodes show nothing free."""
        return self._c.free_copy()

    def up_capacity(self) -> np.ndarray:
        return self._c.up_capacity()


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.setflags(write=False)
    return v


class JobView:
    """What a policy may observe of one job. Made once per job; reads the live state."""

    __slots__ = ("_state", "_obs", "_oracle", "_declared", "_num_gpus", "_demand")

    def __init__(self, state: JobState, observer: Observer, oracle: bool, declared_iterations: float | None = None):
        self._state = state
        self._obs = observer
        self._oracle = oracle
        self._declared = declared_iterations
        self._num_gpus = state.spec.num_gpus   # read at every decision; the spec never changes
        self._demand = None                    # requested_demand, worked out at its first read

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
        return self._num_gpus

    @property
    def rigid(self) -> bool:
        return self._state.spec.rigid

    def requested_counts(self) -> dict[str, int]:
        """Tasks per role at the requested allocation."""
        return self._state.spec.requested_counts()

    def requested_demand(self) -> tuple[float, float, float]:
        """GPUs, CPU cores and memory of the requested allocation."""
        if self._demand is None:
            self._demand = self._state.spec.requested_demand()
        return self._demand

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

    @property
    def declared_iterations(self) -> float | None:
        """The iterations the owner asked for at submission (epochs x iterations per epoch, as
        SideCar's users declare, seed 003 §III-C); None when the job declared none (it runs to a
        target, or the workload's jobs do not declare: engine config ``observe.declared_iterations``)."""
        return self._declared

    # --- what a running job reports
    @property
    def status(self) -> Status:
        return self._state.status

    @property
    def allocation(self) -> Allocation:
        """``{role: Tasks}``: read-only, with each task's CPU and memory grant."""
        return self._state.allocation

    @property
    def gpus(self) -> float:
        """GPUs held now."""
        return self._state.gpus

    @property
    def attained_service(self) -> float:
        """GPU-seconds held so far (Tiresias's attained service)."""
        s = self._state
        return s.service + s.gpus * (self._obs.now - s.since)

    @property
    def iterations_done(self) -> float:
        s = self._state
        return min(s.progress + s.rate * (self._obs.now - s.since), s.spec.total_work)

    @property
    def first_start(self) -> float | None:
        return self._state.first_start

    @property
    def reconfiguring(self) -> bool:
        return self._state.busy_until > self._obs.now

    @property
    def preemptions(self) -> int:
        return self._state.preemptions

    @property
    def rescales(self) -> int:
        return self._state.rescales

    @property
    def failures(self) -> int:
        return self._state.failures

    @property
    def stop_reason(self) -> StopReason | None:
        """Why the job last stopped (preempted, failed, node down, OOM); None if it never did."""
        return self._state.stop_reason

    @property
    def slowest_task(self) -> tuple[str, int, float] | None:
        """A running synchronous job's straggler, as per-worker step times show it: (role, node of
        the task, its speed relative to the others); None while every task keeps pace."""
        f = self._obs.faults
        return f.slowest_task(self._state.spec.job_id) if f is not None else None

    @property
    def last_failure(self):
        """The job's latest failure (``job.Failure``: time, cause, role and node of the failed task,
        progress lost to it), None if it never failed."""
        return self._state.last_failure

    @property
    def waited(self) -> float:
        """Seconds spent pending so far, after preemptions too."""
        s = self._state
        return s.waited + (self._obs.now - s.pending_since if s.status is _PENDING else 0.0)

    @property
    def throughput_samples(self) -> tuple[ThroughputSample, ...]:
        """Measured iterations/s over the recent intervals the job trained at a steady rate,
        oldest first, the interval in progress last (each with measurement noise). An ended job's
        samples are readable at the decision whose ``View.finished`` reports it; the engine
        drops them at the next one (a long replay keeps no history per finished job)."""
        s = self._state
        out = [ThroughputSample(*x) for x in s.samples or ()]
        if out and out[-1].end is None:
            out[-1] = out[-1]._replace(end=self._obs.now)
            if out[-1].end <= out[-1].start:
                out.pop()
        return tuple(out)

    def usage(self) -> dict[str, tuple[float, float]]:
        """Per-task (CPU cores, GB) each role uses now, from the profile's usage model."""
        alloc = self._state.allocation
        if not alloc:
            return {}
        if self._obs.usage is None:
            return {r: task_demand(self._state.spec.role(r), t)[1:] for r, t in alloc.items()}
        return self._obs.usage(self._state.spec, alloc)

    @property
    def profiled(self) -> "Profiled":
        """Offline profiling of the job's model: rate at any allocation (not ground truth of work)."""
        return Profiled(self._state.spec, self._obs)

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

    @property
    def convergence_threshold(self) -> float | None:
        """The loss-drop threshold the job's owner set for convergence (Optimus §3.1), if any."""
        curve = self._state.spec.curve
        return curve.threshold if curve is not None else None

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


class Profiled:
    """A job's profiled speed: iterations/s at an allocation, as an offline profiling run
    measured it (the simulator's speed model, times a fixed per-job error when
    ``profiled_error`` is set). It says nothing about how much work is left."""

    __slots__ = ("_spec", "_obs")

    def __init__(self, spec: JobSpec, observer: Observer):
        self._spec, self._obs = spec, observer

    @property
    def key(self):
        """The speed profile these estimates come from, as a key: two jobs whose ``Profiled`` have
        equal keys get the same rate at every allocation in this run, so a policy may keep what it
        works out of the estimates (a speed-up curve) per key instead of per job. The keys are
        the zoo model's own (``ProfileSpeed`` keeps its rates per profile, batch and roles): jobs
        draw their profiles from a pool, so jobs of one model and request need not share one.
        None where no such promise holds: another speed model (its rate may read anything of the
        job, e.g. ``LinearSpeed`` its duration), or a per-job ``profiled_error``."""
        from clustersim.simulator.speed import ProfileSpeed   # where used: nothing else here needs the models

        if type(self._obs.speed) is not ProfileSpeed or self._obs.profiled_error:
            return None
        spec = self._spec
        return (spec.profile, spec.batch_size, spec.roles)

    def rate(self, allocation: Allocation) -> float:
        """Iterations/s on ``allocation`` (``{role: {node: tasks}}``)."""
        if self._obs.speed is None:
            raise PolicyError("no speed model: profiled rates need the engine's speed model")
        r = self._obs.speed.rate(self._spec, allocation, self._obs.cluster)
        err = self._obs.profiled_error
        if err:
            gen = np.random.default_rng((self._obs.seed, 0x9F0F, self._spec.index))
            r *= max(1.0 + err * gen.standard_normal(), 0.05)
        return r

    @property
    def costs(self) -> ModelCosts:
        """The model's profiled reconfiguration costs (its checkpoint's size among them)."""
        return DEFAULT_COSTS if self._obs.costs_of is None else self._obs.costs_of(self._spec)

    def iteration_time(self, allocation: Allocation) -> float:
        """Seconds per iteration on ``allocation`` (SideCar's profiled iteration time)."""
        r = self.rate(allocation)
        return 1.0 / r if r > 0 else float("inf")

    def counts_rate(self, counts: Mapping[str, int], nodes: int = 1) -> float:
        """Iterations/s with ``counts`` tasks per role packed on ``nodes`` nodes (node indices
        are notional: 0..nodes-1)."""
        alloc = {}
        for role, n in counts.items():
            per, extra = divmod(n, nodes)
            alloc[role] = {i: per + (i < extra) for i in range(nodes) if per + (i < extra)}
        return self.rate(alloc)


@dataclass(slots=True)
class View:
    """The read-only world a policy decides on. ``pending`` and ``running`` keep the order
    in which jobs entered them; ``arrived``, ``finished`` and ``stopped`` (preempted or failed)
    list the changes since the last decision, so a policy can keep its own queues incrementally."""

    clock: Observer
    cluster: ClusterView
    pending: Mapping[str, JobView]
    running: Mapping[str, JobView]
    arrived: tuple[JobView, ...]
    finished: tuple[JobView, ...]
    stopped: tuple[JobView, ...]

    @property
    def now(self) -> float:
        return self.clock.now


def read_only(d: dict) -> Mapping:
    return MappingProxyType(d)

