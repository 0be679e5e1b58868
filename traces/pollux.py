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

from dataclasses import replace
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
# The smallest per-GPU batch of each application (its simulator/traces/<app>/placements.csv's least
# local_bsz, the Pollux simulator's Application.min_local_bsz): with ``elastic: true`` a job may use
# 1 .. batch // this GPUs, as the Pollux simulator's Optimus allows (get_optimus_job_info:
# max_replicas = target_batch_size // min_local_bsz; NCF capped at 1 GPU).
MIN_LOCAL_BSZ = {"bert": 4, "cifar10": 32, "ncf": 32, "imagenet": 20, "deepspeech2": 10, "yolov3": 4}
ONE_GPU = {"ncf"}


@register("pollux")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0,
         epochs: str = "pollux", elastic: bool = False):
    """``epochs: pollux`` sizes each job as the Pollux simulator does; ``none`` leaves its work null.
    ``elastic: true`` lets each job use 1 .. batch // its application's least per-GPU batch GPUs
    (NCF 1), the bounds the Pollux simulator's Optimus gives; false: its ``num_replicas`` only."""
    if epochs not in ("pollux", "none"):
        raise TraceError(f"{path}: option epochs must be 'pollux' or 'none', got {epochs!r}")
    if not isinstance(elastic, bool):
        raise TraceError(f"{path}: option elastic must be true or false, got {elastic!r}")
    if path.is_dir():
        files = sorted(path.glob("*.csv"))
        if not files:
            raise TraceError(f"{path}: a Pollux workload directory needs *.csv files")
        import pyarrow as pa
        return pa.concat_tables([_read_file(f, bad, cpu_per_gpu, mem_per_gpu, epochs, elastic, f.stem)
                                 for f in files])
    return _read_file(path, bad, cpu_per_gpu, mem_per_gpu, epochs, elastic, None)


def _read_file(path: Path, bad: BadRows, cpu_per_gpu, mem_per_gpu, epochs, elastic, tenant):
    jobs = Jobs(path, bad)
    for line, r in rows(path, COLUMNS, bad=bad):
        with jobs.row(line, r):
            gpus = number(path, line, "num_replicas", r["num_replicas"], positive=True, integer=True)
            app = text(path, line, "application", r["application"])
            batch = int(number(path, line, "batch_size", r["batch_size"], positive=True, integer=True))
            name = text(path, line, "name", r["name"])
            role = gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)
            if elastic:
                role = _elastic(path, line, role, app, batch)
            jobs.add(name if tenant is None else f"{tenant}/{name}", number(path, line, "time", r["time"], minimum=0),
                     [role], model=MODEL.get(app, app),
                     batch_size=batch, iterations=_iterations(path, line, app, batch) if epochs == "pollux" else None,
                     **({} if tenant is None else {"tenant": tenant}))
    return jobs.table()


def _elastic(path: Path, line: int, role, app: str, batch: int):
    """``role`` with the Pollux simulator's Optimus bounds: 1 .. batch // least per-GPU batch
    GPUs (NCF: 1), starting at its ``num_replicas`` where that lies within them."""
    if app not in MIN_LOCAL_BSZ:
        raise TraceError(f"{path}: line {line}: field 'application': {app!r} has no known least per-GPU batch "
                         f"(known: {', '.join(sorted(MIN_LOCAL_BSZ))}); set options.elastic: false",
                         line=line, field="application")
    hi = 1 if app in ONE_GPU else max(1, batch // MIN_LOCAL_BSZ[app])
    return replace(role, count=min(role.count, hi), min_count=1, max_count=hi)


def _iterations(path: Path, line: int, app: str, batch: int) -> float:
    if app not in COMPLETION:
        raise TraceError(f"{path}: line {line}: field 'application': {app!r} has no Pollux epoch count "
                         f"(known: {', '.join(sorted(COMPLETION))}); set options.epochs: none to load it unsized",
                         line=line, field="application")
    ref_batch, iterations = COMPLETION[app]
    return iterations * ref_batch / batch
