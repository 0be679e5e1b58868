"""What a change of a job's resources costs.

The engine classifies every change (``Change``) and asks the overhead model for a
``Transition``: for ``prepare_s`` seconds the job keeps training at the slower of its old
and new rates (stop-free scaling: running workers go on while new ones get ready), then
makes no progress for ``pause_s`` seconds (checkpoint, restart, broadcast), then runs at
the new allocation's rate. Tasks a scale-in removes keep their resources for ``release_s``
(a graceful exit finishes its work first). The engine charges the lost seconds and
GPU-seconds to the job.

Models are registered by ``kind`` (``OVERHEADS``) and built from the ``overhead=`` config by
``make``; their annotated parameters are the config's keys: ``constant`` (flat costs, the
presets other simulators use), one per elasticity mechanism with per-model costs
(``stop_resume``, ``stop_free`` (EDL), ``sidecar`` (process restart), ``pod_restart``,
``flash_checkpoint`` (DLRover)) and ``elasticflow`` (ElasticFlow's formula). Every constant's
source is on docs/models/overhead.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import Enum
from typing import Annotated, Callable, ClassVar, Protocol

from clustersim.simulator.errors import ConfigError
from clustersim.simulator.job import Allocation, JobSpec, alloc_gpus, nodes_of, task_counts
from clustersim.simulator.params import NonNegative, Range, check_params
from clustersim.simulator.registry import Registry

class Change(Enum):
    START = "start"          # first start
    RESUME = "resume"        # start again after a preemption or failure
    STOP = "stop"            # preemption: resources released, progress kept
    SCALE_OUT = "scale_out"
    SCALE_IN = "scale_in"
    RESCALE = "rescale"      # some roles grow while others shrink
    MIGRATE = "migrate"      # same task counts, other nodes
    RESIZE = "resize"        # same tasks on the same nodes, other CPU/memory per task (DLRover)
    FAIL = "fail"            # a task or node under the job failed


# Change's members as module constants, for the per-job paths (engine, reconcile, the constant
# model): on Python 3.11 reading one through its class (``Change.START``) goes through EnumType's
# ``__getattr__`` hook, ~8x a global's cost, and every start and stop reads several
START, RESUME, STOP, MIGRATE, RESIZE = Change.START, Change.RESUME, Change.STOP, Change.MIGRATE, Change.RESIZE
SCALE_OUT, SCALE_IN, RESCALE, FAIL = Change.SCALE_OUT, Change.SCALE_IN, Change.RESCALE, Change.FAIL


@dataclass(frozen=True, slots=True)
class Transition:
    prepare_s: float = 0.0   # trains at the slower of the old and new rates
    pause_s: float = 0.0     # makes no progress
    release_s: float = 0.0   # tasks a scale-in removes hold their resources this long

    def __post_init__(self):
        inf = math.inf   # finite and >= 0 (NaN fails too), without a generator: one per change
        if not (0 <= self.prepare_s < inf and 0 <= self.pause_s < inf and 0 <= self.release_s < inf):
            raise ValueError(f"a transition's times must be finite and >= 0, got {self}")


FREE = Transition()
STOPS = (Change.STOP, Change.FAIL)
_PAUSES: dict[float, Transition] = {}   # pause_s -> its Transition (see ``pause``)


def pause(seconds: float) -> Transition:
    """``Transition(pause_s=seconds)``, made once per value: transitions are immutable, and a
    constant model asks for the same few at every start (a replay starts every job)."""
    tr = _PAUSES.get(seconds)
    if tr is None:
        tr = _PAUSES[seconds] = Transition(pause_s=seconds)
    return tr


class OverheadModel(Protocol):
    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition: ...


OVERHEADS = Registry("overhead model", "clustersim.simulator.overhead", "clustersim.overheads")


@OVERHEADS.register("constant")
@dataclass(frozen=True, slots=True)
class ConstantOverhead:
    """Flat costs, the same for every model.

    ``start_s`` is paid at a job's first start, ``resume_s`` when it restarts after a
    preemption or failure, ``rescale_s`` for every scale or migration (stop-resume: the job
    pauses; stop-free: it keeps training during ``rescale_s`` and pauses only ``pause_s``).
    The defaults (all zero) replay a trace with free reconfiguration.
    """

    start_s: NonNegative = 0.0
    resume_s: NonNegative = 0.0
    rescale_s: NonNegative = 0.0
    stop_free: bool = False
    pause_s: NonNegative = 0.0

    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition:
        if change is START:
            return pause(self.start_s)
        if change is RESUME:
            return pause(self.resume_s)
        if change in STOPS:
            return FREE
        if self.stop_free:
            return Transition(prepare_s=self.rescale_s, pause_s=self.pause_s)
        return pause(self.rescale_s)


@dataclass(frozen=True, slots=True)
class ModelCosts:
    """Measured reconfiguration times of one model (seconds); profiles give them per model.

    The defaults are EDL's ResNet50 (seed 001, Table 2 and 3), used for a model without
    measurements of its own.
    """

    launch_s: float = 21.0               # fresh start of a worker: EDL's end-to-end scale-out time T_out (§1.5)
    stop_resume_s: float = 44.0          # checkpoint, teardown, restart, restore (EDL Table 2, stop-resume)
    stop_free_prepare_s: float = 20.33   # new workers prepare while old ones train (Table 3 T_out - Table 2 T_s)
    stop_free_pause_s: float = 0.67      # model broadcast, the only stop (EDL Table 2)
    scale_in_s: float = 1.8              # graceful exit end to end, remaining workers do not stop (EDL Table 3)
    checkpoint_gb: float = 0.1           # checkpoint size, for flash-checkpoint copies
    # Optional, measured by clustersim-calibrate; unset (None), the change costs stop_resume_s, as
    # EDL Table 2 gives one figure for every stop-resume change:
    resume_s: float | None = None        # a resume after a preemption or failure: relaunch, restore, first iteration
    stop_resume_out_s: float | None = None   # a stop-resume scale-out (the relaunch starts n' > n processes)
    stop_resume_in_s: float | None = None    # a stop-resume scale-in

    def resume(self) -> float:
        """A restart from the checkpoint after a preemption or failure."""
        return self.stop_resume_s if self.resume_s is None else self.resume_s

    def stop_resume(self, change: "Change") -> float:
        """A change carried out by checkpoint, teardown, relaunch and restore: a scale-out or a
        scale-in at its own measured cost where there is one; any other change at ``stop_resume_s``."""
        own = {Change.SCALE_OUT: self.stop_resume_out_s, Change.SCALE_IN: self.stop_resume_in_s}.get(change)
        return self.stop_resume_s if own is None else own

    @classmethod
    def from_dict(cls, d: dict | None, where: str) -> "ModelCosts":
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"{where}: unknown overhead key(s) {sorted(unknown)}; known: {sorted(known)}")
        for k, v in d.items():
            if not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"{where}: overhead {k} must be a number >= 0, got {v!r}")
        return cls(**{k: float(v) for k, v in d.items()})


DEFAULT_COSTS = ModelCosts()
CostsOf = Callable[[JobSpec], ModelCosts]


def default_costs(spec: JobSpec) -> ModelCosts:
    """The same costs for every model, without a profile zoo."""
    return DEFAULT_COSTS


@dataclass(frozen=True)
class PerModelOverhead:
    """Base of the mechanisms whose costs are per model (``costs_of(spec)``, from the profiles).

    ``charge_start`` adds the launch cost at a job's first start (off: starts are free, as in
    simulators that replay only the trace's run time). A resume after a preemption or failure
    restarts from the last checkpoint: the model's ``resume_s`` (unset: ``stop_resume_s``).
    """

    costs_of: CostsOf = default_costs
    charge_start: bool = True
    kind: ClassVar[str] = ""

    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition:
        if change in STOPS:
            return FREE
        c = self.costs_of(spec)
        if change is Change.START:
            return Transition(pause_s=self.start_s(spec, new, c)) if self.charge_start else FREE
        if change is Change.RESUME:
            return Transition(pause_s=self.resume_s(spec, new, c))
        return self.change(spec, change, old, new, c)

    def start_s(self, spec: JobSpec, new: Allocation, c: ModelCosts) -> float:
        return c.launch_s

    def resume_s(self, spec: JobSpec, new: Allocation, c: ModelCosts) -> float:
        return c.resume()

    def change(self, spec, change, old, new, c: ModelCosts) -> Transition:
        raise NotImplementedError


@OVERHEADS.register("stop_resume")
@dataclass(frozen=True)
class StopResume(PerModelOverhead):
    """Every change checkpoints, tears down, restarts and restores: the job makes no progress
    for the model's ``stop_resume_s`` (EDL Table 2; Optimus §5.4), or a scale-out's or scale-in's
    own measured cost (``stop_resume_out_s``, ``stop_resume_in_s``) where the profile has one."""

    def change(self, spec, change, old, new, c):
        return Transition(pause_s=c.stop_resume(change))


@OVERHEADS.register("stop_free")
@dataclass(frozen=True)
class StopFree(PerModelOverhead):
    """EDL §4.2: scale-out, migration and resizing keep the running workers training while
    the new ones prepare (``stop_free_prepare_s``) and stop only for the broadcast
    (``stop_free_pause_s``); scale-in is a graceful exit: the remaining workers never stop,
    and the leaving workers hold their GPUs until they have exited (``scale_in_s``, Table 3).

    EDL's stop-free scaling is for all-reduce jobs. A parameter-server job can add or remove
    workers stop-free, but not PS: each PS holds a shard of the parameters, and a new PS count
    re-cuts the shards from a checkpoint. ``ps_stop_resume`` charges a change of the PS count as a
    stop-resume (``ModelCosts.stop_resume``), as clustersim-testbed carries it out; off (the
    default, kept so that earlier configs give the same results), it is charged stop-free."""

    ps_stop_resume: bool = False

    def change(self, spec, change, old, new, c):
        if self.ps_stop_resume and task_counts(old).get("ps", 0) != task_counts(new).get("ps", 0):
            return Transition(pause_s=c.stop_resume(change))
        if change is Change.SCALE_IN:
            return Transition(prepare_s=c.scale_in_s, release_s=c.scale_in_s)
        return Transition(prepare_s=c.stop_free_prepare_s, pause_s=c.stop_free_pause_s)


@OVERHEADS.register("pod_restart")
@dataclass(frozen=True)
class PodRestart(PerModelOverhead):
    """SideCar's termination baseline: kill ``pod_kill_s`` (≈ 30 s) plus cold start
    ``pod_start_base_s + pod_start_per_gpu_s * N`` (≈ 136 + 19·N s) for every change
    (seed 003 §II-C, notes/sidecar.md §3.6)."""

    pod_kill_s: NonNegative = 30.0           # SideCar §II-C: 204 s - 174 s
    pod_start_base_s: NonNegative = 136.0    # SideCar §II-C: 174 s at 2 GPUs, 212 s at 4
    pod_start_per_gpu_s: NonNegative = 19.0
    # The model's own checkpoint (notes/sidecar.md §3.6: C(τ) = c0 + bytes(τ)/BW): §II-C's constants
    # are one model's, so a model's checkpoint (``ModelCosts.checkpoint_gb``) written before each
    # stop and read back at the restart adds checkpoint_gb / this each way; None: not charged
    checkpoint_gb_per_s: Annotated[float, Range(gt=0)] | None = None

    def checkpoint_s(self, c: ModelCosts) -> float:
        """Seconds to write (or to read back) the model's checkpoint; 0 when not charged."""
        return c.checkpoint_gb / self.checkpoint_gb_per_s if self.checkpoint_gb_per_s else 0.0

    def start_s(self, spec, new, c):
        return self.pod_start_base_s + self.pod_start_per_gpu_s * alloc_gpus(spec, new)

    def resume_s(self, spec, new, c):
        """Kill, cold start, and the restore of the checkpoint."""
        return self.pod_kill_s + self.start_s(spec, new, c) + self.checkpoint_s(c)

    def change(self, spec, change, old, new, c):
        """A termination restart: the checkpoint written before the kill, then a resume."""
        return Transition(pause_s=self.resume_s(spec, new, c) + self.checkpoint_s(c))


