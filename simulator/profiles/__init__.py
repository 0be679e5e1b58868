"""The model zoo: one profile per model, loaded from the YAML files beside this module.

A profile gives a model's family (``gpu``: data-parallel all-reduce; ``ps``: parameter
servers), default global batch, speed model, per-task demands, reconfiguration costs and
convergence curve. Every number in the YAML files cites its source there; parametric speed
models are fitted to the measured points at load time (docs/models/profiles.md).

Speed per GPU type: ``speed`` is a model's speed on any GPU type, ``speed_by_type.<type>`` (same
keys) its speed on nodes of that type (``cluster.groups[].gpu_type``, compared case-blind). A
type the profile does not list runs at ``speed``; a profile with only ``speed_by_type`` on an
unlisted type is an error naming the profile and the type.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from clustersim.simulator.errors import ConfigError
from clustersim.simulator.job import JobSpec, task_demand
from clustersim.simulator.overhead import DEFAULT_COSTS, ModelCosts
from clustersim.simulator.registry import Registry
from clustersim.simulator.speed import (AllReduceSpeed, DLRoverSpeed, OptimusSpeed, ProfileSpeed, PSTestbed, TableSpeed,
                                        WorkerNeedSpeed, scaling_role, spread_evenly)

HERE = Path(__file__).parent
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # safe_load's rules, libyaml's parser (~10x faster)
FAMILIES = ("gpu", "ps")


def _bundled_files(reg: Registry) -> None:
    for path in sorted(HERE.glob("*.yaml")):
        reg.register(path.stem)(path)


# speed.kind of a profile -> its kind (build from the YAML, rate at an allocation)
SPEED_KINDS = Registry("speed model", "clustersim.simulator.profiles", "clustersim.speed_models")
# profile files: the bundled ones; outside packages register theirs (an entry point whose module
# calls PROFILE_FILES.register(name)(path))
PROFILE_FILES = Registry("profile file", "clustersim.simulator.profiles", "clustersim.profiles", _bundled_files)


class ProfileError(ConfigError):
    """A bad profile file: the message names the file, the profile and the key."""


def normalise(name: str) -> str:
    """Model names as traces spell them ("ResNet-50 (batch size 64)") -> lookup key ("resnet50")."""
    return re.sub(r"[^a-z0-9]", "", re.sub(r"\(.*?\)", "", name.lower()))


@dataclass
class Profile:
    name: str
    family: str
    batch_size: float
    speed_kind: str
    local_batch: int | None = None                     # per-GPU batch of a job sized per GPU (`batch: per_gpu`)
    costs: ModelCosts = DEFAULT_COSTS
    tasks: dict = field(default_factory=dict)          # role -> {cpu, mem, gpu}
    convergence: dict | None = None                    # {b0, b1, b2}
    aliases: tuple[str, ...] = ()
    model: object = None                               # AllReduceSpeed | DLRoverSpeed | OptimusSpeed | TableSpeed
    tables: dict = field(default_factory=dict)         # batch -> TableSpeed over (gpus,) (gpu tables)
    gpus_per_node: int = 8                             # of the testbed a table was measured on
    dataset_size: float | None = None                  # samples per epoch (sizes convergence-driven jobs)
    source: str = ""
    by_type: dict = field(default_factory=dict)        # gpu type (lower case) -> Profile with that type's speed
    app: object = None                                 # goodput.Application (speed kind goodput)
    pooled: bool = True                                # drawn for jobs without a model (``pool: false``: not)
    _aware: bool | None = None                         # placement_aware, once known
    locality: tuple | None = None                      # PS jobs: (inter/intra bandwidth, θ2 of Eq. 4, async)
    testbed: object = None                             # PS jobs: speed.PSTestbed (1GbE links, model size)
    embedding: dict | None = None                      # PS jobs: {static_share} of the PS memory (Zoo.usage)

    def for_type(self, gpu_type: str | None) -> "Profile":
        """The profile whose speed applies on ``gpu_type`` nodes: its own entry, else ``speed``."""
        if gpu_type is not None and self.by_type:
            sub = self.by_type.get(gpu_type.lower())
            if sub is not None:
                return sub
        if self.speed_kind is None:
            raise ProfileError(f"{self.source}: profile {self.name!r} has no speed for GPU type {gpu_type!r} "
                               f"(speed_by_type lists {', '.join(sorted(self.by_type))}; add it or a `speed`)")
        return self

    @property
    def placement_aware(self) -> bool:
        """Whether a speed of this profile depends on the tasks per node, not only the node count
        (worked out once: the engine asks at every rate change)."""
        if self._aware is None:
            self._aware = self.testbed is not None or any(getattr(SPEED_KINDS.get(p.speed_kind).obj, "placement_aware", False)
                              for p in (self, *self.by_type.values()) if p.speed_kind)
        return self._aware

    def goodput_app(self):
        """The Pollux application that gives this model's statistical efficiency, if any: it
        belongs to the model and batch, not to the GPU type."""
        for p in (self, *self.by_type.values()):
            if p.app is not None:
                return p.app
        return None

    def batch(self, spec: JobSpec) -> float:
        """The job's global batch: the trace's, else the profile's."""
        return float(spec.batch_size or self.batch_size)

    def per_gpu_batch(self, gpus: int) -> int:
        """The global batch of a job that trains at this profile's per-GPU batch on ``gpus`` GPUs.

        EDL's jobs (seed 001) are data-parallel programs started at a per-GPU batch on the GPUs they
        request; EDL then keeps that global batch constant whatever GPUs the job runs on (§3.1:
        "EDL keeps the aggregate batch size of all the workers constant and decides the per-worker
        batch size according to the parallelism"). The job's speed curve is then its profile's
        all-reduce model at this batch (``profile.batch: per_gpu``, docs/models/profiles.md)."""
        if self.local_batch is None:
            raise ProfileError(f"{self.source}: profile {self.name!r} has no local_batch, which "
                               "profile.batch=per_gpu needs (the per-GPU batch its jobs train at)")
        return self.local_batch * int(gpus)

    def rate(self, spec: JobSpec, counts: dict[str, int], nodes: int, cpus: dict[str, float] | None = None,
             gpu_type: str | None = None, shape: tuple[int, ...] = ()) -> float:
        """Iterations/s with ``counts`` tasks per role spread over ``nodes`` nodes of ``gpu_type``,
        each task of a role granted ``cpus[role]`` cores (default: the job's request, else the
        profile's); ``shape`` is the scaling role's tasks per node, for placement-aware kinds."""
        prof = self.for_type(gpu_type)
        kind = SPEED_KINDS.get(prof.speed_kind).obj
        if prof.testbed is not None or getattr(kind, "placement_aware", False):
            return kind.rate(prof, spec, counts, nodes, cpus or {}, shape=shape)
        return kind.rate(prof, spec, counts, nodes, cpus or {})

    def table_samples(self) -> list[tuple[tuple, float]]:
        """The measured GPU-table points as all-reduce samples ((GPUs, nodes packed, batch), it/s)."""
        return [((n[0], math.ceil(n[0] / self.gpus_per_node), b), v)
                for b, t in self.tables.items() for n, v in zip(t.keys, t.values)]

    def cpu(self, spec: JobSpec, role: str, cpus: dict[str, float]) -> float:
        """Cores per task of ``role``: the grant, else the job's request, else the profile's."""
        cpu = cpus.get(role)
        if cpu is None:
            try:
                cpu = spec.role(role).cpu
            except KeyError:
                cpu = 0.0
        return cpu if cpu > 0 else float(self.tasks.get(role, {}).get("cpu", 1.0))


