"""The Tiresias simulator's job CSV (SymbioticLab/Tiresias, simulator/*.csv).

``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``: seconds, GPUs,
iterations; ``interval`` is the gap to the next job and is not needed. See docs/traces/tiresias.md.
"""

from __future__ import annotations

from pathlib import Path

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs
from clustersim.traces.csvrows import Ordered, number, rows, text
from clustersim.traces.schema import gpu_worker_role

COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")


@register("tiresias")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    jobs = Jobs(path, bad)
    order = Ordered(path, "submit_time")  # the simulator replays the file in order
    for line, r in rows(path, COLUMNS, bad=bad):
        with jobs.row(line, r):
            submit = number(path, line, "submit_time", r["submit_time"], minimum=0)
            gpus = number(path, line, "num_gpu", r["num_gpu"], positive=True)
            order.check(line, submit)
            jobs.add(text(path, line, "job_id", r["job_id"]), submit, [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)],
                     status="completed",
                     duration=number(path, line, "duration", r["duration"], positive=True),
                     iterations=number(path, line, "iterations", r["iterations"], positive=True),
                     model=r["model_name"].strip() or None)
    return jobs.table()