@OVERHEADS.register("sidecar")
@dataclass(frozen=True)
class SidecarRestart(PodRestart):
    """SideCar (seed 003, §II-C fit): the training process restarts inside its container,
    ``sidecar_base_s + sidecar_per_gpu_s * N`` (≈ 17 + 5·N s); a change that needs GPUs on
    other hosts, or a resume, needs a pod restart."""

    sidecar_base_s: NonNegative = 17.0       # SideCar §II-C: 27 s at 2 GPUs, 37 s at 4 (notes/sidecar.md §3.6)
    sidecar_per_gpu_s: NonNegative = 5.0
    early_init: bool = False   # the policy brought the container up while the job waited (SideCar §III-B-3):
                               # a start costs the training-process start only

    def start_s(self, spec, new, c):
        if self.early_init:
            return self.sidecar_base_s + self.sidecar_per_gpu_s * alloc_gpus(spec, new)
        return PodRestart.start_s(self, spec, new, c)

    def change(self, spec, change, old, new, c):
        if not nodes_of(new) <= nodes_of(old):
            return PodRestart.change(self, spec, change, old, new, c)
        # D_sc = C + P_term + P_init (notes/sidecar.md §3.6): the write and the read back of the checkpoint
        return Transition(pause_s=self.sidecar_base_s + self.sidecar_per_gpu_s * alloc_gpus(spec, new)
                          + 2 * self.checkpoint_s(c))