class Zoo:
    """All profiles, by name; matches trace model names to profiles of a family."""

    def __init__(self, profiles: dict[str, Profile]):
        self.profiles = profiles
        self._by_alias: dict[tuple[str, str], Profile] = {}
        for p in profiles.values():
            for key in (p.name, *p.aliases):
                self._by_alias.setdefault((normalise(key), p.family), p)
        self.speed = ProfileSpeed(self)

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            raise KeyError(f"no profile {name!r}; known: {', '.join(sorted(self.profiles))}") from None

    def match(self, model: str | None, family: str) -> Profile | None:
        """The profile of family ``family`` a trace's model name refers to, if any."""
        return self._by_alias.get((normalise(model), family)) if model else None

    def names(self, family: str | None = None) -> list[str]:
        return sorted(n for n, p in self.profiles.items() if family in (None, p.family))

    def pool(self, family: str) -> list[str]:
        """The profiles a job of ``family`` without a model is drawn from by default: all but
        those marked ``pool: false`` (copies of a model with another testbed's GPU types)."""
        return [n for n in self.names(family) if self.profiles[n].pooled]

    def usage(self, spec: JobSpec, alloc, *, rate: float | None = None, progress: float = 1.0,
              need: float = 1.0) -> dict[str, tuple[float, float]]:
        """Per-task (CPU cores, GB) each role of a running job uses, the job running ``rate``
        steps/s (None: as fast as the allocation lets it) with ``progress`` (0..1) of its work
        done; ``need`` multiplies its memory (a job needing more than its model's profile,
        ``faults.oom``).

        A ``worker_need`` profile (the DLRM models): CPU follows the throughput
        (``WorkerNeedSpeed.busy``: a worker's with its steps, a PS's with its workers' load), and
        the PS memory is the static share plus the embedding tables, grown in proportion to the
        samples seen (``embedding.static_share``, DLRover-RM §5.3), the total of Table 2's
        ``tasks.ps.count`` PSes spread over the job's PSes; a worker's memory is its figure.
        Other profiles: the per-task figures (``tasks.<role>.cpu/mem``; a PS's memory scales with
        requested / current PS count), capped by the grant for CPU; without figures, the grant."""
        p = self.profiles.get(spec.profile)
        busy, grown = _load_use(p, spec, alloc, rate, progress) if p is not None else (None, 1.0)
        out = {}
        for role, tasks in alloc.items():
            r = spec.role(role)
            _, cpu, mem = task_demand(r, tasks)
            fig = (p.tasks.get(role) or {}) if p else {}
            used_cpu = min(cpu, float(fig["cpu"])) if "cpu" in fig else cpu
            if busy is not None:
                used_cpu = busy[role]
            used_mem = float(fig["mem"]) if "mem" in fig else mem
            if role == "ps" and "mem" in fig:
                used_mem *= grown * float(fig.get("count", r.count)) / max(sum(tasks.values()), 1)
            out[role] = (used_cpu, used_mem * need)
        return out

    usage.load_aware = True   # takes the job's rate, progress and memory need (simulator/usage.py)

    def costs_of(self, spec: JobSpec) -> ModelCosts:
        """Per-model reconfiguration costs (the defaults for a job without a known profile)."""
        p = self.profiles.get(spec.profile)
        return p.costs if p else DEFAULT_COSTS


