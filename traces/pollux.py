"""Pollux and Sia workload CSVs (petuum/adaptdl ``simulator/workloads/workload-N.csv``,
siasosp23/artifacts ``sia-simulator/workloads/``).

``name,time,application,num_replicas,batch_size``: job name, submission time (s), the
application (cifar10, ncf, deepspeech2, bert, imagenet, yolov3…), the initial GPU count and
the initial global batch size. There is no duration: the Pollux simulator runs each job for
its application's fixed number of epochs (``simulator/applications.py``), so the work is
the iterations that takes at the job's batch size, and the model zoo turns it into time.
A directory (such as the Pollux simulator's ``workloads/``) is read as one trace set: every
``*.csv`` in it, in name order, each file's jobs with the file's stem as tenant and
``<stem>/<name>`` as job id (names repeat across workloads); the ``tenants`` transform picks one.
See docs/traces/pollux.md.
"""

from __future__ import annotations

from pathlib import Path

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs
from clustersim.traces.csvrows import number, rows, text
from clustersim.traces.schema import TraceError, gpu_worker_role

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")

# Iterations to completion of each application in the Pollux simulator (petuum/adaptdl,
# osdi21-artifact, simulator/traces/<app>/validation-<B>.csv: the ``iteration`` column at epoch
# max_epochs - 1, with max_epochs from simulator/applications.py: bert 2, cifar10 100, ncf 10,
# imagenet 90, deepspeech2 80, yolov3 50), at that file's batch size B. A job at batch b covers
# the same epochs of the same data: B * I / b iterations.
COMPLETION = {"bert": (12, 14774), "cifar10": (256, 20377), "ncf": (256, 194174), "imagenet": (200, 576525),
              "deepspeech2": (160, 4041), "yolov3": (8, 103444)}
# The model zoo's profile of each application (Pollux Table 1: ImageNet is trained with ResNet-50)
MODEL = {"imagenet": "resnet50"}


@register("pollux")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0,
         epochs: str = "pollux"):
    """``epochs: pollux`` sizes each job as the Pollux simulator does; ``none`` leaves its work null."""
    if epochs not in ("pollux", "none"):
        raise TraceError(f"{path}: option epochs must be 'pollux' or 'none', got {epochs!r}")
    if path.is_dir():
        files = sorted(path.glob("*.csv"))
        if not files:
            raise TraceError(f"{path}: a Pollux workload directory needs *.csv files")
        import pyarrow as pa
        return pa.concat_tables([_read_file(f, bad, cpu_per_gpu, mem_per_gpu, epochs, f.stem) for f in files])
    return _read_file(path, bad, cpu_per_gpu, mem_per_gpu, epochs, None)


def _read_file(path: Path, bad: BadRows, cpu_per_gpu, mem_per_gpu, epochs, tenant):
    jobs = Jobs(path, bad)
    for line, r in rows(path, COLUMNS, bad=bad):
        with jobs.row(line, r):
            gpus = number(path, line, "num_replicas", r["num_replicas"], positive=True, integer=True)
            app = text(path, line, "application", r["application"])
            batch = int(number(path, line, "batch_size", r["batch_size"], positive=True, integer=True))
            name = text(path, line, "name", r["name"])
            jobs.add(name if tenant is None else f"{tenant}/{name}", number(path, line, "time", r["time"], minimum=0),
                     [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)], model=MODEL.get(app, app),
                     batch_size=batch, iterations=_iterations(path, line, app, batch) if epochs == "pollux" else None,
                     **({} if tenant is None else {"tenant": tenant}))
    return jobs.table()


def _iterations(path: Path, line: int, app: str, batch: int) -> float:
    if app not in COMPLETION:
        raise TraceError(f"{path}: line {line}: field 'application': {app!r} has no Pollux epoch count "
                         f"(known: {', '.join(sorted(COMPLETION))}); set options.epochs: none to load it unsized",
                         line=line, field="application")
    ref_batch, iterations = COMPLETION[app]
    return iterations * ref_batch / batch