@OVERHEADS.register("flash_checkpoint")
@dataclass(frozen=True)
class FlashCheckpoint(PerModelOverhead):
    """DLRover-RM §5.2, Fig. 12: adding workers without changing the PS set costs the running
    workers nothing (new workers launch in ``worker_launch_s``); any other change (PS count,
    resizing, migration) runs the new pods' preparation alongside training
    (``seamless_prepare_s``) then pauses for the in-memory checkpoint save and load
    (``flash_pause_s`` plus ``checkpoint_gb / flash_gb_per_s``); a resume reloads from remote
    storage (``stop_resume_s``)."""

    worker_launch_s: NonNegative = 120.0     # DLRover §6.3: 20 s pod launch + 100 s training init
    seamless_prepare_s: NonNegative = 300.0  # DLRover-RM Fig. 12: ~5 min migration overlapped with training
    flash_pause_s: NonNegative = 180.0       # DLRover-RM Fig. 12: ~1 min save + ~2 min load (flash)
    flash_gb_per_s: Annotated[float, Range(gt=0)] = 20.0   # DLRover-RM §5.2: under 1 s for a 20 GB model

    def start_s(self, spec, new, c):
        return self.worker_launch_s

    def change(self, spec, change, old, new, c):
        a, b = task_counts(old), task_counts(new)
        if a.get("ps", 0) == b.get("ps", 0) and change in (Change.SCALE_OUT, Change.SCALE_IN):
            return Transition(prepare_s=self.worker_launch_s if change is Change.SCALE_OUT else 0.0)
        return Transition(prepare_s=self.seamless_prepare_s,
                          pause_s=self.flash_pause_s + c.checkpoint_gb / self.flash_gb_per_s)