def _load_use(p: Profile, spec: JobSpec, alloc, rate: float | None, progress: float) -> tuple[dict | None, float]:
    """For a ``worker_need`` profile with both roles running: the cores each worker and each PS
    uses at ``rate`` (``WorkerNeedSpeed.busy``), and the share of the final PS memory held after
    ``progress`` of the work (``embedding.static_share`` at the start, all of it at the end)."""
    if not (isinstance(p.model, WorkerNeedSpeed) and "ps" in alloc and "worker" in alloc):
        return None, 1.0
    x = (float(sum(alloc["worker"].values())), float(sum(alloc["ps"].values())),
         task_demand(spec.role("worker"), alloc["worker"])[1], task_demand(spec.role("ps"), alloc["ps"])[1])
    busy = dict(zip(("worker", "ps"), p.model.busy(x, p.model.predict(x)[0] if rate is None else rate)))
    static = float((p.embedding or {}).get("static_share", 1.0))
    return busy, static + (1.0 - static) * min(max(progress, 0.0), 1.0)


def load(files: list[str | Path] | None = None) -> Zoo:
    """Load the zoo from ``files`` (default: every registered profile file: the YAML files
    beside this module and those outside packages register).

    The zoo built from the same files with the same contents is built once per process (the
    runs of a sweep share it): building fits every profile's speed model. A zoo is read-only;
    its rate cache holds pure functions of their keys, so sharing it changes no result."""
    paths = [Path(f) for f in files] if files else [e.obj for e in PROFILE_FILES.entries()]
    texts = []
    for path in paths:
        try:
            texts.append((str(path), path.read_text()))
        except OSError as e:
            raise ProfileError(f"{path}: cannot read profiles: {e}") from None
    key = tuple(texts)
    if key not in _BUILT:
        _BUILT.clear()   # one zoo kept: a sweep's runs load the same files
        with _kept_fits([t for _, t in texts]):
            _BUILT[key] = _load(paths, [t for _, t in texts])
    return _BUILT[key]


_BUILT: dict[tuple, Zoo] = {}


# ---------------------------------------------------------------------------- fitted coefficients, kept
# Fitting the zoo's speed models imports scipy (0.3-0.9 s, more than a default run takes) for
# fits whose inputs rarely change. A zoo keeps its fitted coefficients in a file named by a hash
# of the profile files' text, the fitting code and the numeric libraries' versions, each fit under
# a hash of its own inputs; a later process takes them from there, bit for bit (JSON floats
# round-trip exactly), instead of fitting. The file is written atomically and only read when its
# version matches; deleting it (or the folder) only costs the next load a fit.
FITS_VERSION = 1
FITS_ENV = "CLUSTERSIM_PROFILE_FITS"   # "off": always fit, keep nothing
_fits: dict | None = None              # while a zoo builds: fit key -> coefficients


def fits_dir() -> Path:
    """``<trace cache>/profile-fits`` (``$CLUSTERSIM_CACHE``, else ``~/.cache/clustersim/traces``)."""
    from clustersim.simulator.paths import cache_dir

    return cache_dir() / "profile-fits"


def _fits_file(texts: list[str]) -> Path:
    import hashlib
    import importlib.util

    import numpy as np

    from clustersim.simulator import speed as speed_module

    spec = importlib.util.find_spec("scipy")   # its version without importing it
    scipy_version = Path(spec.origin).with_name("version.py") if spec and spec.origin else None
    h = hashlib.sha256(f"{FITS_VERSION}\0{np.__version__}\0".encode())
    for part in (Path(speed_module.__file__), Path(__file__), scipy_version):   # the fitting code, its inputs
        h.update(part.read_bytes() if part is not None and part.is_file() else b"-")
    for text in texts:
        h.update(b"\0" + text.encode())
    return fits_dir() / f"{h.hexdigest()[:32]}.json"


