"""ElasticFlow traces (microsoft/elasticflow-traces, MIT).

Raw form ``job_id,submission_time,duration,num_gpu`` (ten Microsoft ITP clusters) and the
ElasticFlow form, which adds ``num_iteration,model_name,deadline,batch_size``. Seconds
relative to the trace start, GPUs. The tenant is the file's stem (``cluster01``…), so that
several clusters can be concatenated. See docs/traces/elasticflow.md.
"""

from __future__ import annotations

from pathlib import Path

from traces import register
from traces.csvrows import number, rows
from traces.schema import build_table, gpu_worker_role

COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")
EXTRA = ("num_iteration", "model_name", "deadline", "batch_size")


@register("elasticflow")
def read(path: Path, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    keys = ("job_id", "submit_time", "duration", "roles", "iterations", "model", "deadline", "batch_size")
    cols: dict[str, list] = {k: [] for k in keys}
    extended = None
    for line, r in rows(path, COLUMNS):
        if extended is None:
            extended = all(c in r for c in EXTRA)
        cols["job_id"].append(r["job_id"].strip())
        cols["submit_time"].append(number(path, line, "submission_time", r["submission_time"], minimum=0))
        cols["duration"].append(number(path, line, "duration", r["duration"], positive=True))
        gpus = number(path, line, "num_gpu", r["num_gpu"], positive=True)
        cols["roles"].append([gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)])
        if extended:
            cols["iterations"].append(number(path, line, "num_iteration", r["num_iteration"], positive=True))
            cols["model"].append(r["model_name"].strip() or None)
            cols["deadline"].append(number(path, line, "deadline", r["deadline"], minimum=0))
            cols["batch_size"].append(int(number(path, line, "batch_size", r["batch_size"], positive=True,
                                                 integer=True)))
    n = len(cols["job_id"])
    if not extended:
        for k in ("iterations", "model", "deadline", "batch_size"):
            cols[k] = [None] * n
    cols["tenant"] = [path.stem] * n
    cols["status"] = ["completed"] * n
    return build_table(cols)
