"""What a change of a job's resources costs.

The engine classifies every change (``Change``) and asks the overhead model for a
``Transition``: for ``prepare_s`` seconds the job keeps training at the slower of its old
and new rates (stop-free scaling: running workers go on while new ones get ready), then
makes no progress for ``pause_s`` seconds (checkpoint, restart, broadcast), then runs at
the new allocation's rate. The engine charges the lost seconds and GPU-seconds to the job.

Models: ``ConstantOverhead`` (flat costs, the presets other simulators use),
``MechanismOverhead`` (per-model costs of one elasticity mechanism: stop-resume, EDL
stop-free, SideCar process restart, pod restart, DLRover flash checkpoint) and
``ElasticFlowOverhead`` (ElasticFlow's formula). ``make`` builds one from its config.
Every constant's source is on docs/models/overhead.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import Enum
from typing import Callable, Protocol

from clustersim.simulator.job import Allocation, JobSpec, alloc_gpus, nodes_of, task_counts


class Change(Enum):
    START = "start"          # first start
    RESUME = "resume"        # start again after a preemption or failure
    STOP = "stop"            # preemption: resources released, progress kept
    SCALE_OUT = "scale_out"
    SCALE_IN = "scale_in"
    RESCALE = "rescale"      # some roles grow while others shrink
    MIGRATE = "migrate"      # same task counts, other nodes
    FAIL = "fail"            # a node under the job failed


@dataclass(frozen=True, slots=True)
class Transition:
    prepare_s: float = 0.0
    pause_s: float = 0.0


FREE = Transition()


class OverheadModel(Protocol):
    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition: ...


@dataclass(frozen=True, slots=True)
class ConstantOverhead:
    """Flat costs, the same for every model.

    ``start_s`` is paid at a job's first start, ``resume_s`` when it restarts after a
    preemption or failure, ``rescale_s`` for every scale or migration (stop-resume: the job
    pauses; stop-free: it keeps training during ``rescale_s`` and pauses only ``pause_s``).
    The defaults (all zero) replay a trace with free reconfiguration.
    """

    start_s: float = 0.0
    resume_s: float = 0.0
    rescale_s: float = 0.0
    stop_free: bool = False
    pause_s: float = 0.0

    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition:
        if change is Change.START:
            return Transition(pause_s=self.start_s)
        if change is Change.RESUME:
            return Transition(pause_s=self.resume_s)
        if change in (Change.STOP, Change.FAIL):
            return FREE
        if self.stop_free:
            return Transition(prepare_s=self.rescale_s, pause_s=self.pause_s)
        return Transition(pause_s=self.rescale_s)


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


MECHANISMS = ("stop_resume", "stop_free", "sidecar", "pod_restart", "flash_checkpoint")


@dataclass(frozen=True)
class MechanismOverhead:
    """The costs of one elasticity mechanism, per model (``costs_of(spec)``, from the profiles).

    - ``stop_resume``: every change checkpoints, tears down, restarts and restores; the job
      makes no progress for the model's ``stop_resume_s`` (EDL Table 2; Optimus §5.4).
    - ``stop_free`` (EDL §4.2): scale-out and migration keep the running workers training while
      the new ones prepare (``stop_free_prepare_s``) and stop only for the broadcast
      (``stop_free_pause_s``); scale-in is a graceful exit: the remaining workers never stop,
      the operation is in flight for the model's ``scale_in_s`` (EDL Table 3), nothing is
      lost. A resume after preemption is a stop-resume restart.
    - ``sidecar`` (seed 003, §II-C fit): the training process restarts inside its container,
      ``sidecar_base_s + sidecar_per_gpu_s * N`` (≈ 17 + 5·N s); adding GPUs on another host
      needs a pod restart.
    - ``pod_restart`` (SideCar's termination baseline): kill ``pod_kill_s`` (≈ 30 s) plus cold
      start ``pod_start_base_s + pod_start_per_gpu_s * N`` (≈ 136 + 19·N s) for every change.
    - ``flash_checkpoint`` (DLRover-RM §5.2, Fig. 12): adding workers without changing the PS
      set costs the running workers nothing (new workers launch in ``worker_launch_s``); any
      other change runs the new pods' preparation alongside training (``seamless_prepare_s``)
      then pauses for the in-memory checkpoint save and load (``flash_pause_s`` plus
      ``checkpoint_gb / flash_gb_per_s``); a resume reloads from remote storage
      (``stop_resume_s``).
    ``charge_start`` adds the launch cost at a job's first start (off: starts are free, as in
    simulators that replay only the trace's run time).
    """

    mechanism: str
    costs_of: CostsOf = default_costs
    charge_start: bool = True
    sidecar_base_s: float = 17.0         # SideCar §II-C: 27 s at 2 GPUs, 37 s at 4 (notes/sidecar.md §3.6)
    sidecar_per_gpu_s: float = 5.0
    pod_kill_s: float = 30.0             # SideCar §II-C: 204 s - 174 s
    pod_start_base_s: float = 136.0      # SideCar §II-C: 174 s at 2 GPUs, 212 s at 4
    pod_start_per_gpu_s: float = 19.0
    worker_launch_s: float = 120.0       # DLRover §6.3: 20 s pod launch + 100 s training init
    seamless_prepare_s: float = 300.0    # DLRover-RM Fig. 12: ~5 min migration overlapped with training
    flash_pause_s: float = 180.0         # DLRover-RM Fig. 12: ~1 min save + ~2 min load (flash)
    flash_gb_per_s: float = 20.0         # DLRover-RM §5.2: under 1 s for a 20 GB model

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"unknown overhead mechanism {self.mechanism!r}; known: {', '.join(MECHANISMS)}")

    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition:
        if change in (Change.STOP, Change.FAIL):
            return FREE
        c = self.costs_of(spec)
        m = self.mechanism
        if change is Change.START:
            return Transition(pause_s=self._start(spec, new, c)) if self.charge_start else FREE
        if m == "stop_resume":
            return Transition(pause_s=c.stop_resume_s)
        if m == "pod_restart":
            return Transition(pause_s=self._pod_restart(spec, new))
        if m == "sidecar":
            if change is Change.RESUME or not nodes_of(new) <= nodes_of(old):
                return Transition(pause_s=self._pod_restart(spec, new))   # other hosts: pod restart
            return Transition(pause_s=self.sidecar_base_s + self.sidecar_per_gpu_s * alloc_gpus(spec, new))
        if change is Change.RESUME:
            return Transition(pause_s=c.stop_resume_s)
        if m == "stop_free":
            if change is Change.SCALE_IN:
                return Transition(prepare_s=c.scale_in_s)
            return Transition(prepare_s=c.stop_free_prepare_s, pause_s=c.stop_free_pause_s)
        # flash_checkpoint
        a, b = task_counts(old), task_counts(new)
        if a.get("ps", 0) == b.get("ps", 0) and change in (Change.SCALE_OUT, Change.SCALE_IN):
            return Transition(prepare_s=self.worker_launch_s if change is Change.SCALE_OUT else 0.0)
        return Transition(prepare_s=self.seamless_prepare_s,
                          pause_s=self.flash_pause_s + c.checkpoint_gb / self.flash_gb_per_s)

    def _start(self, spec: JobSpec, new: Allocation, c: ModelCosts) -> float:
        if self.mechanism in ("sidecar", "pod_restart"):
            return self.pod_start_base_s + self.pod_start_per_gpu_s * alloc_gpus(spec, new)
        if self.mechanism == "flash_checkpoint":
            return self.worker_launch_s
        return c.launch_s

    def _pod_restart(self, spec: JobSpec, new: Allocation) -> float:
        return self.pod_kill_s + self.pod_start_base_s + self.pod_start_per_gpu_s * alloc_gpus(spec, new)


@dataclass(frozen=True, slots=True)
class ElasticFlowOverhead:
    """ElasticFlow's scaling cost (pkusys/ElasticFlow, scheduler/utils.py ``estimate_overhead``).

    ``2 + 2·(log2 N + 1)`` seconds for a start, plus 27 s when the job restarts from a
    checkpoint (every resume, scale or migration); on clusters of 256 GPUs or more the base is
    7 s and a restart 47 s. The job makes no progress meanwhile.
    """

    large_cluster: bool = False

    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition:
        if change in (Change.STOP, Change.FAIL):
            return FREE
        n = max(alloc_gpus(spec, new), 1.0)
        cost = 7.0 if self.large_cluster else 2.0
        if change is not Change.START:
            cost += 47.0 if self.large_cluster else 27.0
        return Transition(pause_s=cost + (math.log2(n) + 1.0) * 2.0)


KINDS = ("constant", "mechanism", "elasticflow")


def make(cfg: dict | None, costs_of: CostsOf | None = None) -> OverheadModel:
    """The overhead model a config names: ``kind`` (constant, mechanism, elasticflow) and its
    parameters; ``name`` is ignored. ``costs_of`` gives per-model costs (the profile zoo's)."""
    params = dict(cfg or {})
    params.pop("name", None)
    kind = params.pop("kind", "constant")
    try:
        if kind == "constant":
            return ConstantOverhead(**params)
        if kind == "elasticflow":
            return ElasticFlowOverhead(**params)
        if kind == "mechanism":
            return MechanismOverhead(costs_of=costs_of or default_costs, **params)
    except TypeError as e:
        raise ValueError(f"overhead config (kind {kind!r}): {e}") from None
    raise ValueError(f"overhead config: unknown kind {kind!r}; known: {', '.join(KINDS)}")
