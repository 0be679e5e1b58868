"""The generic job CSV: the way to bring one's own trace.

``job_id,submit_time,duration,num_gpus[,model]`` (header required, any column order, other
columns ignored): ``submit_time`` and ``duration`` in seconds, ``num_gpus`` the GPUs the job
asks for (whole, or a fraction below 1 for a shared GPU), ``model`` optional (a model-zoo
profile name; blank or absent: the profile group decides, see ``profile.unknown``). Rows may
come in any order; times are kept as given. See docs/traces/csv.md.
"""

from __future__ import annotations

from pathlib import Path

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs
from clustersim.traces.csvrows import number, rows, text
from clustersim.traces.schema import TraceError, gpu_worker_role

COLUMNS = ("job_id", "submit_time", "duration", "num_gpus")


@register("csv")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    jobs = Jobs(path, bad)
    for line, r in rows(path, COLUMNS, bad=bad):
        with jobs.row(line, r):
            num = lambda k, **c: number(path, line, k, r[k], **c)  # noqa: E731
            gpus = num("num_gpus", positive=True)
            if gpus > 1 and gpus != int(gpus):
                raise TraceError(f"{path}: line {line}: field 'num_gpus': {gpus:g}: a job asks for whole GPUs, or "
                                 "a fraction of one", line=line, field="num_gpus")
            jobs.add(text(path, line, "job_id", r["job_id"]), num("submit_time", minimum=0),
                     [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)], status="completed",
                     duration=num("duration", positive=True), model=(r.get("model") or "").strip() or None)
    return jobs.table()
