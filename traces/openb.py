"""Alibaba GPU cluster trace v2023 "openb" pod lists (alibaba/clusterdata
``cluster-trace-gpu-v2023``; the copy bundled here is from hkust-adsl/kubernetes-scheduler-simulator).

``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time``: milli-cores, MiB, GPUs and, for a one-GPU pod, the share of
that GPU in thousandths (``gpu_milli``: 460 = 0.46 GPU); ``gpu_spec`` lists the GPU models
the pod accepts ('|'-separated, empty = any); times in seconds from the trace start.
The ``multigpu*`` variants have only the first five columns (no times): their pods all
arrive at 0 with no duration, a static packing input. See docs/traces/openb.md.
"""

from __future__ import annotations

from pathlib import Path

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs, check_never_ran
from clustersim.traces.csvrows import choice, number, optional_number, rows, text
from clustersim.traces.schema import Role, TraceError, gpu_worker_role

COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIMES = ("creation_time", "deletion_time", "scheduled_time")
STATUS = {"Succeeded": "completed", "Failed": "failed", "Running": "running", "Pending": "pending"}


@register("openb")
def read(path: Path, *, bad: BadRows, never_ran: str = "drop", one_task_per_pod: bool = True):
    """``one_task_per_pod``: a pod is one container on one node (as FGD places it); False
    splits a multi-GPU pod into one-GPU tasks like other GPU jobs."""
    check_never_ran(never_ran)
    jobs = Jobs(path, bad)
    timed = None
    for line, r in rows(path, COLUMNS, bad=bad):
        if timed is None:
            timed = _layout(path, r)
        with jobs.row(line, r):
            num = lambda k, **c: number(path, line, k, r[k], **c)  # noqa: E731
            cpu, mem = num("cpu_milli", minimum=0) / 1000, num("memory_mib", minimum=0) / 1024
            num_gpu, gpu_milli = num("num_gpu", minimum=0, integer=True), num("gpu_milli", minimum=0)
            if num_gpu == 1 and not 0 < gpu_milli <= 1000:
                raise TraceError(f"{path}: line {line}: field 'gpu_milli': a one-GPU pod needs 0 < gpu_milli "
                                 f"<= 1000, got {r['gpu_milli']!r}", line=line, field="gpu_milli")
            gpus = gpu_milli / 1000 if num_gpu == 1 else num_gpu
            if one_task_per_pod or gpus <= 1:
                roles = [Role("worker", 1, gpus, cpu, mem)]
            else:
                roles = [gpu_worker_role(gpus, cpu / gpus, mem / gpus)]
            name = text(path, line, "name", r["name"])
            if not timed:
                jobs.add(name, 0.0, roles)
                continue
            status = choice(path, line, "pod_phase", r["pod_phase"], STATUS)
            created = num("creation_time", minimum=0)
            scheduled = optional_number(path, line, "scheduled_time", r["scheduled_time"], minimum=0)
            deleted = num("deletion_time", minimum=0)
            if scheduled is None and never_ran == "drop":
                bad.drop("openb: pod never scheduled")
                continue
            if scheduled is not None and deleted < scheduled:
                raise TraceError(f"{path}: line {line}: times out of order: deletion_time {deleted:g} before "
                                 f"scheduled_time {scheduled:g}", line=line, field="deletion_time")
            jobs.add(name, created, roles, status=status, start_time=scheduled,
                     duration=None if scheduled is None else deleted - scheduled,
                     tenant=(r.get("qos") or "").strip() or None, gpu_type=(r.get("gpu_spec") or "").strip() or None)
    return jobs.table()


def _layout(path: Path, row: dict) -> bool:
    """True for the timed pod list; False for the five-column multigpu lists."""
    present = [c for c in TIMES if c in row]
    if present and len(present) < len(TIMES):
        missing = [c for c in TIMES if c not in row]
        raise TraceError(f"{path}: line 1: missing column(s) {', '.join(missing)}")
    return bool(present)