@contextmanager
def _kept_fits(texts: list[str]):
    """While a zoo builds, ``_fit`` takes coefficients from (and adds new ones to) its fits file."""
    global _fits
    import json
    import os

    if os.environ.get(FITS_ENV) == "off":
        yield
        return
    path = _fits_file(texts)
    try:
        data = json.loads(path.read_text())
        kept = data["fits"] if data.get("version") == FITS_VERSION else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):   # none yet, or damaged: fit again
        kept = {}
    _fits = dict(kept)
    try:
        yield
        if _fits != kept:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps({"version": FITS_VERSION, "fits": _fits}))
                os.replace(tmp, path)
            except OSError:   # a cache: a folder we cannot write costs the next load a fit, nothing else
                with suppress(OSError):
                    tmp.unlink(missing_ok=True)
    finally:
        _fits = None


def _fit(model, samples, **kw):
    """``model.fit(samples, **kw)``, or the coefficients a fit to the same inputs found before."""
    if _fits is None:
        return model.fit(samples, **kw)
    import hashlib

    import numpy as np

    params = sorted((k, v) for k, v in vars(model).items() if k != "theta")
    key = hashlib.sha256(repr((type(model).__name__, params, list(samples), sorted(kw.items()))).encode()).hexdigest()
    theta = _fits.get(key)
    if theta is None:
        model.fit(samples, **kw)
        _fits[key] = [float(t) for t in model.theta]
    else:
        model.theta = np.array(theta, dtype=np.float64)
    return model


def _load(paths: list[Path], texts: list[str]) -> Zoo:
    raw: dict[str, tuple[Path, dict]] = {}
    for path, text in zip(paths, texts):
        try:
            data = yaml.load(text, Loader=_LOADER) or {}
        except yaml.YAMLError as e:
            raise ProfileError(f"{path}: cannot read profiles: {e}") from None
        if not isinstance(data, dict):
            raise ProfileError(f"{path}: expected a mapping of profile name -> profile")
        for name, body in data.items():
            if name in raw:
                raise ProfileError(f"{path}: profile {name!r} is also defined in {raw[name][0]}")
            if not isinstance(body, dict):
                raise ProfileError(f"{path}: profile {name!r} must be a mapping")
            raw[name] = (path, body)
    built: dict[str, Profile] = {}
    for name in raw:
        _build(name, raw, built, ())
    return Zoo(built)


# ---------------------------------------------------------------------------- building profiles
def _build(name: str, raw: dict, built: dict, chain: tuple) -> Profile:
    if name in built:
        return built[name]
    if name in chain:
        raise ProfileError(f"{raw[name][0]}: profiles derive from each other in a loop: "
                           f"{' -> '.join((*chain, name))}")
    path, body = raw[name]
    where = f"{path}: profile {name!r}"
    family = body.get("family")
    if family not in FAMILIES:
        raise ProfileError(f"{where}: family must be one of {FAMILIES}, got {family!r}")
    batch = body.get("batch_size")
    if not isinstance(batch, (int, float)) or batch <= 0:
        raise ProfileError(f"{where}: batch_size must be a number > 0, got {batch!r}")
    speed = body.get("speed")
    by_type = body.get("speed_by_type")
    if by_type is not None and (not isinstance(by_type, dict) or not by_type):
        raise ProfileError(f"{where}: speed_by_type must map GPU types to speeds")
    if speed is None and by_type:
        speed = {"kind": None}
    for key, sp in (("speed", speed), *((f"speed_by_type.{t}", v) for t, v in (by_type or {}).items())):
        if key == "speed" and sp == {"kind": None}:
            continue   # speed per type only
        if not isinstance(sp, dict) or sp.get("kind") not in SPEED_KINDS.names():
            raise ProfileError(f"{where}: {key}.kind must be one of {', '.join(SPEED_KINDS.names())}")
    try:
        costs = ModelCosts.from_dict(body.get("overhead"), where)
    except ValueError as e:
        raise ProfileError(str(e)) from None
    pooled = body.get("pool", True)
    if not isinstance(pooled, bool):
        raise ProfileError(f"{where}: pool must be true or false, got {pooled!r}")
    local = body.get("local_batch")
    if local is not None and (isinstance(local, bool) or not isinstance(local, int) or local <= 0):
        raise ProfileError(f"{where}: local_batch must be a whole number > 0 (samples per GPU), got {local!r}")
    dataset = body.get("dataset_size")
    if dataset is not None and (not isinstance(dataset, (int, float)) or dataset <= 0):
        raise ProfileError(f"{where}: dataset_size must be a number > 0 (samples per epoch), got {dataset!r}")
    prof = Profile(name=name, family=family, batch_size=float(batch), speed_kind=speed["kind"], costs=costs,
                   local_batch=local,
                   tasks=body.get("tasks") or {}, embedding=_embedding(body.get("embedding"), where),
                   convergence=_convergence(body.get("convergence"), where),
                   aliases=tuple(body.get("aliases") or ()), dataset_size=None if dataset is None else float(dataset), pooled=pooled,
                   source=str(path.name))
    if speed["kind"] is not None:
        SPEED_KINDS.get(speed["kind"]).obj.build(prof, speed, raw, built, chain + (name,), where)
    for gpu_type, sp in (by_type or {}).items():
        sub = replace(prof, speed_kind=sp["kind"], model=None, tables={}, by_type={}, app=None, _aware=None)
        SPEED_KINDS.get(sp["kind"]).obj.build(sub, sp, raw, built, chain + (name,), f"{where} speed_by_type.{gpu_type}")
        prof.by_type[str(gpu_type).lower()] = sub
    built[name] = prof
    return prof


