"""The Philly job list of the Pollux artifact (petuum/adaptdl, branch osdi21-artifact,
``simulator/traces/philly.csv``; data derived from Microsoft's Philly trace, CC-BY 4.0).

``timestamp,duration,num_gpus,gpu_time,cluster``: submission as ``YYYY-MM-DD HH:MM:SS``,
run time (s), GPUs, GPU-seconds (= duration × GPUs, checked) and the virtual cluster (the
tenant). Rows are not sorted; times are made relative to the first submission. Jobs have
no id in the file: the id is the data line's number. See docs/traces/philly_pollux.md.
"""

from __future__ import annotations

from pathlib import Path

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs
from clustersim.traces.csvrows import number, rows, text, timestamp
from clustersim.traces.schema import TraceError, gpu_worker_role

COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")


@register("philly_pollux")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    jobs = Jobs(path, bad)
    for line, r in rows(path, COLUMNS, bad=bad):
        with jobs.row(line, r):
            duration = number(path, line, "duration", r["duration"], positive=True)
            gpus = number(path, line, "num_gpus", r["num_gpus"], positive=True, integer=True)
            gpu_time = number(path, line, "gpu_time", r["gpu_time"], positive=True)
            if abs(gpu_time - duration * gpus) > 1e-6 * gpu_time:
                raise TraceError(f"{path}: line {line}: field 'gpu_time': {gpu_time:g} != duration x num_gpus "
                                 f"= {duration * gpus:g}", line=line, field="gpu_time")
            jobs.add(str(line - 1), timestamp(path, line, "timestamp", r["timestamp"]),
                     [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)], duration=duration,
                     tenant=text(path, line, "cluster", r["cluster"]))
    return jobs.table(rebase=True)
