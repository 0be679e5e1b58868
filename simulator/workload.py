"""From the canonical job table to JobSpecs the engine runs.

Without a profile zoo a job's work is its trace's iteration count where the trace gives one,
else its recorded duration, and the placement-blind ``LinearSpeed`` runs it.

With a zoo (``Assignment``), each job gets a profile: the one its trace's model name refers
to (within the job's family: ``ps`` if it has a ``ps`` role, else ``gpu``), otherwise one
drawn uniformly from the family's pool with the run's ``workload`` random stream (EDL §6.3 and
Tiresias draw the model of a trace job uniformly from the TensorFlow benchmark models; Optimus
§6.1 uniformly from its Table 1). Its work is then ``duration × rate`` at the requested task
counts placed packed (fewest nodes, largest nodes first), so that the job run alone on an
empty cluster, where a packing placement puts it, takes exactly its recorded duration. A job
with iterations but no duration (Gavel) keeps its iterations and gets the duration its
profile's speed gives. A job with neither (Optimus's workload) is convergence-driven: its true
loss curve and its profile's dataset size give its work. docs/models/workload.md has the details.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pyarrow as pa

from clustersim.simulator.cluster import tasks_per_node
from clustersim.simulator.job import JobSpec, RoleSpec
from clustersim.simulator.params import NonNegative, PositiveCount, Range, check_params
from clustersim.simulator.rng import component_rng
from clustersim.simulator.speed import scaling_role, scaling_role_of
from clustersim.simulator.errors import ConfigError, TraceError
from clustersim.simulator.arrow import release_unused, to_numpy

COLUMNS = ["job_id", "submit_time", "duration", "iterations", "roles", "tenant", "user", "model",
           "deadline", "priority", "batch_size", "gpu_type"]
ROWS_AT_ONCE = 1 << 16   # rows build_jobs turns into Python objects at a time (choice: bounded memory, few slices)


@dataclass(frozen=True)
class ProfileConfig:
    """The keys of a profile config (configs/profile/*.yaml)."""

    name: str | None = None
    zoo: bool = False
    files: list[str] | None = None
    unknown: Literal["warn", "error"] = "warn"
    models: dict[str, str] | None = None
    pool: dict | None = None
    convergence: dict | None = None
    goodput_unmeasured: Literal["fitted", "interpolated"] = "fitted"
    goodput_whole_seconds: bool = False
    work: Literal["duration", "iterations"] = "duration"
    batch: Literal["profile", "per_gpu"] = "profile"


@dataclass(frozen=True)
class PoolConfig:
    """``profile.pool``: the profiles a job without a (known) model name is drawn from, per family."""

    gpu: list[str] | None = None
    ps: list[str] | None = None


@dataclass(frozen=True)
class ConvergenceConfig:
    """``profile.convergence``: ground-truth loss curves (simulator.convergence.assign_curves)."""

    enabled: bool = False
    threshold: Annotated[float, Range(gt=0)] = 0.01
    threshold_max: Annotated[float, Range(gt=0)] | None = None   # per job uniform in [threshold, this]
    relative: bool = False
    patience: PositiveCount = 5
    noise: NonNegative = 0.02
    jitter: NonNegative = 0.2
    default_curve: dict | None = None
    dataset_fraction: Annotated[float, Range(gt=0, le=1)] = 1.0
    dataset_fractions: dict[str, Annotated[float, Range(gt=0, le=1)]] | None = None   # profile -> its own
                                                                       # (Optimus §6.1 downscaled two)


@dataclass
class Assignment:
    """How trace jobs get profiles (configs/profile/<name>.yaml)."""

    zoo: object                                   # simulator.profiles.Zoo
    pool: dict[str, list[str]] = field(default_factory=dict)   # family -> profile names
    unknown: str = "warn"                         # a model name without a profile: warn (and draw) | error
    convergence: dict | None = None               # simulator.convergence.assign_curves options
    whole_seconds: bool = False                   # goodput jobs: each epoch a whole number of seconds
    models: dict[str, str] = field(default_factory=dict)   # trace model name (normalised) -> profile name
    work: str = "duration"                        # a job with iterations and a duration: sized by which
    batch: str = "profile"                        # a job without a trace batch: the profile's batch_size
                                                  # (profile) or local_batch x requested GPUs (per_gpu, EDL)

    def __post_init__(self):
        if self.unknown not in ("warn", "error"):
            raise ConfigError(f"profile.unknown must be 'warn' or 'error', got {self.unknown!r}")
        from clustersim.simulator.profiles import normalise
        for model, name in list(self.models.items()):
            if name not in self.zoo.profiles:
                raise ConfigError(f"profile.models.{model}: no profile {name!r}; known: "
                                  f"{', '.join(self.zoo.names())}")
        self.models = {normalise(k): v for k, v in self.models.items()}
        for family, names in self.pool.items():
            for n in names:
                if n not in self.zoo.profiles:
                    raise ConfigError(f"profile.pool.{family}: no profile {n!r} in the zoo")
                if self.zoo.profile(n).family != family:
                    raise ConfigError(f"profile.pool.{family}: {n!r} is a {self.zoo.profile(n).family} profile")

    @property
    def curves_for_all(self) -> bool:
        """Every job carries a loss curve (else only the jobs without a size, which need one)."""
        return bool((self.convergence or {}).get("enabled"))

    @classmethod
    def from_config(cls, cfg: dict | None, keys_only: bool = False) -> "Assignment | None":
        """``None`` for the ``linear`` profile config (no zoo). Keys and types are checked first;
        ``keys_only``: only they (None; the zoo loads at build time)."""
        cfg = dict(cfg or {})
        check_params(ProfileConfig, cfg, "profile.{}")
        check_params(ConvergenceConfig, cfg.get("convergence") or {}, "profile.convergence.{}")
        check_params(PoolConfig, cfg.get("pool") or {}, "profile.pool.{}")
        for i, f in enumerate(cfg.get("files") or []):
            if not Path(str(f)).expanduser().is_file():
                raise ConfigError(f"profile.files[{i}]: {f}: no such file")
        if keys_only:
            return None
        if not cfg.get("zoo", False):
            if cfg.get("batch", "profile") != "profile":
                raise ConfigError("profile.batch: per_gpu needs the profile zoo (profile.zoo: true): without "
                                  "profiles no job has a per-GPU batch or a speed that depends on its batch")
            return None
        from clustersim.simulator import profiles
        zoo = profiles.load(cfg.get("files"))
        if cfg.get("goodput_unmeasured", "fitted") != "fitted":
            zoo = _with_unmeasured(zoo, cfg["goodput_unmeasured"])
        for name in (cfg.get("convergence") or {}).get("dataset_fractions") or {}:
            if name not in zoo.profiles:
                raise ConfigError(f"profile.convergence.dataset_fractions: {name!r} is not a profile of the zoo")
        pool = {k: list(v) for k, v in (cfg.get("pool") or {}).items()}
        for family in ("gpu", "ps"):
            pool.setdefault(family, zoo.pool(family))
        return cls(zoo, pool, cfg.get("unknown", "warn"), cfg.get("convergence"),
                   cfg.get("goodput_whole_seconds", False), dict(cfg.get("models") or {}), cfg.get("work", "duration"),
                   cfg.get("batch", "profile"))

    def match(self, model: str | None, family: str):
        """The profile a trace's model name refers to: through ``models`` (an explicit mapping),
        else by the zoo's names and aliases; None if neither knows it."""
        if model:
            from clustersim.simulator.profiles import normalise
            name = self.models.get(normalise(model))
            if name is not None:
                prof = self.zoo.profile(name)
                return prof if prof.family == family else None
        return self.zoo.match(model, family)


_DERIVED: dict = {}   # (id of a loaded zoo, rule) -> (that zoo, the zoo with the rule): kept while it is


def _with_unmeasured(zoo, rule: str):
    """``zoo`` whose Pollux goodput profiles take ``rule`` for placements Pollux never measured
    (simulator/goodput.py ``UNMEASURED``). A new zoo, so that its rate cache is its own."""
    kept = _DERIVED.get((id(zoo), rule))
    if kept is not None and kept[0] is zoo:
        return kept[1]
    from clustersim.simulator import goodput
    from clustersim.simulator.profiles import Zoo

    def swap(p):
        by_type = {t: swap(sub) for t, sub in p.by_type.items()}
        app = goodput.with_unmeasured(p.app, rule) if p.app is not None else None
        return replace(p, app=app, by_type=by_type, _aware=None)

    derived = Zoo({name: swap(p) for name, p in zoo.profiles.items()})
    _DERIVED.clear()
    _DERIVED[(id(zoo), rule)] = (zoo, derived)
    return derived


def build_jobs(table: pa.Table, source: str = "trace", assignment: Assignment | None = None,
               cluster=None, seed: int = 0) -> list[JobSpec]:
    release_unused()   # what checking and sizing the table took from Arrow's pool: back to the OS before the specs
    interned: dict[tuple, tuple[RoleSpec, ...]] = {}
    rng = BlockDraws(component_rng(seed, "workload")) if assignment else None
    # roles are interned (one tuple per kind, held in ``interned``): keyed by identity, hashed without a call per role
    rates: dict = {}   # (profile, batch, id of roles) -> rate at the requested allocation, placed packed
    matched: dict = {}   # (model, id of roles) -> (family, the model's profile or None): a few distinct per trace
    drawn: dict = {}     # (model name without a profile, family) -> jobs given a drawn profile (unknown: warn)
    pools: dict = {}     # family -> the profiles of its pool (profile.pool), for the drawn ones
    jobs = []
    unsized = False      # a job with no work yet: convergence-driven (its loss curve sizes it)
    for start, cols in _slices(table, ROWS_AT_ONCE, interned):
        done = _at_once(start, cols, assignment, cluster, rates, matched, pools, drawn, rng, source) \
            if assignment is not None else None
        if done is not None:
            jobs += done
            unsized = unsized or any(s.total_work == 0 for s in done)
            continue
        for i, (job_id, submit, duration, iterations, roles, tenant, user, model, deadline, priority, batch,
                gpu_type) in enumerate(zip(*cols), start):
            if assignment is None:
                if duration is None:
                    raise TraceError(f"{source}: row {i} (job {job_id!r}): no duration, and no speed profile to "
                                     "turn its iterations into time")
                jobs.append(JobSpec(i, job_id, submit, roles, iterations or duration or 0.0, duration, tenant, user,
                                    model, model, deadline, priority, batch, gpu_type))
                continue
            m = matched.get((model, id(roles)))
            if m is None:
                family = family_of(roles)
                m = matched[(model, id(roles))] = (family, assignment.match(model, family))
            family, prof = m
            if prof is None:
                prof = _drawn(assignment, rng, pools, model, family, lambda: f"{source}: row {i} (job {job_id!r})")
                if model:
                    drawn[(model, family)] = drawn.get((model, family), 0) + 1
            if batch is None and assignment.batch == "per_gpu":
                batch = _per_gpu_batch(prof, roles, f"{source}: row {i} (job {job_id!r})")
            fields = dict(index=i, job_id=job_id, submit_time=submit, roles=roles,
                          total_work=iterations or duration or 0.0, duration=duration, tenant=tenant, user=user,
                          model=model, profile=model, deadline=deadline, priority=priority, batch_size=batch,
                          gpu_type=gpu_type)
            _with_profile(fields, assignment, cluster, rates, f"{source}: row {i} (job {job_id!r})", prof,
                          counted=bool(iterations))
            unsized = unsized or fields["total_work"] == 0
            jobs.append(JobSpec(**fields))
    if rng is not None:
        rng.settle()
    if drawn:
        _warn_drawn(source, drawn)
    if assignment and (assignment.curves_for_all or unsized):
        from clustersim.simulator.convergence import assign_curves
        jobs = assign_curves(jobs, assignment, component_rng(seed, "convergence"), source, assignment.curves_for_all)
        jobs = [s if s.duration is not None else replace(s, duration=s.total_work / rates[_rate_key(s)]) for s in jobs]
    return jobs


def _first_rows(keys: list) -> list[tuple]:
    """Each distinct key and the first row it is at, in row order."""
    first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))   # later pairs: earlier rows, kept
    return sorted(first.items(), key=lambda kv: kv[1])


def _slices(table: pa.Table, at_once: int, interned: dict):
    """The job table's columns in ``COLUMNS``' order as Python lists, a slice of rows at a time (a
    10M-job table's columns as Python lists would hold gigabytes at once), with the slice's first
    row; a name (tenant, user, model, GPU type) is one string object per distinct name, not one
    per job, and a row's roles one tuple of ``RoleSpec`` per kind (``interned``: kind -> its
    tuple, ``role_kinds``)."""
    names: dict[str, dict] = {c: {} for c in ("tenant", "user", "model", "gpu_type")}
    for start in range(0, table.num_rows, at_once):
        part = table.slice(start, at_once)
        codes, kinds = role_kinds(part.column("roles"))
        specs = [interned[k] if k in interned else interned.setdefault(k, tuple(RoleSpec(*r) for r in k))
                 for k in kinds]
        cols = []
        for c in COLUMNS:
            column = part.column(c)
            if c == "roles":
                cols.append([specs[k] for k in codes.tolist()])
            elif column.null_count == len(part):   # a column the trace does not give
                cols.append([None] * len(part))
            elif c in names:
                seen = names[c]
                cols.append([seen.setdefault(v, v) for v in column.to_pylist()])
            else:
                cols.append(column.to_pylist())
        yield start, cols


def _at_once(start: int, cols: list, a: Assignment, cluster, rates: dict, matched: dict, pools: dict, drawn: dict,
             rng: "BlockDraws", source: str) -> list[JobSpec] | None:
    """A slice's JobSpecs made column by column, as the row loop of ``build_jobs`` makes them, when
    every row is sized by its duration, needs no per-GPU batch worked out, and each row without
    a profile draws from a pool of one size; else None (and nothing drawn): the row loop makes
    them. Rates not known yet are worked out at the first row of theirs (``_with_profile``,
    which names that row if it fails: no earlier row of such a slice can fail)."""
    ids, submits, durations, iterations, roles, tenants, users, models, deadlines, priorities, batches, gpu_types = cols
    if None in durations or (a.work == "iterations" and any(iterations)) or (a.batch == "per_gpu" and None in batches):
        return None
    keys = list(zip(models, map(id, roles)))
    sizes = set()
    for key, row in _first_rows(keys):
        if key not in matched:
            family = family_of(roles[row])
            matched[key] = (family, a.match(models[row], family))
        family, prof = matched[key]
        if prof is None:
            pool = None if key[0] and a.unknown == "error" else _pool(a, pools, family)
            if not pool:
                return None   # _drawn raises, at its row
            sizes.add(len(pool))
    if len(sizes) > 1:
        return None
    profs = [matched[key][1] for key in keys]
    if sizes:   # one draw per row without a profile, in row order: BlockDraws' numbers
        rows = [row for row, p in enumerate(profs) if p is None]
        for row, k in zip(rows, rng.many(sizes.pop(), len(rows))):
            family = matched[keys[row]][0]
            profs[row] = pools[family][k]
            if models[row]:
                drawn[(models[row], family)] = drawn.get((models[row], family), 0) + 1
    names = [p.name for p in profs]
    rate_keys = list(zip(names, batches, map(id, roles)))
    for key, row in _first_rows(rate_keys):
        if key not in rates:   # at its first row, as the row loop works it out (and names the row if it fails)
            i = start + row
            fields = dict(index=i, job_id=ids[row], submit_time=submits[row], roles=roles[row],
                          total_work=iterations[row] or durations[row], duration=durations[row], tenant=tenants[row],
                          user=users[row], model=models[row], profile=models[row], deadline=deadlines[row],
                          priority=priorities[row], batch_size=batches[row], gpu_type=gpu_types[row])
            _with_profile(fields, a, cluster, rates, f"{source}: row {i} (job {ids[row]!r})", profs[row],
                          counted=bool(iterations[row]))
    work = [d * rates[k] for d, k in zip(durations, rate_keys)]
    return list(map(JobSpec, range(start, start + len(ids)), ids, submits, roles, work, durations, tenants, users,
                    models, names, deadlines, priorities, batches, gpu_types))


def role_kinds(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[tuple]]:
    """The job table's ``roles`` column as kinds: each row's code, and each distinct kind (in the
    order of the row it first appears in) as ``role_rows`` gives that row: a tuple of value
    tuples in ``RoleSpec``'s order. Two rows are of one kind when ``role_rows`` gives them equal
    tuples. A trace has a few kinds; they are found in numpy from the column's buffers, without a
    tuple per row (a million jobs, a million tuples)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not len(column):
        return np.empty(0, dtype=np.int64), []
    offsets = to_numpy(column.offsets).astype(np.int64)
    flat = column.values.slice(offsets[0], offsets[-1] - offsets[0])
    names, name_bytes = _string_rows(flat.field("name"))
    numbers = np.stack([to_numpy(flat.field(f)).astype(np.float64) for f in _ROLE_VALUES], axis=1) + 0.0  # -0.0 == 0.0
    first, role = _distinct_rows(np.concatenate([name_bytes, numbers.view(np.uint8)], axis=1))
    columns = [to_numpy(flat.field(f))[first].tolist() for f in _ROLE_VALUES]   # as to_pylist gives them
    role_values = list(zip([names(i) for i in first], *columns))
    per_job = np.diff(offsets)
    if len(per_job) and (per_job == 1).all():   # one role each: a job's kind is its role's
        return role, [(r,) for r in role_values]
    width = int(per_job.max(initial=0))
    padded = np.full((len(per_job), width), -1, dtype=np.int64)
    padded[np.arange(width) < per_job[:, None]] = role
    first, kind = _distinct_rows(padded.view(np.uint8).reshape(len(per_job), -1))
    return kind, [tuple(role_values[r] for r in padded[i] if r >= 0) for i in first]


_ROLE_VALUES = ("count", "gpu", "cpu", "mem", "min_count", "max_count")   # RoleSpec's fields after its name


def _string_rows(strings: pa.Array):
    """A string column's rows as a byte matrix (each row's UTF-8 bytes, zero-padded, then its
    length: equal rows of it are equal strings) and a function giving row i's string."""
    _, offset_buf, data_buf = strings.buffers()
    start = strings.offset
    offsets = np.frombuffer(offset_buf, dtype=np.int32, count=start + len(strings) + 1)[start:].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    width = int(lengths.max(initial=0))
    at = offsets[:-1, None] + np.arange(width)
    inside = np.arange(width) < lengths[:, None]
    padded = np.where(inside, data[np.minimum(at, max(len(data) - 1, 0))] if len(data) else 0, 0).astype(np.uint8)
    matrix = np.concatenate([padded, lengths[:, None].view(np.uint8)], axis=1)
    return (lambda i: bytes(data[offsets[i]:offsets[i + 1]]).decode("utf-8")), matrix


def _distinct_rows(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of a byte matrix's rows: (the index of each distinct row's first occurrence, in row order;
    each row's code into them)."""
    if not len(m):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    rows = np.ascontiguousarray(m).view(np.dtype((np.void, m.shape[1]))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)   # first: a stable sort's
    order = np.argsort(first, kind="stable")   # codes in the order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse.ravel()]


def _warn_drawn(source: str, drawn: dict) -> None:
    """One warning line naming every model name that had no profile and how many jobs drew one."""
    import logging
    names = ", ".join(f"{m!r} x{n}" for (m, _), n in sorted(drawn.items(), key=lambda kv: (-kv[1], kv[0])))
    logging.getLogger("clustersim").warning(
        f"{source}: {sum(drawn.values())} job(s) name a model without a profile ({names}); each got one drawn "
        "from profile.pool (profile.unknown: warn). Map them with profile.models.<name>=<profile>, or set "
        "profile.unknown=error")


def _per_gpu_batch(prof, roles, where: str) -> int:
    """``profile.batch: per_gpu``: the job trains at its profile's per-GPU batch on the GPUs it
    requests (Profile.per_gpu_batch, EDL §3.1)."""
    from clustersim.simulator.profiles import ProfileError
    role = scaling_role_of(roles)
    gpus = next(r.count for r in roles if r.name == role)
    try:
        return prof.per_gpu_batch(gpus)
    except ProfileError as e:
        raise TraceError(f"{where}: {e}") from None


def _rate_key(spec: JobSpec) -> tuple:
    return spec.profile, spec.batch_size, id(spec.roles)


class BlockDraws:
    """``rng.integers(n)``, one job at a time, drawn a block at a time (a million jobs, a million
    draws). numpy draws each bounded integer below 2**32 from one 32-bit value of the stream,
    whether one or many at a time, so a block gives the numbers single draws would
    (tests/simulator/test_workload_draws.py checks it); a draw with another bound first puts the
    stream back where the block's used draws left it."""

    BLOCK = 4096

    def __init__(self, rng):
        self.rng = rng
        self._n = None
        self._block: list[int] = []   # draws ahead, next last
        self._start = None            # the stream's state before the block
        self._used = 0

    def integers(self, n: int) -> int:
        if n != self._n or not self._block:
            self._refill(n)
        self._used += 1
        return self._block.pop()

    def many(self, n: int, count: int) -> list[int]:
        """``count`` draws of ``integers(n)``, one after another."""
        out: list[int] = []
        while len(out) < count:
            if n != self._n or not self._block:
                self._refill(n)
            k = min(count - len(out), len(self._block))
            out += self._block[:-k - 1:-1]   # the next k (the next is last)
            del self._block[-k:]
            self._used += k
        return out

    def _refill(self, n: int) -> None:
        self.settle()
        self._start, self._n, self._used = self.rng.bit_generator.state, n, 0
        self._block = self.rng.integers(n, size=self.BLOCK).tolist()[::-1]

    def settle(self) -> None:
        """The stream as if only the used draws of the block had been made."""
        if self._block:
            self.rng.bit_generator.state = self._start
            self.rng.integers(self._n, size=self._used)
            self._block = []


def family_of(roles) -> str:
    return "ps" if any(r.name == "ps" for r in roles) else "gpu"


def _drawn(a: Assignment, rng: BlockDraws, pools: dict, model: str | None, family: str, where) -> object:
    """The profile a job whose model has none in ``family`` gets: one drawn from the pool (one
    draw per such job, in trace order); ``pools`` keeps each family's pool of profiles, looked
    up once; ``where()`` names the row in errors."""
    if model and a.unknown == "error":
        raise TraceError(f"{where()}: model {model!r} has no {family} profile (profile.unknown: error); "
                         f"map it with profile.models.<name>=<profile>; known: {', '.join(a.zoo.names(family))}")
    pool = _pool(a, pools, family)
    if not pool:
        raise TraceError(f"{where()}: no {family} profile to draw from (profile.pool.{family} is empty)")
    return pool[rng.integers(len(pool))]


def _pool(a: Assignment, pools: dict, family: str) -> list:
    """The profiles of ``family``'s pool (``pools`` keeps each, looked up once); empty: none."""
    pool = pools.get(family)
    if pool is None:
        pool = pools[family] = [a.zoo.profile(name) for name in a.pool.get(family) or []]
    return pool


def _with_profile(fields: dict, a: Assignment, cluster, rates: dict, where: str, prof, counted: bool = False) -> None:
    """Give the job (``fields``, a JobSpec's keywords, updated in place) its profile ``prof`` and
    its work or duration from the profile's rate at the requested allocation. ``counted``: the
    trace gives the job's iterations, which size it instead of its duration with ``profile.work:
    iterations`` (a trace whose durations are its iterations over the very table the profile
    holds, rounded to whole seconds: ElasticFlow's)."""
    fields["profile"] = prof.name
    key = (prof.name, fields["batch_size"], id(fields["roles"]))
    rate = rates.get(key)
    if rate is None:   # a few distinct keys per trace: a spec made for the speed model only then
        spec = JobSpec(**fields)
        rate = rates[key] = a.zoo.speed.rate(spec, packed(spec, cluster), cluster)
        if not rate > 0:
            raise TraceError(f"{where}: profile {prof.name!r} gives no speed at the requested allocation "
                             f"{spec.requested_counts()}")
    if fields["duration"] is not None and not (counted and a.work == "iterations"):
        fields["total_work"] = fields["duration"] * rate
        return
    if fields["total_work"] == 0 and prof.goodput_app() is not None:
        fields["total_work"] = _to_target(prof, JobSpec(**fields), where, rate if a.whole_seconds else None)
    if fields["total_work"] > 0:
        fields["duration"] = fields["total_work"] / rate
    # else convergence-driven: its loss curve sizes it (simulator.convergence.assign_curves)


def _to_target(prof, spec: JobSpec, where: str, whole_seconds_at: float | None = None) -> float:
    """Statistical efficiency: the iterations a job at its batch needs to reach its model's
    target (Pollux's examples to ``max_epochs`` epochs of progress, simulator/goodput.py), so a
    larger batch needs more examples, as the model's gradient statistics say. The batch is the
    one the job actually runs at its requested GPU count (the Pollux simulator's
    ``Job.step``: replicas x atomic batch x accumulation steps, e.g. 360 for BERT's 384 on 6).
    ``whole_seconds_at`` (the rate at the requested allocation, placed packed): each epoch lasts
    a whole number of seconds at that rate (``profile.goodput_whole_seconds``)."""
    app = prof.goodput_app()
    try:
        return app.iterations_to_target(app.run_batch(prof.batch(spec), spec.role(scaling_role(spec)).count),
                                        whole_seconds_at)
    except ValueError as e:
        raise TraceError(f"{where}: {e}") from None


def packed(spec: JobSpec, cluster) -> dict:
    """The requested task counts on as few nodes of an empty ``cluster`` as a greedy packing finds.

    Roles that need GPUs go first (they fit fewest nodes); each role fills the nodes the job
    already uses first, then the nodes that hold most of its tasks (largest first). A job's
    speed falls with the nodes it spans (all-reduce, and PS traffic between servers), so its
    duration alone is at this placement. Tasks that do not fit the whole cluster go on further,
    notional nodes (the engine rejects such jobs itself); without a cluster everything sits on
    one node.
    """
    if cluster is None:
        return {r.name: {0: r.count} for r in spec.roles}
    free = np.array(cluster.capacity, dtype=np.float64)
    used = np.zeros(len(free), dtype=bool)
    alloc, extra = {}, len(free)
    for r in sorted(spec.roles, key=lambda r: r.gpu <= 0):     # stable: GPU roles first
        fit = tasks_per_node(free, r.demand)
        placed, need = {}, r.count
        for node in np.lexsort((-fit, ~used)):                 # used nodes first, then most tasks
            if need == 0:
                break
            if fit[node] <= 0:
                continue
            t = int(min(fit[node], need))
            placed[int(node)] = t
            free[node] -= t * np.asarray(r.demand)
            used[node] = True
            need -= t
        per = max(int(fit.max()), 1) if len(fit) else 1
        while need > 0:
            placed[extra] = min(per, need)
            need -= placed[extra]
            extra += 1
        alloc[r.name] = placed
    return {r.name: alloc[r.name] for r in spec.roles}
