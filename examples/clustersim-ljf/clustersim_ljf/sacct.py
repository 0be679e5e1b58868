"""Slurm accounting records: ``sacct -X --parsable2 --format=JobID,User,Submit,Elapsed,State,AllocTRES``
(one row per job allocation, fields separated by ``|``). ``Submit`` is a wall-clock time
(``YYYY-MM-DDTHH:MM:SS``), ``Elapsed`` ``[D-]HH:MM:SS``, GPUs the ``gres/gpu=N`` item of
``AllocTRES``. A job step (``123.batch``: run without ``-X``) or a job without GPUs is an error
naming the line; every job of the file is kept.
"""

from __future__ import annotations

from pathlib import Path

from clustersim.simulator.params import NonNegative
from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs
from clustersim.traces.csvrows import number, rows, text, timestamp
from clustersim.traces.schema import TraceError, gpu_worker_role

COLUMNS = ("JobID", "User", "Submit", "Elapsed", "State", "AllocTRES")
# Slurm's job states (sacct(1), JOB STATE CODES) as the job table's statuses
STATUS = {"COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "killed", "TIMEOUT": "killed",
          "OUT_OF_MEMORY": "failed", "NODE_FAIL": "failed", "PREEMPTED": "killed"}


@register("sacct")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: NonNegative = 0.0, mem_per_gpu: NonNegative = 0.0):
    jobs = Jobs(path, bad)
    for line, r in rows(path, COLUMNS, delimiter="|", bad=bad):
        with jobs.row(line, r):
            job_id = text(path, line, "JobID", r["JobID"])
            if "." in job_id:
                raise TraceError(f"{path}: line {line}: field 'JobID': {job_id!r} is a job step; export "
                                 "allocations only (sacct -X)", line=line, field="JobID")
            submit = timestamp(path, line, "Submit", r["Submit"].replace("T", " "))
            gpus = _gpus(path, line, r["AllocTRES"])
            state = r["State"].split()[0] if r["State"].strip() else ""   # "CANCELLED by 123" -> CANCELLED
            jobs.add(job_id, submit, [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)],
                     status=STATUS.get(state, "unknown"), duration=_elapsed(path, line, r["Elapsed"]),
                     user=r["User"].strip() or None)
    return jobs.table()


def _gpus(path: Path, line: int, tres: str) -> float:
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key.strip() in ("gres/gpu", "gpu"):
            return number(path, line, "AllocTRES", value, positive=True, integer=True)
    raise TraceError(f"{path}: line {line}: field 'AllocTRES': {tres!r} holds no gres/gpu=N: not a GPU job",
                     line=line, field="AllocTRES")


def _elapsed(path: Path, line: int, value: str) -> float:
    """Seconds of ``[D-]HH:MM:SS`` (or ``MM:SS``)."""
    days, _, clock = value.strip().rpartition("-")
    parts = clock.split(":")
    try:
        if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts) or (days and not days.isdigit()):
            raise ValueError
        h, m, s = ([0] if len(parts) == 2 else []) + [int(p) for p in parts]
    except ValueError:
        raise TraceError(f"{path}: line {line}: field 'Elapsed': {value!r} is not [D-]HH:MM:SS",
                         line=line, field="Elapsed") from None
    seconds = (int(days or 0) * 24 + h) * 3600 + m * 60 + s
    if seconds <= 0:
        raise TraceError(f"{path}: line {line}: field 'Elapsed': a job of {value!r} ran no time",
                         line=line, field="Elapsed")
    return float(seconds)