# ---------------------------------------------------------------------------- speed kinds
@SPEED_KINDS.register("allreduce")
class _AllReduceKind:
    """Data-parallel GPU job: the all-reduce model in (GPUs, nodes spanned, batch), fitted to the
    profile's table, given as theta, or derived from another profile (docs/models/speed.md)."""

    @staticmethod
    def build(prof, speed, raw, built, chain, where):
        if prof.family != "gpu":
            raise ProfileError(f"{where}: speed.kind allreduce is for gpu profiles")
        prof.gpus_per_node = int((speed.get("fit") or {}).get("gpus_per_node", 8))
        prof.tables = _gpu_tables(speed.get("table"), where) if speed.get("table") else {}
        prof.model = _allreduce(speed, prof, raw, built, chain, where)

    @staticmethod
    def rate(prof, spec, counts, nodes, cpus):
        n = counts.get(scaling_role(spec), 0)
        return float(prof.model.predict((n, nodes, prof.batch(spec)))[0]) if n else 0.0


@SPEED_KINDS.register("table")
class _TableKind:
    """Measured points: GPU tables (rows: global batch; columns: GPUs) or a PS grid over (p, w)
    in samples/s at the global batch (Optimus Eq. 4's M)."""

    @staticmethod
    def build(prof, speed, raw, built, chain, where):
        if prof.family == "ps":
            prof.model = _grid(speed, where)
            prof.locality = _locality(speed, prof, where)
            prof.testbed = _testbed(speed, prof, where)
            return
        prof.gpus_per_node = int((speed.get("fit") or {}).get("gpus_per_node", 8))
        if not speed.get("table"):
            raise ProfileError(f"{where}: speed.kind table needs speed.table")
        prof.tables = _gpu_tables(speed["table"], where)

    @staticmethod
    def rate(prof, spec, counts, nodes, cpus, shape=()):
        batch = prof.batch(spec)
        if prof.family == "ps":
            p, w = counts.get("ps", 0), counts.get("worker", 0)
            if not (p and w):
                return 0.0
            if prof.testbed is not None:   # shape: (PS, workers) per server, else an even spread
                return prof.testbed.rate(p, w, shape or spread_evenly(p, w, nodes))
            r = float(prof.model.predict((p, w))[0]) / batch
            return _ps_placed(prof.locality, r, p, w, nodes) if prof.locality else r
        n = counts.get(scaling_role(spec), 0)
        if n == 0:
            return 0.0
        row = min(prof.tables, key=lambda b: (abs(math.log(b / batch)), b))
        return float(prof.tables[row].predict((n,))[0]) * row / batch   # same samples/s at another batch


@SPEED_KINDS.register("optimus")
class _OptimusKind:
    """PS job: Optimus Eq. 3 (async) / Eq. 4 (sync) fitted at load time to measured (p, w, samples/s)
    points, e.g. a calibration's (simulator/calibration); rates as a PS grid's."""

    @staticmethod
    def build(prof, speed, raw, built, chain, where):
        if prof.family != "ps":
            raise ProfileError(f"{where}: speed.kind optimus is a parameter-server model (family ps)")
        prof.model = _optimus(speed, prof.batch_size, where)

    rate = _TableKind.rate


@SPEED_KINDS.register("ps_async")
class _PSAsyncKind:
    """Asynchronous training of a PS model whose synchronous grid is measured (profile ``sync``).

    Optimus Eq. 2 (seed 004 §3.2) gives one worker's step time as forward + backward + transfer
    + update + overheads. Sync training (Eq. 4) holds the global batch M, so a worker computes
    M/w samples a step; async training (Eq. 3) holds each worker's batch m (notes/optimus.md
    §6 #21). With the PS-side terms the same in both (w'_ρ = w: every worker contends, the
    linear case §3.2 assumes), the async step takes the measured sync step time plus the
    forward time of the extra samples, ``T_a = 1/f_s(p, w) + θ0·(m − M/w)``, θ0 the per-sample
    forward time of Eq. 4 fitted to the sync grid; w workers complete ``w / T_a`` steps/s of
    ``m`` samples. The result is a grid over the same (p, w), interpolated like the sync one;
    m is this profile's ``batch_size``. At w = 1 both modes run at the same speed.
    """

    @staticmethod
    def build(prof, speed, raw, built, chain, where):
        base_name = speed.get("sync")
        if prof.family != "ps" or base_name not in raw:
            raise ProfileError(f"{where}: speed.kind ps_async is for ps profiles and needs speed.sync, "
                               f"the name of the synchronous profile whose grid it derives from (got {base_name!r})")
        base = _build(base_name, raw, built, chain)
        if base.speed_kind != "table" or base.family != "ps":
            raise ProfileError(f"{where}: speed.sync must name a ps profile with a measured grid (kind table)")
        big_m, m = base.batch_size, prof.batch_size
        pts = [((float(p), float(w)), v / big_m) for (p, w), v in zip(base.model.keys, base.model.values)]
        theta0 = _fit(OptimusSpeed("sync", big_m), pts).theta[0]
        if base.locality:   # the same transfer (θ2·w/p of the sync fit) in each async step
            prof.locality = (base.locality[0], base.locality[1], True)
        if base.testbed is not None:   # the same compute and links, each worker at its own batch m
            t = base.testbed
            prof.testbed = PSTestbed(t.theta, t.size_mb, t.link_mb_s, "async", m, t.balance)
        grid = {}
        for (p, w), steps in pts:
            t = 1.0 / steps + theta0 * (m - big_m / w)
            grid[(p, w)] = w / t * m   # samples/s, as the sync grid
        prof.model = TableSpeed(grid)

    rate = staticmethod(_TableKind.rate)


