"""ElasticFlow traces (microsoft/elasticflow-traces, MIT).

Raw form ``job_id,submission_time,duration,num_gpu`` (ten Microsoft ITP clusters) and the
ElasticFlow form, which adds ``num_iteration,model_name,deadline,batch_size``. Seconds
relative to the trace start, GPUs; rows sorted by submission time. The tenant is the file's
stem (``cluster01``…), so that several clusters can be concatenated. The ElasticFlow
simulator's own files (pkusys/ElasticFlow ``traces_for_ElasticFlow/*.csv``) name the same
columns ``job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration`` and are read
unchanged. See docs/traces/elasticflow.md.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from clustersim.simulator import arrow
from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs, checked_table
from clustersim.traces.csvrows import NotPlain, Ordered, number, numbers, plain_blocks, rows, text
from clustersim.traces.schema import TraceError, gpu_worker_role

COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")
EXTRA = ("num_iteration", "model_name", "deadline", "batch_size")
# the ElasticFlow simulator's names (its jobs.py add_job reads both spellings) -> ours
NATIVE = {"submit_time": "submission_time", "iteration": "num_iteration", "ddl": "deadline"}


def _header(path: Path) -> list[str]:
    from clustersim.traces.csvrows import open_text
    with open_text(path) as f:
        return [h.strip() for h in f.readline().split(",")]


def _rows(path: Path, bad: BadRows):
    """Rows under our column names, from either header."""
    if "submit_time" not in _header(path):   # ours; a missing column is named in our spelling
        yield from rows(path, COLUMNS, bad=bad)
        return
    want = tuple({v: k for k, v in NATIVE.items()}.get(c, c) for c in COLUMNS)
    for line, r in rows(path, want, bad=bad):
        yield line, {NATIVE.get(k, k): v for k, v in r.items()}


@register("elasticflow")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0, elastic: bool = False,
         throughputs: str = "bundled:elasticflow_peer/throughputs_T4"):
    """``elastic: true`` lets each job of the ElasticFlow form use 1 .. ``max_gpu`` GPUs, as the
    ElasticFlow simulator does (jobs.py ``add_job``: the largest GPU count its model's throughput
    table (``throughputs``: a folder of ``<model>.csv``) has a number for at its batch size, at most
    64 and at most the batch size); false: its ``num_gpu`` only."""
    if not isinstance(elastic, bool):
        raise TraceError(f"{path}: option elastic must be true or false, got {elastic!r}")
    tables = _tables(path, throughputs) if elastic else None
    table = _at_once(path, cpu_per_gpu, mem_per_gpu, tables)
    if table is not None:
        return table
    jobs = Jobs(path, bad)
    order = Ordered(path, "submission_time")
    tenant = path.stem
    extended = None
    for line, r in _rows(path, bad):
        if extended is None:
            extended = all(c in r for c in EXTRA)
        with jobs.row(line, r):
            submit = number(path, line, "submission_time", r["submission_time"], minimum=0)
            gpus = number(path, line, "num_gpu", r["num_gpu"], positive=True)
            extra = {}
            if extended:
                extra = dict(
                    iterations=number(path, line, "num_iteration", r["num_iteration"], positive=True),
                    model=r["model_name"].strip() or None,
                    deadline=number(path, line, "deadline", r["deadline"], minimum=0),
                    batch_size=int(number(path, line, "batch_size", r["batch_size"], positive=True, integer=True)))
            order.check(line, submit)
            role = gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)
            if tables is not None:
                role = _elastic(path, line, role, tables, extra)
            jobs.add(text(path, line, "job_id", r["job_id"]), submit, [role],
                     status="completed", duration=number(path, line, "duration", r["duration"], positive=True),
                     tenant=tenant, **extra)
    return jobs.table()


def _at_once(path: Path, cpu_per_gpu: float, mem_per_gpu: float, tables: dict | None):
    """The job table ``read`` makes, read a block of lines at a time (a fifth of the time), when
    the file is plain and every row good (``csvrows.plain_blocks``, ``numbers`` and
    ``collect.checked_table``: the checks of the row loop); else None, and ``read`` reads the file
    row by row, naming the row at fault."""
    try:
        blocks = [_block(cols) for cols in plain_blocks(path)]
    except NotPlain:
        return None
    out = {k: np.concatenate([b[k] for b in blocks]) if isinstance(blocks[0][k], np.ndarray)
           else [v for b in blocks for v in b[k]] for k in blocks[0]}
    if (np.diff(out["submit_time"]) < 0).any():   # Ordered
        return None
    n = len(out["job_id"])
    out.update(status=arrow.decoded(np.zeros(n, dtype=np.int64), ["completed"]),
               tenant=arrow.decoded(np.zeros(n, dtype=np.int64), [path.stem]))
    keys = zip(out.pop("gpus").tolist())   # what a job's role comes from: its GPUs (elastic: and model and batch)
    if tables is not None:
        keys = ((g, m, b) for (g,), m, b in zip(keys, out.get("model", [None] * n),
                                                 out["batch_size"].tolist() if "batch_size" in out else [None] * n))
    shared: dict[tuple, list] = {}   # one list of roles per kind of job
    roles = []
    for key in keys:
        rs = shared.get(key)
        if rs is None:
            role = gpu_worker_role(key[0], cpu_per_gpu, mem_per_gpu)
            if tables is not None:
                try:
                    role = _elastic(path, 0, role, tables, {"model": key[1], "batch_size": key[2]})
                except TraceError:
                    return None
            rs = shared[key] = [role]
        roles.append(rs)
    out["roles"] = roles
    return checked_table(out)


def _block(cols: dict[str, list[str]]) -> dict:
    """One block of lines' columns, parsed and checked as ``read`` parses a row (NotPlain: a bad
    value, or a missing column)."""
    if "submit_time" in cols:   # the ElasticFlow simulator's names, as _rows renames them
        if any(ours in cols for ours in NATIVE.values()):
            raise NotPlain
        cols = {NATIVE.get(k, k): v for k, v in cols.items()}
    if not all(c in cols for c in COLUMNS):
        raise NotPlain
    out = {"job_id": [v.strip() for v in cols["job_id"]], "submit_time": numbers(cols["submission_time"], minimum=0),
           "gpus": numbers(cols["num_gpu"], positive=True), "duration": numbers(cols["duration"], positive=True)}
    if all(c in cols for c in EXTRA):
        out.update(iterations=numbers(cols["num_iteration"], positive=True),
                   model=[v.strip() or None for v in cols["model_name"]],
                   deadline=numbers(cols["deadline"], minimum=0),
                   batch_size=numbers(cols["batch_size"], positive=True, integer=True))
        if out["batch_size"].max() >= 2**31:   # Jobs.add: a 32-bit integer
            raise NotPlain
        out["batch_size"] = out["batch_size"].astype(np.int64)
    return out


def _tables(path: Path, folder: str) -> dict[str, dict[int, int]]:
    """model -> {batch size: the largest GPU count with a throughput} from ElasticFlow's
    ``throughputs_<GPU>/<model>.csv`` (``global_batch_size,1,2,4,...``; ``nan`` where unmeasured)."""
    import csv
    import math
    from clustersim.traces import resolve
    try:
        files = sorted(Path(resolve(folder)).glob("*.csv"))
    except (OSError, ValueError) as e:
        raise TraceError(f"{path}: option throughputs: {e}") from None
    if not files:
        raise TraceError(f"{path}: option throughputs: no <model>.csv in {folder}")
    out: dict[str, dict[int, int]] = {}
    for f in files:
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                counts = [int(k) for k, v in row.items() if k != "global_batch_size" and v and
                          math.isfinite(float(v))]
                out.setdefault(f.stem, {})[int(row["global_batch_size"])] = max(counts, default=1)
    return out


def _elastic(path: Path, line: int, role, tables: dict, extra: dict):
    """``role`` with ElasticFlow's elastic bounds: 1 .. max_gpu (jobs.py ``add_job``)."""
    model, batch = extra.get("model"), extra.get("batch_size")
    top = tables.get(model, {}).get(batch)
    if top is None:
        raise TraceError(f"{path}: line {line}: field 'model_name': no throughput row for {model!r} at batch {batch} "
                         f"(models: {', '.join(sorted(tables))}); set options.elastic: false", line=line,
                         field="model_name")
    hi = max(1, min(64, batch, top))
    return replace(role, count=min(role.count, hi), min_count=1, max_count=hi)
