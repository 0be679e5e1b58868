"""Helios cluster logs (S-Lab-System-Group/HeliosData ``data/<Cluster>/cluster_log.csv``,
SenseTime, SC'21; CC-BY 4.0).

``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue``:
times ``YYYY-MM-DD HH:MM:SS``; ``duration`` = end − start and ``queue`` = start − submit in
seconds (both checked against the times where present); ``gpu_num`` 0 is a CPU job. Times are made
relative to the first submission. See docs/traces/helios.md.
"""

from __future__ import annotations

from pathlib import Path

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs, check_never_ran
from clustersim.traces.csvrows import choice, number, rows, text, timestamp
from clustersim.traces.schema import Role, TraceError, gpu_worker_role

COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "start_time",
           "end_time", "duration")
STATUS = {"COMPLETED": "completed", "CANCELLED": "killed", "FAILED": "failed", "TIMEOUT": "failed",
          "NODE_FAIL": "failed", "SUSPENDED": "killed", "RUNNING": "running", "PENDING": "pending"}
TOLERANCE_S = 1.0  # the log rounds times to whole seconds


@register("helios")
def read(path: Path, *, bad: BadRows, never_ran: str = "drop", mem_per_cpu: float = 0.0):
    check_never_ran(never_ran)
    jobs = Jobs(path, bad)
    for line, r in rows(path, COLUMNS, bad=bad):
        with jobs.row(line, r):
            num = lambda k, **c: number(path, line, k, r[k], **c)  # noqa: E731
            gpus, cpus = num("gpu_num", minimum=0, integer=True), num("cpu_num", minimum=0)
            nodes = int(num("node_num", minimum=0, integer=True))
            status = choice(path, line, "state", r["state"], STATUS)
            submit = timestamp(path, line, "submit_time", r["submit_time"])
            start = None if _blank(r["start_time"]) else timestamp(path, line, "start_time", r["start_time"])
            end = None if _blank(r["end_time"]) else timestamp(path, line, "end_time", r["end_time"])
            if start is None or end is None or end == start:
                if never_ran == "drop":
                    bad.drop("helios: job never ran (no start/end, or 0 s)")
                    continue
                duration = None
            elif end < start:
                raise TraceError(f"{path}: line {line}: times out of order: end_time before start_time",
                                 line=line, field="end_time")
            else:
                duration = _checked_gap(path, line, "duration", r["duration"], end - start, "end_time - start_time")
            if start is not None and not _blank(r.get("queue") or ""):  # optional column
                _checked_gap(path, line, "queue", r["queue"], start - submit, "start_time - submit_time")
            if gpus > 0:
                roles = [gpu_worker_role(gpus, cpus / gpus, mem_per_cpu * cpus / gpus)]
            else:
                roles = [Role("worker", 1, 0.0, cpus, mem_per_cpu * cpus)]
            jobs.add(text(path, line, "job_id", r["job_id"]), submit, roles, status=status, start_time=start,
                     duration=duration, user=r["user"].strip() or None, tenant=r["vc"].strip() or None,
                     num_nodes=nodes or None)
    return jobs.table(rebase=True)


def _checked_gap(path: Path, line: int, field: str, value: str, gap: float, between: str) -> float:
    """``gap``, the seconds ``between`` two time columns, which ``field`` repeats (``duration``,
    ``queue``): a mismatch means shifted columns."""
    given = number(path, line, field, value, minimum=0)
    if abs(given - gap) > TOLERANCE_S:
        raise TraceError(f"{path}: line {line}: field {field!r}: {given:g} s, but {between} is {gap:g} s",
                         line=line, field=field)
    return gap


def _blank(value: str) -> bool:
    return value.strip() in ("", "None", "NaN", "nan")