@SPEED_KINDS.register("dlrover")
class _DLRoverKind:
    """PS job: DLRover-RM Eqs. 1-6 in workers, PS and the CPU each task is granted."""

    @staticmethod
    def build(prof, speed, raw, built, chain, where):
        if prof.family != "ps":
            raise ProfileError(f"{where}: speed.kind dlrover is for ps profiles")
        prof.model = _dlrover(speed, where)

    @staticmethod
    def rate(prof, spec, counts, nodes, cpus):
        p, w = counts.get("ps", 0), counts.get("worker", 0)
        if p == 0 or w == 0:
            return 0.0
        return float(prof.model.predict((w, p, prof.cpu(spec, "worker", cpus), prof.cpu(spec, "ps", cpus)))[0])


@SPEED_KINDS.register("worker_need")
class _WorkerNeedKind:
    """PS job: the DLRover draft's §4.1 model (``speed.WorkerNeedSpeed``) from its Table 1
    sampling row: ``w_hat`` (cores a worker uses), ``s_hat`` (PS cores one worker loads) and
    ``sample_steps_per_s`` (one worker's steps/s)."""

    @staticmethod
    def build(prof, speed, raw, built, chain, where):
        if prof.family != "ps":
            raise ProfileError(f"{where}: speed.kind worker_need is for ps profiles")
        try:
            prof.model = WorkerNeedSpeed(float(speed["w_hat"]), float(speed["s_hat"]), float(speed["sample_steps_per_s"]))
        except KeyError as e:
            raise ProfileError(f"{where}: speed.kind worker_need needs {e.args[0]}") from None
        except (TypeError, ValueError) as e:
            raise ProfileError(f"{where}: speed: {e}") from None

    @staticmethod
    def rate(prof, spec, counts, nodes, cpus):
        p, w = counts.get("ps", 0), counts.get("worker", 0)
        if p == 0 or w == 0:
            return 0.0
        return float(prof.model.grid(w, p, prof.cpu(spec, "worker", cpus), prof.cpu(spec, "ps", cpus)))


@SPEED_KINDS.register("goodput")
class _GoodputKind:
    """Pollux's throughput model on a Pollux application directory (simulator/goodput.py):
    ``data`` (the directory), ``max_epochs`` (the Pollux simulator's epochs of the application),
    optional ``max_local_bsz`` and ``perf`` (the fitted parameters; fitted at load without it).
    Iterations/s at the job's global batch on its placement; the application's gradient
    statistics size jobs without a duration (examples to the target, simulator/workload.py)."""

    placement_aware = True

    @staticmethod
    def build(prof, speed, raw, built, chain, where):
        from clustersim.simulator import goodput
        from clustersim.simulator.paths import resolve
        if prof.family != "gpu":
            raise ProfileError(f"{where}: speed.kind goodput is for gpu profiles")
        try:
            perf = speed.get("perf")
            prof.app = goodput.application(str(resolve(speed["data"])), int(speed["max_epochs"]),
                                            speed.get("max_local_bsz"), tuple(perf) if perf else None)
        except KeyError as e:
            raise ProfileError(f"{where}: speed.kind goodput needs {e.args[0]}") from None
        except (ValueError, TypeError) as e:
            raise ProfileError(f"{where}: {e}") from None
        prof.gpus_per_node = int(speed.get("gpus_per_node", 4))

    @staticmethod
    def rate(prof, spec, counts, nodes, cpus, shape=()):
        n = counts.get(scaling_role(spec), 0)
        if n == 0:
            return 0.0
        per_node = list(shape) if shape and sum(shape) == n else _packed_shape(n, nodes)
        return 1.0 / prof.app.iteration_time(per_node, prof.batch(spec))


