"""The Tiresias simulator's job CSV (SymbioticLab/Tiresias, simulator/*.csv).

``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``: seconds, GPUs,
iterations; ``interval`` is the gap to the next job and is not needed. See docs/traces/tiresias.md.
"""

from __future__ import annotations

from pathlib import Path

from traces import register
from traces.csvrows import number, rows
from traces.schema import build_table, gpu_worker_role

COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")


@register("tiresias")
def read(path: Path, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    cols: dict[str, list] = {k: [] for k in ("job_id", "submit_time", "duration", "iterations", "model", "roles")}
    for line, r in rows(path, COLUMNS):
        cols["job_id"].append(r["job_id"].strip())
        cols["submit_time"].append(number(path, line, "submit_time", r["submit_time"], minimum=0))
        cols["duration"].append(number(path, line, "duration", r["duration"], positive=True))
        cols["iterations"].append(number(path, line, "iterations", r["iterations"], positive=True))
        gpus = number(path, line, "num_gpu", r["num_gpu"], positive=True)
        cols["model"].append(r["model_name"].strip() or None)
        cols["roles"].append([gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)])
    cols["status"] = ["completed"] * len(cols["job_id"])
    return build_table(cols)
