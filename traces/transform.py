"""Transformations of a job table, chosen in the trace config and recorded in the run.

Each step is ``{op: <name>, ...parameters}`` and returns the new table with a record of
what it did (jobs before and after). ``oversize`` needs the cluster, so the experiment
applies it once the cluster is built.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traces.schema import TraceError, validate


def apply(table: pa.Table, steps: list[dict], rng_for) -> tuple[pa.Table, list[dict]]:
    """Apply ``steps`` in order; ``rng_for(name)`` gives the generator of a random step."""
    records = []
    for i, step in enumerate(steps or []):
        step = dict(step)
        op = step.pop("op", None)
        if op not in OPS:
            raise TraceError(f"trace transform {i}: unknown op {op!r}; known: {', '.join(OPS)}")
        before = table.num_rows
        try:
            table = OPS[op](table, rng=rng_for(f"trace.transform.{i}.{op}"), **step)
        except TypeError as e:
            raise TraceError(f"trace transform {i} ({op}): bad parameters {step} ({e})") from None
        records.append({"op": op, **step, "jobs_before": before, "jobs_after": table.num_rows})
    return table, records


def window(table: pa.Table, *, rng=None, start: float = 0.0, end: float | None = None, rebase: bool = True):
    """Jobs submitted in [start, end); ``rebase`` moves ``start`` to time 0."""
    keep = pc.greater_equal(table["submit_time"], start)
    if end is not None:
        if end <= start:
            raise TraceError(f"window: end ({end}) must be after start ({start})")
        keep = pc.and_(keep, pc.less(table["submit_time"], end))
    table = table.filter(keep)
    return map_times(table, 1.0, -start) if rebase and start else table


def sample(table: pa.Table, *, rng, n: int | None = None, fraction: float | None = None, how: str = "first"):
    """``n`` jobs (or a ``fraction``): the earliest submitted (``first``) or drawn at random."""
    if (n is None) == (fraction is None):
        raise TraceError("sample: give exactly one of n or fraction")
    if fraction is not None and not 0 < fraction <= 1:
        raise TraceError(f"sample: fraction must be in (0, 1], got {fraction}")
    k = min(table.num_rows, int(n) if n is not None else round(fraction * table.num_rows))
    if k < 0:
        raise TraceError(f"sample: n must be >= 0, got {n}")
    order = np.asarray(pc.sort_indices(table, [("submit_time", "ascending")]))
    if how == "first":
        idx = order[:k]
    elif how == "random":
        idx = np.sort(rng.choice(table.num_rows, size=k, replace=False))
    else:
        raise TraceError(f"sample: how must be 'first' or 'random', got {how!r}")
    return table.take(pa.array(np.sort(idx)))


def scale_load(table: pa.Table, *, rng=None, factor: float):
    """Arrival rate × ``factor``: every absolute time (submission, start, deadline, attempts) / factor."""
    if not factor > 0:
        raise TraceError(f"scale_load: factor must be > 0, got {factor}")
    return map_times(table, 1.0 / factor, 0.0)


def tenants(table: pa.Table, *, rng=None, keep: list[str] | None = None, drop: list[str] | None = None):
    """Only the jobs of the ``keep`` tenants (virtual clusters), or all but the ``drop`` ones."""
    if (keep is None) == (drop is None):
        raise TraceError("tenants: give exactly one of keep or drop")
    mask = pc.is_in(table["tenant"], value_set=pa.array(list(keep if keep is not None else drop), pa.string()))
    mask = pc.fill_null(mask, False)
    return table.filter(mask if keep is not None else pc.invert(mask))


def map_times(table: pa.Table, scale: float, shift: float) -> pa.Table:
    """Every absolute time t of the table becomes t × scale + shift."""
    out = table
    for name in ("submit_time", "start_time", "deadline"):
        i = out.schema.get_field_index(name)
        out = out.set_column(i, out.schema.field(name), pc.add(pc.multiply(out[name], scale), shift))
    attempts = [None if a is None else [{k: None if v is None else v * scale + shift for k, v in x.items()} for x in a]
                for a in out["attempts"].to_pylist()]
    i = out.schema.get_field_index("attempts")
    return out.set_column(i, out.schema.field("attempts"), pa.array(attempts, out.schema.field("attempts").type))


OPS = {"window": window, "sample": sample, "scale_load": scale_load, "tenants": tenants}

OVERSIZE = ("error", "drop", "clamp")


def oversize(table: pa.Table, capacity: np.ndarray, rule: str = "error") -> tuple[pa.Table, dict]:
    """Jobs that could never fit the cluster (``capacity``: nodes × (GPU, CPU, GB)).

    ``error`` names the first; ``drop`` removes them; ``clamp`` shrinks each role to what
    the cluster holds (task count first, then a task's demand to the largest node), keeping
    the recorded duration. Returns the table and {rule, count, job ids (first 20)}.
    """
    from simulator.cluster import tasks_per_node

    if rule not in OVERSIZE:
        raise TraceError(f"oversize must be one of {OVERSIZE}, got {rule!r}")
    roles = table["roles"].to_pylist()
    ids = table["job_id"].to_pylist()
    largest = capacity.max(axis=0)
    total_gpu = float(capacity[:, 0].sum())
    bad, new_roles = [], []
    for job_id, rs in zip(ids, roles):
        fits = [int(tasks_per_node(capacity, (r["gpu"], r["cpu"], r["mem"])).sum()) for r in rs]
        need_gpu = sum(r["min_count"] * r["gpu"] for r in rs)
        if all(f >= r["min_count"] for f, r in zip(fits, rs)) and need_gpu <= total_gpu + 1e-9:
            new_roles.append(rs)
            continue
        bad.append(job_id)
        new_roles.append([_clamp(r, capacity, largest, total_gpu) for r in rs] if rule == "clamp" else rs)
    record = {"rule": rule, "count": len(bad), "jobs": bad[:20]}
    if not bad:
        return table, record
    if rule == "error":
        raise TraceError(f"{len(bad)} job(s) can never fit the cluster, e.g. {bad[0]!r}; set the trace's "
                         "oversize rule to drop or clamp")
    if rule == "drop":
        return table.filter(pc.invert(pc.is_in(table["job_id"], value_set=pa.array(bad)))), record
    i = table.schema.get_field_index("roles")
    table = table.set_column(i, table.schema.field("roles"), pa.array(new_roles, table.schema.field("roles").type))
    gpus = pa.array([sum(r["count"] * r["gpu"] for r in rs) for rs in new_roles], pa.float64())
    table = table.set_column(table.schema.get_field_index("num_gpus"), table.schema.field("num_gpus"), gpus)
    return validate(table, "oversize clamp"), record


def _clamp(role: dict, capacity: np.ndarray, largest: np.ndarray, total_gpu: float) -> dict:
    from simulator.cluster import tasks_per_node

    demand = np.minimum([role["gpu"], role["cpu"], role["mem"]], largest)
    fit = int(tasks_per_node(capacity, tuple(demand)).sum())
    if demand[0] > 0:
        fit = min(fit, int(total_gpu // demand[0]))
    count = max(1, min(role["count"], fit))
    return {**role, "gpu": float(demand[0]), "cpu": float(demand[1]), "mem": float(demand[2]), "count": count,
            "min_count": min(role["min_count"], count), "max_count": max(min(role["max_count"], fit), count)}