def _packed_shape(n: int, nodes: int) -> list[int]:
    """``n`` tasks spread as evenly as possible over ``nodes`` nodes (no per-node layout known)."""
    nodes = max(1, min(nodes, n))
    return [n // nodes + (1 if i < n % nodes else 0) for i in range(nodes)]


def _embedding(e, where) -> dict | None:
    if e is None:
        return None
    share = e.get("static_share") if isinstance(e, dict) else None
    if set(e if isinstance(e, dict) else ()) != {"static_share"} or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ProfileError(f"{where}: embedding needs static_share in [0, 1] (the PS memory held from the start), got {e!r}")
    return {"static_share": float(share)}


def _convergence(c, where) -> dict | None:
    if c is None:
        return None
    if not isinstance(c, dict) or set(c) != {"b0", "b1", "b2"} or any(
            not isinstance(v, (int, float)) or v < 0 for v in c.values()):
        raise ProfileError(f"{where}: convergence needs b0, b1, b2 >= 0, got {c!r}")
    return {k: float(v) for k, v in c.items()}


def _gpu_tables(table, where) -> dict[float, TableSpeed]:
    gpus = table.get("gpus") if isinstance(table, dict) else None
    rows = table.get("batch") if isinstance(table, dict) else None
    if not gpus or not isinstance(rows, dict):
        raise ProfileError(f"{where}: speed.table needs gpus and batch rows")
    out = {}
    for b, values in rows.items():
        if not isinstance(values, list) or len(values) != len(gpus):
            raise ProfileError(f"{where}: speed.table.batch.{b} needs {len(gpus)} values (one per GPU count)")
        pts = {(float(n),): float(v) for n, v in zip(gpus, values) if v is not None and math.isfinite(v) and v > 0}
        if not pts:
            raise ProfileError(f"{where}: speed.table.batch.{b} has no measured value")
        out[float(b)] = TableSpeed(pts)
    return out


def _grid(speed, where) -> TableSpeed:
    g = speed.get("grid")
    try:
        ps, ws, values = g["p"], g["w"], g["samples_per_s"]
        pts = {(float(p), float(w)): float(values[i][j]) for i, p in enumerate(ps) for j, w in enumerate(ws)
               if values[i][j] is not None and values[i][j] > 0}
    except (TypeError, KeyError, IndexError):
        raise ProfileError(f"{where}: speed.grid needs p, w and a p x w samples_per_s matrix") from None
    return TableSpeed(pts)


def _locality(speed, prof, where) -> tuple | None:
    """``speed.locality: {inter_bw, intra_bw}`` (MB/s between and within servers) of a PS grid:
    (inter/intra, θ2 of Eq. 4 fitted to the grid, False): see ``_ps_placed``."""
    loc = speed.get("locality")
    if loc is None:
        return None
    try:
        inter, intra = float(loc["inter_bw"]), float(loc["intra_bw"])
    except (TypeError, KeyError, ValueError):
        raise ProfileError(f"{where}: speed.locality needs inter_bw and intra_bw (MB/s)") from None
    if not (inter > 0 and intra > 0):
        raise ProfileError(f"{where}: speed.locality bandwidths must be > 0, got {loc!r}")
    return inter / intra, float(_sync_theta(prof)[2]), False


def _sync_theta(prof):
    """θ of Eq. 4 (sync PS) fitted to a PS profile's grid, in iterations of its batch per second."""
    m = prof.batch_size
    pts = [((p, w), v / m) for (p, w), v in zip(prof.model.keys, prof.model.values)]
    return _fit(OptimusSpeed("sync", m), pts).theta


def _testbed(speed, prof, where):
    """``speed.testbed: {params_m, link_mb_s, bytes_per_param}`` of a PS grid: the speed on
    Optimus's testbed (``speed.PSTestbed``), compute from Eq. 4 fitted to the grid, the transfer
    from the model's size (Table 1's parameters x bytes each) over ``link_mb_s`` links."""
    tb = speed.get("testbed")
    if tb is None:
        return None
    if speed.get("locality") is not None:
        raise ProfileError(f"{where}: speed.testbed and speed.locality are two models of placement: give one")
    try:
        size = float(tb["params_m"]) * float(tb.get("bytes_per_param", 4))
        link = float(tb["link_mb_s"])
    except (TypeError, KeyError, ValueError):
        raise ProfileError(f"{where}: speed.testbed needs params_m (millions) and link_mb_s (MB/s)") from None
    if not (size > 0 and link > 0):
        raise ProfileError(f"{where}: speed.testbed sizes and bandwidth must be > 0, got {tb!r}")
    return PSTestbed(_sync_theta(prof), size, link, "sync", prof.batch_size)


def _ps_placed(locality, rate: float, p: int, w: int, nodes: int) -> float:
    """A PS job's iterations/s with its ``p`` PS and ``w`` workers on ``nodes`` servers.

    The measured grid is taken as every transfer crossing servers (each task on its own
    server, as Kubernetes' default spreading places them: docs/policies/optimus.md). Optimus
    §4.2/Appendix: a step's transfer time is that of the slowest side, (S/p)(w − w_k)/B on a
    PS, (S/p)(p − p_k)/b on a worker, only traffic leaving a server counting; traffic within a
    server moves at the intra-server bandwidth (DL2 trace.py's intra_bw). With equal bandwidth
    at both ends (Fig. 10's example) and the tasks spread evenly over the n servers (Theorem 1;
    only n is known here), the cross-server transfer is max(w − ⌊w/n⌋, p − ⌊p/n⌋) against
    max(w, p) when every task is alone: a share x of the measured one (x = 1 with every task
    on its own server, 0 on one server); the rest, 1 − x, moves within servers at
    inter/intra (at most 1) of the time, so the transfer takes c = x + (1 − x)·min(1, inter/intra)
    of its measured time: never less on fewer servers, as Theorem 1 proves. The transfer is
    θ2·w/p of Eq. 4 fitted to the sync grid (transfer plus update, notes/optimus.md §2.3), at
    most the step: the step shrinks by (1 − c) of it.
    """
    ratio, theta2, is_async = locality
    n = max(1, min(nodes, p + w))
    x = max(w - w // n, p - p // n) / max(w, p)
    c = x + (1.0 - x) * min(ratio, 1.0)
    if c == 1.0:
        return rate
    step = w / rate if is_async else 1.0 / rate   # async iterations are per-worker steps (Eq. 3)
    saved = (1.0 - c) * min(theta2 * w / p, step)
    return rate * step / (step - saved)


def _optimus(speed, batch: float, where) -> OptimusSpeed:
    """Optimus Eq. 3 (async) / Eq. 4 (sync) fitted to measured (p, w, samples/s) points, e.g. a
    calibration's (simulator/calibration); the batch in Eq. 4 is the profile's global batch M."""
    pts, mode = speed.get("points"), speed.get("mode", "sync")
    if not isinstance(pts, list) or any(not isinstance(r, list) or len(r) != 3 for r in pts):
        raise ProfileError(f"{where}: speed.points must be rows [PS, workers, samples/s]")
    try:
        return _fit(OptimusSpeed(mode, batch), [((r[0], r[1]), r[2]) for r in pts])
    except ValueError as e:
        raise ProfileError(f"{where}: speed: {e}") from None


def _dlrover(speed, where) -> DLRoverSpeed:
    pts = speed.get("points")
    if not isinstance(pts, list) or not pts or any(not isinstance(r, list) or len(r) != 5 for r in pts):
        raise ProfileError(f"{where}: speed.points must be rows [workers, PS, worker CPU, PS CPU, steps/s]")
    model = DLRoverSpeed(worker_cpu_cap=float(speed.get("worker_cpu_cap", math.inf)))
    try:   # as few points as published; `shares` splits what they cannot separate
        return _fit(model, [(tuple(r[:4]), r[4]) for r in pts], min_samples=1, shares=speed.get("shares"))
    except ValueError as e:
        raise ProfileError(f"{where}: speed: {e}") from None


def _allreduce(speed, prof: Profile, raw, built, chain, where) -> AllReduceSpeed:
    derive = speed.get("derive")
    if derive:
        base_name = derive.get("from")
        if base_name not in raw:
            raise ProfileError(f"{where}: speed.derive.from names no profile ({base_name!r})")
        base = _build(base_name, raw, built, chain)
        bspeed = raw[base_name][1]["speed"]
        try:
            fl, mb = float(derive["flops"]) / float(bspeed["flops"]), float(derive["size_mb"]) / float(bspeed["size_mb"])
        except (KeyError, TypeError):
            raise ProfileError(f"{where}: speed.derive needs flops and size_mb, and {base_name!r} its own") from None
        c, f, s, ai, ae = base.model.theta
        prof.gpus_per_node = base.gpus_per_node
        model = AllReduceSpeed([c * fl, f, s, ai * mb, ae * mb])
    elif prof.tables:
        model = _fit(AllReduceSpeed(), prof.table_samples())
    elif "theta" in speed:
        model = AllReduceSpeed(speed["theta"])
    else:
        raise ProfileError(f"{where}: an allreduce speed needs a table to fit, theta, or derive")
    spread = speed.get("spread")
    if spread:
        model = _calibrate_spread(model, spread, prof.batch_size, where)
    return model


def _calibrate_spread(model: AllReduceSpeed, spread: dict, batch: float, where) -> AllReduceSpeed:
    """Set a_extra so that ``gpus`` GPUs over ``nodes`` nodes run at ``ratio`` x one node."""
    try:
        n, nodes, ratio = int(spread["gpus"]), int(spread["nodes"]), float(spread["ratio"])
    except (KeyError, TypeError, ValueError):
        raise ProfileError(f"{where}: speed.spread needs gpus, nodes and ratio") from None
    if not (0 < ratio <= 1 and n > 1 and nodes > 1):
        raise ProfileError(f"{where}: speed.spread needs 0 < ratio <= 1, gpus > 1, nodes > 1")
    theta = model.theta.copy()
    packed = 1.0 / float(AllReduceSpeed(theta).predict((n, 1, batch))[0])
    theta[4] = packed * (1.0 / ratio - 1.0) / (2.0 * (n - 1) / n)
    return AllReduceSpeed(theta)