@OVERHEADS.register("elasticflow")
@dataclass(frozen=True, slots=True)
class ElasticFlowOverhead:
    """ElasticFlow's scaling cost (pkusys/ElasticFlow, scheduler/utils.py ``estimate_overhead``).

    ``2 + 2·(log2 N + 1)`` seconds for a start, plus 27 s when the job restarts from a
    checkpoint (every resume, scale or migration); on clusters of 256 GPUs or more the base is
    7 s and a restart 47 s. The job makes no progress meanwhile.
    """

    large_cluster: bool = False

    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition:
        if change in STOPS:
            return FREE
        n = max(alloc_gpus(spec, new), 1.0)
        cost = 7.0 if self.large_cluster else 2.0
        if change is not Change.START:
            cost += 47.0 if self.large_cluster else 27.0
        return Transition(pause_s=cost + (math.log2(n) + 1.0) * 2.0)


def make(cfg: dict | None, costs_of: CostsOf | None = None) -> OverheadModel:
    """The overhead model a config names: ``kind`` and its parameters (checked: unknown keys,
    wrong types and negative times are errors naming the key); ``name`` is the preset's name.
    ``costs_of`` gives per-model costs (the profile zoo's)."""
    params = dict(cfg or {})
    params.pop("name", None)
    kind = params.pop("kind", "constant")
    if not isinstance(kind, str):
        raise ConfigError(f"overhead.kind: must be the name of an overhead model, got {kind!r}")
    try:
        cls = OVERHEADS.get(kind).obj
    except KeyError as e:
        raise ConfigError(f"overhead.kind: {e.args[0]}") from None
    params = check_params(cls, params, "overhead.{}", skip=("costs_of",))
    if issubclass(cls, PerModelOverhead):
        params["costs_of"] = costs_of or default_costs
    return cls(**params)
