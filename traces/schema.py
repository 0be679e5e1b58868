"""The canonical job table: one row per job, whatever trace it came from.

Every trace reader returns a ``pyarrow.Table`` with this schema (``validate`` checks it).
Units: seconds (relative to the trace's origin), GPUs (fractional where a trace shares
GPUs), CPU cores, memory GB. See docs/job_table.md for the meaning of every field.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from clustersim.simulator import arrow
from clustersim.simulator.arrow import compute as pc
from clustersim.simulator.arrow import role_rows  # noqa: F401  (read here by the transforms; RoleSpec's order = ROLE's)
from clustersim.simulator.errors import TraceError  # noqa: F401  (re-exported: readers raise it)

ROLE = pa.struct(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("count", pa.int32(), nullable=False),
        pa.field("gpu", pa.float64(), nullable=False),
        pa.field("cpu", pa.float64(), nullable=False),
        pa.field("mem", pa.float64(), nullable=False),
        pa.field("min_count", pa.int32(), nullable=False),
        pa.field("max_count", pa.int32(), nullable=False),
    ]
)

ROLES_TYPE = pa.list_(ROLE)
ATTEMPT = pa.struct([pa.field("start", pa.float64()), pa.field("end", pa.float64())])

STATUSES = ("completed", "failed", "killed", "running", "pending", "unknown")

# Bounds every job is checked against before anything is built from it (docs/job_table.md).
MAX_TIME_S = float(2**42)  # ~139,000 years; beyond it float64 seconds are coarser than 1 ms
MAX_TASKS = 1_000_000  # tasks of one role (count and max_count)
MAX_DEMAND = 1e9  # GPUs, cores or GB of one task

JOB_TABLE = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("submit_time", pa.float64(), nullable=False),
        pa.field("duration", pa.float64()),
        pa.field("iterations", pa.float64()),
        pa.field("roles", ROLES_TYPE, nullable=False),
        pa.field("num_gpus", pa.float64(), nullable=False),
        pa.field("tenant", pa.string()),
        pa.field("user", pa.string()),
        pa.field("model", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("priority", pa.int32()),
        pa.field("deadline", pa.float64()),
        pa.field("batch_size", pa.int32()),
        pa.field("gpu_type", pa.string()),
        pa.field("attempts", pa.list_(ATTEMPT)),
        pa.field("start_time", pa.float64()),
        pa.field("num_nodes", pa.int32()),
    ]
)


@dataclass(frozen=True, slots=True)
class Role:
    """One role of a job as a reader builds it (converted to a ROLE struct)."""

    name: str
    count: int
    gpu: float = 0.0
    cpu: float = 0.0
    mem: float = 0.0
    min_count: int | None = None
    max_count: int | None = None

    def as_row(self) -> dict:
        lo = self.count if self.min_count is None else self.min_count
        hi = self.count if self.max_count is None else self.max_count
        return {
            "name": self.name,
            "count": self.count,
            "gpu": float(self.gpu),
            "cpu": float(self.cpu),
            "mem": float(self.mem),
            "min_count": lo,
            "max_count": hi,
        }


def gpu_worker_role(num_gpus: float, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0) -> Role:
    """The role of a plain data-parallel GPU job: one task per whole GPU.

    A whole number of GPUs becomes that many one-GPU tasks (so policies can place and
    scale GPU by GPU, as the Tiresias simulator does); a fraction becomes one shared-GPU task.
    """
    if num_gpus >= 1 and float(num_gpus).is_integer():
        return Role("worker", int(num_gpus), 1.0, cpu_per_gpu, mem_per_gpu)
    return Role("worker", 1, float(num_gpus), cpu_per_gpu, mem_per_gpu)


_SIMPLE = frozenset({pa.string(), pa.float64(), pa.int32(), pa.int64(), pa.bool_()})


def build_table(columns: dict[str, list]) -> pa.Table:
    """Assemble a job table from python columns (or Arrow arrays of the column's type); absent
    optional columns become nulls.

    ``roles`` holds one list of ``Role`` per job; ``num_gpus`` is derived from it.
    """
    n = len(columns["job_id"])
    roles, num_gpus = _roles_column(columns["roles"], ROLES_TYPE)
    data = {}
    for field in JOB_TABLE:
        if field.name == "roles":
            data["roles"] = roles
        elif field.name == "num_gpus":
            data["num_gpus"] = arrow.array(num_gpus, pa.float64())
        elif field.name == "status" and "status" not in columns:
            data["status"] = arrow.decoded(np.zeros(n, dtype=np.int64), ["unknown"])
        elif field.name in columns:
            data[field.name] = _column(columns[field.name], field.type)
        else:
            data[field.name] = pa.nulls(n, field.type)
    return pa.Table.from_pydict(data, schema=JOB_TABLE)


def _column(values: list, type: pa.DataType) -> pa.Array:
    """``pa.array(values, type)``, built from buffers where it can be (``simulator/arrow.py``:
    ``pa.array`` on Python objects imports pandas, a third of a second); other types and values
    ``arrow.array`` refuses (an integral float in an integer column) go to ``pa.array``, which
    converts or rejects them as it always did."""
    if isinstance(values, pa.Array):
        if values.type != type:
            raise TypeError(f"expected a {type} column, got {values.type}")
        return values
    if type in _SIMPLE:
        try:
            return arrow.array(values, type)
        except (TypeError, OverflowError):
            pass
    elif all(v is None for v in values):   # a reader's column of nulls (no attempts recorded)
        return pa.nulls(len(values), type)
    return pa.array(values, type)


def _roles_column(roles: list, type: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """The ``roles`` column: each job's list of ``Role`` as ``ROLE`` structs, and each job's GPUs
    (the sum of count x gpu over its roles, added in role order). Generated jobs share a few
    role objects, and readers a few lists of them: each distinct one becomes a struct once (keyed
    by id: all alive here), and the column takes them in order."""
    where: dict = {}   # id of a Role -> its row among the distinct ones
    lists: dict = {}   # id of a job's list of roles -> their rows
    rows, idx = [], []
    for rs in roles:
        ks = lists.get(id(rs))
        if ks is None:
            ks = []
            for r in rs:
                k = where.get(id(r))
                if k is None:
                    k = where[id(r)] = len(rows)
                    rows.append(r.as_row())
                ks.append(k)
            lists[id(rs)] = ks
        idx += ks
    offsets = np.zeros(len(roles) + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, roles), dtype=np.int64, count=len(roles)), out=offsets[1:])
    fields = list(ROLE)
    distinct = pa.StructArray.from_arrays([_column([row[f.name] for row in rows], f.type) for f in fields],
                                          fields=fields)
    idx = np.array(idx, dtype=np.int64)
    structs = distinct.take(arrow.array(idx, pa.int64()))
    role_gpus = np.array([row["count"] * row["gpu"] for row in rows], dtype=np.float64)
    # bincount adds each job's roles in order, from 0.0: the sum a loop over them makes
    gpus = np.bincount(np.repeat(np.arange(len(roles)), np.diff(offsets)), weights=role_gpus[idx],
                       minlength=len(roles)) if len(idx) else np.zeros(len(roles))
    return pa.ListArray.from_arrays(arrow.array(offsets, pa.int32()), structs, type=type), gpus


def validate(table: pa.Table, source: str) -> pa.Table:
    """Check a job table's schema and values; raise TraceError naming source, row and reason.
    A table is immutable: one that passed is not checked again (a run's trace passes the
    reader's check, the load's and the build's)."""
    if _VALID.get(id(table)) is table:
        return table
    _check(table, source)
    _VALID[id(table)] = table
    return table


_VALID: weakref.WeakValueDictionary = weakref.WeakValueDictionary()   # id -> each table that passed, while alive


def _check(table: pa.Table, source: str) -> None:
    if not table.schema.equals(JOB_TABLE):
        missing = [f.name for f in JOB_TABLE if f.name not in table.schema.names]
        raise TraceError(f"{source}: job table does not match the canonical schema (missing: {missing})")
    ids = table["job_id"]
    if pc.count_distinct(ids).as_py() != len(ids):
        counts = pc.value_counts(ids)
        dup = counts.filter(pc.greater(pc.struct_field(counts, "counts"), 1))
        raise TraceError(f"{source}: duplicate job_id {dup[0]['values'].as_py()!r}")
    bad = _first_bad_row(table)
    if bad is not None:
        row = table.slice(bad, 1).to_pylist()[0]
        where = f"{source}: row {bad} (job {row['job_id']!r})"
        check_job(where, row["submit_time"], row["duration"], row["iterations"], row["status"], row["roles"],
                  start_time=row["start_time"], deadline=row["deadline"])
        raise TraceError(f"{where}: invalid row")  # the two checks disagree: never pass a flagged row


def _first_bad_row(table: pa.Table) -> int | None:
    """Index of the first row ``check_job`` would reject (vectorized, in numpy: Arrow's kernels
    given a Python scalar import pandas), or None."""
    def ok(col, lower_ok, null_ok, bounded=True):
        x = table[col].combine_chunks()
        v = arrow.to_numpy(x) if x.type == pa.float64() else arrow.to_numpy(x).astype(np.float64)
        with np.errstate(invalid="ignore"):   # NaN (and nulls, NaN here) compare False
            good = np.isfinite(v) & lower_ok(v)
            if bounded:
                good &= np.abs(v) < MAX_TIME_S
        return np.where(arrow.to_bools(x.is_null()), null_ok, good) if x.null_count else good
    always = lambda v: True   # noqa: E731
    ok_rows = (ok("submit_time", lambda v: v >= 0, False) & ok("duration", lambda v: v > 0, True)
               & ok("iterations", lambda v: v > 0, True, bounded=False)
               & arrow.to_bools(pc.is_in(table["status"], value_set=arrow.array(STATUSES, pa.string())))
               & ok("start_time", always, True) & ok("deadline", always, True))
    roles = table["roles"].combine_chunks()
    offsets = arrow.to_numpy(roles.offsets)
    flat = roles.values.slice(offsets[0], offsets[-1] - offsets[0])
    parent = np.repeat(np.arange(len(roles)), np.diff(offsets))
    f = {k: arrow.to_numpy(flat.field(k)) for k in ("count", "gpu", "cpu", "mem", "min_count", "max_count")}
    role_ok = ((f["count"] >= 1) & (f["min_count"] >= 1) & (f["min_count"] <= f["count"])
               & (f["count"] <= f["max_count"]) & (f["max_count"] <= MAX_TASKS)
               & (np.minimum(np.minimum(f["gpu"], f["cpu"]), f["mem"]) >= 0)
               & (np.maximum(np.maximum(f["gpu"], f["cpu"]), f["mem"]) <= MAX_DEMAND))
    n = table.num_rows
    ok_rows &= np.bincount(parent, weights=~role_ok, minlength=n) == 0
    ok_rows &= np.bincount(parent, weights=f["gpu"] + f["cpu"] + f["mem"], minlength=n) > 0
    bad = np.flatnonzero(~ok_rows)
    return int(bad[0]) if len(bad) else None


def check_job(where: str, submit, duration, iterations, status, roles: list[dict], *, start_time=None,
              deadline=None) -> None:
    """Check one job's values (``roles`` as ROLE rows); raise TraceError prefixed with ``where``."""
    if submit is None or not math.isfinite(submit) or submit < 0:
        raise TraceError(f"{where}: submit_time must be a finite number >= 0, got {submit!r}", field="submit_time")
    if duration is not None and (not math.isfinite(duration) or duration <= 0):
        raise TraceError(f"{where}: duration must be a finite number > 0, got {duration!r}", field="duration")
    for name, t in (("submit_time", submit), ("duration", duration), ("start_time", start_time),
                    ("deadline", deadline)):
        check_time(where, name, t)
    if iterations is not None and (not math.isfinite(iterations) or iterations <= 0):
        raise TraceError(f"{where}: iterations must be a finite number > 0, got {iterations!r}")
    if status not in STATUSES:
        raise TraceError(f"{where}: status {status!r} is not one of {STATUSES}")
    if not roles:
        raise TraceError(f"{where}: job has no roles")
    total = 0.0
    for r in roles:
        if r["count"] < 1 or not (1 <= r["min_count"] <= r["count"] <= r["max_count"]):
            raise TraceError(f"{where}: role {r['name']!r} needs 1 <= min_count <= count <= max_count, "
                             f"got {r['min_count']}, {r['count']}, {r['max_count']}")
        if r["max_count"] > MAX_TASKS:
            raise TraceError(f"{where}: role {r['name']!r} asks for {_count(r['max_count'])} tasks, more than the "
                             f"limit of {MAX_TASKS:,} per role")
        if not all(math.isfinite(x) and x >= 0 for x in (r["gpu"], r["cpu"], r["mem"])):
            raise TraceError(f"{where}: role {r['name']!r} needs finite, non-negative demands, "
                             f"got gpu={r['gpu']!r} cpu={r['cpu']!r} mem={r['mem']!r}")
        if max(r["gpu"], r["cpu"], r["mem"]) > MAX_DEMAND:
            raise TraceError(f"{where}: role {r['name']!r} asks for more than {MAX_DEMAND:g} GPUs, cores or GB "
                             f"per task, got gpu={r['gpu']:g} cpu={r['cpu']:g} mem={r['mem']:g}")
        total += r["gpu"] + r["cpu"] + r["mem"]
    if total <= 0:
        raise TraceError(f"{where}: job demands no resources")


def check_time(where: str, field: str, t) -> None:
    """A time (s) within ``MAX_TIME_S``, where float64 seconds still resolve milliseconds."""
    if t is not None and math.isfinite(t) and abs(t) >= MAX_TIME_S:
        raise TraceError(f"{where}: {field} {t:g} s is beyond {MAX_TIME_S:g} s (2^42 s, about 139,000 years), "
                         "where float64 seconds lose millisecond precision", field=field)


def _count(n) -> str:
    return f"{n:,}" if n < 1e15 else f"{n:.3g}"


