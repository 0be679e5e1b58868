"""Pollux and Sia workload CSVs (petuum/adaptdl ``simulator/workloads/workload-N.csv``,
siasosp23/artifacts ``sia-simulator/workloads/``).

``name,time,application,num_replicas,batch_size``: job name, submission time (s), the
application (cifar10, ncf, deepspeech2, bert, imagenet, yolov3…), the initial GPU count and
the initial global batch size. There is no duration: those simulators derive it from
measured throughput and statistical efficiency of the application, so it stays null here
until a workload model turns the application into work. See docs/traces/pollux.md.
"""

from __future__ import annotations

from pathlib import Path

from traces import register
from traces.collect import BadRows, Jobs
from traces.csvrows import number, rows, text
from traces.schema import gpu_worker_role

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


@register("pollux")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    jobs = Jobs(path, bad)
    for line, r in rows(path, COLUMNS, bad=bad):
        with jobs.row(line, r):
            gpus = number(path, line, "num_replicas", r["num_replicas"], positive=True, integer=True)
            jobs.add(text(path, line, "name", r["name"]), number(path, line, "time", r["time"], minimum=0),
                     [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)],
                     model=text(path, line, "application", r["application"]),
                     batch_size=int(number(path, line, "batch_size", r["batch_size"], positive=True, integer=True)))
    return jobs.table()
