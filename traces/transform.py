"""Transformations of a job table, chosen in the trace config and recorded in the run.

Each step is ``{op: <name>, ...parameters}`` and returns the new table with a record of
what it did (jobs before and after). ``oversize`` needs the cluster, so the experiment
applies it once the cluster is built.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from clustersim.simulator.arrow import compute as pc
from clustersim.simulator.workload import ROWS_AT_ONCE, role_kinds
from clustersim.traces.schema import ROLE, TraceError, validate


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
        table = validate(table, f"trace transform {i} ({op} {step})")  # e.g. times scaled out of range
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
    return retime(table, pc.subtract(table["submit_time"], start)) if rebase and start else table


def sample(table: pa.Table, *, rng, n: int | None = None, fraction: float | None = None, how: str = "first"):
    """``n`` jobs (or a ``fraction``): the earliest submitted (``first``) or drawn at random."""
    if (n is None) == (fraction is None):
        raise TraceError("sample: give exactly one of n or fraction")
    if fraction is not None and not 0 < fraction <= 1:
        raise TraceError(f"sample: fraction must be in (0, 1], got {fraction}")
    k = min(table.num_rows, int(n) if n is not None else round(fraction * table.num_rows))
    if k < 0:
        raise TraceError(f"sample: n must be >= 0, got {n}")
    if how == "first":
        idx = np.asarray(pc.sort_indices(table, [("submit_time", "ascending")]))[:k]
    elif how == "random":
        idx = rng.choice(table.num_rows, size=k, replace=False)
    else:
        raise TraceError(f"sample: how must be 'first' or 'random', got {how!r}")
    return table.take(pa.array(np.sort(idx)))


def scale_load(table: pa.Table, *, rng=None, factor: float):
    """Arrival rate × ``factor``: submission times / factor. A job's other times move with its
    submission, so that its deadline slack, queueing and attempts keep their lengths (its
    duration is kept too: only the arrivals are compressed)."""
    if not factor > 0:
        raise TraceError(f"scale_load: factor must be > 0, got {factor}")
    return retime(table, pc.divide(table["submit_time"], float(factor)))


def tenants(table: pa.Table, *, rng=None, keep: list[str] | None = None, drop: list[str] | None = None):
    """Only the jobs of the ``keep`` tenants (virtual clusters), or all but the ``drop`` ones."""
    if (keep is None) == (drop is None):
        raise TraceError("tenants: give exactly one of keep or drop")
    mask = pc.is_in(table["tenant"], value_set=pa.array(list(keep if keep is not None else drop), pa.string()))
    mask = pc.fill_null(mask, False)
    return table.filter(mask if keep is not None else pc.invert(mask))


def retime(table: pa.Table, submit) -> pa.Table:
    """New submission times; every other absolute time of a job (start, deadline, attempts)
    moves by the same amount as its submission."""
    delta = pa.array(np.asarray(pc.subtract(submit, table["submit_time"])))
    out = _set(table, "submit_time", submit)
    for name in ("start_time", "deadline"):
        out = _set(out, name, pc.add(out[name], delta))
    if out["attempts"].null_count == out.num_rows:
        return out
    attempts = [None if a is None else [{k: None if v is None else v + d for k, v in x.items()} for x in a]
                for a, d in zip(out["attempts"].to_pylist(), delta.to_pylist())]
    return _set(out, "attempts", pa.array(attempts, out.schema.field("attempts").type))


def _set(table: pa.Table, name: str, values) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), table.schema.field(name), values)


def elastic(table: pa.Table, *, rng=None, min_fraction: float = 0.5, max_tasks: int = 64):
    """GPU jobs become elastic (EDL §5.1): the GPU role of a single-role job may run with
    ``ceil(min_fraction · count)`` (EDL's QoS floor ⌈r·p_j⌉, r = 0.5 in §6.3) up to
    ``max(count, max_tasks)`` tasks (R2 has no cap in the paper; the default is the largest
    measured parallelism of the zoo's tables). Multi-role jobs (parameter servers) and
    CPU-only roles are left as they are."""
    if not 0 < min_fraction <= 1:
        raise TraceError(f"elastic: min_fraction must be in (0, 1], got {min_fraction}")
    if int(max_tasks) != max_tasks or max_tasks < 1:
        raise TraceError(f"elastic: max_tasks must be an integer >= 1, got {max_tasks}")
    rows = []
    for roles in table["roles"].to_pylist():
        if len(roles) == 1 and roles[0]["gpu"] > 0:
            r = roles[0]
            roles = [{**r, "min_count": max(1, math.ceil(r["count"] * min_fraction - 1e-9)),
                      "max_count": max(int(r["count"]), int(max_tasks))}]
        rows.append(roles)
    return _set(table, "roles", pa.array(rows, table.schema.field("roles").type))


OPS = {"window": window, "sample": sample, "scale_load": scale_load, "tenants": tenants, "elastic": elastic}

OVERSIZE = ("error", "drop", "clamp")


def oversize(table: pa.Table, capacity: np.ndarray, rule: str = "error") -> tuple[pa.Table, dict]:
    """Jobs that could never fit the cluster (``capacity``: nodes × (GPU, CPU, GB)).

    ``error`` names the first; ``drop`` removes them; ``clamp`` shrinks them (``_Fit.clamp``),
    keeping the recorded duration. Returns the table and {rule, count, job ids (first 20)}.
    """
    if rule not in OVERSIZE:
        raise TraceError(f"oversize must be one of {OVERSIZE}, got {rule!r}")
    fit = _Fit(capacity)
    names = [f.name for f in ROLE]
    fits: dict[tuple, bool] = {}   # jobs share a few role sets (kinds): each is checked once
    clamped: dict[tuple, list] = {}
    bad_rows, new_roles = [], []
    ids = None
    for start in range(0, table.num_rows, ROWS_AT_ONCE):
        codes, kinds = role_kinds(table["roles"].slice(start, ROWS_AT_ONCE))
        for key in kinds:
            if key not in fits:
                fits[key] = fit([dict(zip(names, r)) for r in key], "count")
        ok = np.array([fits[key] for key in kinds], dtype=bool)[codes]
        bad_rows += (start + np.flatnonzero(~ok)).tolist()
        if rule == "clamp":
            for k, key in enumerate(kinds):   # in the order of their first rows: the first to fail, the row's
                if key not in clamped:
                    rs = [dict(zip(names, r)) for r in key]
                    if not fits[key]:
                        ids = ids or table["job_id"].to_pylist()
                        rs = fit.clamp(ids[start + int(np.argmax(codes == k))], rs)
                    clamped[key] = rs
            new_roles += [clamped[kinds[k]] for k in codes.tolist()]
    bad = []
    if bad_rows:
        ids = ids or table["job_id"].to_pylist()
        bad = [ids[i] for i in bad_rows]
    record = {"rule": rule, "count": len(bad), "jobs": bad[:20]}
    if not bad:
        return table, record
    if rule == "error":
        raise TraceError(f"{len(bad)} job(s) can never fit the cluster, e.g. {bad[0]!r}; set the trace's "
                         "oversize rule to drop or clamp")
    if rule == "drop":
        if len(bad) == table.num_rows:
            raise TraceError(f"oversize: drop: none of the {len(bad)} job(s) can ever fit the cluster (e.g. "
                             f"{bad[0]!r}): nothing left to simulate; use a larger cluster or oversize: clamp")
        return table.filter(pc.invert(pc.is_in(table["job_id"], value_set=pa.array(bad)))), record
    table = _set(table, "roles", pa.array(new_roles, table.schema.field("roles").type))
    gpus = pa.array([sum(r["count"] * r["gpu"] for r in rs) for rs in new_roles], pa.float64())
    return validate(_set(table, "num_gpus", gpus), "oversize clamp"), record


class _Fit:
    """Whether a job fits the empty cluster: every task on some node, each role's tasks at
    once, and all roles together within the cluster's total GPUs, cores and GB."""

    def __init__(self, capacity: np.ndarray):
        self.capacity, self.largest = capacity, capacity.max(axis=0)
        self._held: dict[tuple, int] = {}

    def held(self, gpu: float, cpu: float, mem: float) -> int:
        """Tasks of one demand the empty cluster holds (cached: jobs share a few demands)."""
        from clustersim.simulator.cluster import tasks_per_node

        d = (gpu, cpu, mem)
        if d not in self._held:
            self._held[d] = int(tasks_per_node(self.capacity, d).sum())
        return self._held[d]

    def __call__(self, roles: list[dict], count: str = "min_count") -> bool:
        from clustersim.simulator.cluster import could_fit

        return could_fit(self.capacity, [((r["gpu"], r["cpu"], r["mem"]), r[count]) for r in roles],
                         lambda d: self.held(*d))

    def clamp(self, job_id: str, roles: list[dict]) -> list[dict]:
        """Each task's demand cut to the largest node, each role's count to what the cluster
        holds, then tasks taken from the largest role until all roles fit together."""
        out = []
        for role in roles:
            gpu, cpu, mem = (float(x) for x in np.minimum([role["gpu"], role["cpu"], role["mem"]], self.largest))
            held = self.held(gpu, cpu, mem)
            count = max(1, min(role["count"], held))
            out.append({**role, "gpu": gpu, "cpu": cpu, "mem": mem, "count": count,
                        "min_count": min(role["min_count"], count), "max_count": max(min(role["max_count"], held), count)})
        while not self(out, "count"):
            role = max(out, key=lambda r: r["count"])
            if role["count"] == 1:
                raise TraceError(f"job {job_id!r} does not fit the cluster even with one task per role; "
                                 "set the trace's oversize rule to drop")
            role["count"] -= 1
            role["min_count"] = min(role["min_count"], role["count"])
        return out
