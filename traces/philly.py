"""Microsoft Philly job log (msr-fiddle/philly-traces ``trace-data/cluster_job_log``, CC-BY 4.0;
Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
Workloads", ATC'19).

One JSON array of jobs ``{jobid, user, vc, submitted_time, status, attempts}``; each attempt
is ``{start_time, end_time, detail: [{ip, gpus: [...]}]}``; times ``YYYY-MM-DD HH:MM:SS``
with ``None``/"None"/"" for missing (a missing last end = still running at the snapshot).
The full log is about 1 GB: it is streamed job by job (ijson), never loaded whole.

GPUs = the GPUs of the first attempt that holds any (the ATC'19 notebook's rule), nodes =
its servers; the attempts are kept (failures and retries are real behaviour); the VC is
the tenant. The optional ``machine_list`` (``cluster_machine_list``:
``machineId,number of GPUs,single GPU mem``) gives each job the GPU memory of its first
server as ``gpu_type`` ("24GB"). See docs/traces/philly.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import ijson

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs, check_never_ran
from clustersim.traces.csvrows import number, rows, text, timestamp
from clustersim.traces.schema import TraceError, check_time, gpu_worker_role

STATUS = {"Pass": "completed", "Killed": "killed", "Failed": "failed"}
DURATIONS = ("wall", "sum_attempts")
MISSING = (None, "None", "")
GPU_MEM = re.compile(r"^\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-z]+)\s*$")
GB_PER_UNIT = {"GB": 1.0, "G": 1.0, "GiB": 1.0, "MB": 1 / 1024, "MiB": 1 / 1024}
MACHINE_COLUMNS = ("machineId", "number of GPUs", "single GPU mem")


@register("philly", files=("machine_list",))
def read(path: Path, *, bad: BadRows, machine_list: Path | None = None, duration: str = "wall",
         never_ran: str = "drop", cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    """``duration``: ``wall`` = last end − first start (the ATC'19 notebook's run time);
    ``sum_attempts`` = the sum of the attempts' run times (Blox's ``sum_attempts``)."""
    if duration not in DURATIONS:
        raise TraceError(f"philly: duration must be one of {DURATIONS}, got {duration!r}")
    check_never_ran(never_ran)
    gpu_mem = {m: f"{gb:g}GB" for m, (_, gb) in read_machine_list(machine_list, bad).items()} if machine_list else {}
    jobs = Jobs(path, bad, unit="job")
    censored: list[int] = []  # rows still running at the snapshot: they end at the snapshot time
    snapshot = 0.0
    for i, job in _stream(path, bad):
        with jobs.row(i, job):
            j = _parse(path, i, job)
            check_time(f"{path}: job {i} ({j['jobid']})", "last time", j["last_time"])
            if not j["gpus"]:
                bad.drop("philly: no attempt holds a GPU (job size unknown)")
                snapshot = max(snapshot, j["last_time"])
                continue
            run = _run_time(j["attempts"], j["start"], duration)
            if not j["running"] and run <= 0 and never_ran == "drop":
                bad.drop("philly: job never ran (no finished attempt, or 0 s)")
                snapshot = max(snapshot, j["last_time"])
                continue
            jobs.add(j["jobid"], j["submit"], [gpu_worker_role(j["gpus"], cpu_per_gpu, mem_per_gpu)],
                     status="running" if j["running"] else j["status"],
                     duration=run if run > 0 and not j["running"] else None, start_time=j["start"],
                     user=j["user"], tenant=j["vc"], num_nodes=j["nodes"],
                     attempts=[{"start": s, "end": e} for s, e in j["attempts"]], gpu_type=gpu_mem.get(j["server"]))
            snapshot = max(snapshot, j["last_time"])  # rows that pass only: a rejected one sets nothing
            if j["running"]:
                censored.append(len(jobs) - 1)
    _censor(jobs, censored, snapshot, duration)
    return jobs.table(rebase=True)


MAX_DEPTH = 32  # JSON nesting of the log (array > job > attempts > detail > gpus is 5); deeper is not Philly


def _stream(path: Path, bad: BadRows) -> Iterator[tuple[int, object]]:
    """``(job number from 1, job)`` of the JSON array; a truncated, malformed or too deeply
    nested file stops the stream with an error (or, under ``skip``, one reject for the
    unreadable rest)."""
    if path.is_dir():
        raise TraceError(f"{path}: is a folder, expected the Philly job log (one JSON array)")
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
        if head and not head.startswith(b"["):
            raise TraceError(f"{path}: expected one JSON array of jobs, the file starts with {head[:20]!r}")
        f.seek(0)
        i = 0
        try:
            for job in _items(ijson.basic_parse(f, use_float=True)):
                i += 1
                yield i, job
        except (ijson.JSONError, UnicodeDecodeError, _TooDeep) as e:
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            bad.reject(TraceError(f"{path}: job {i + 1}: malformed or truncated JSON near byte {f.tell()} "
                                  f"({reason[:200]}); the file must be one JSON array of jobs"), str(path), "", i + 1)


class _TooDeep(ValueError):
    pass


def _items(events) -> Iterator[object]:
    """The elements of the top-level array, built from ijson's basic events (which, unlike its
    prefixed events, cost nothing per level), refusing nesting deeper than ``MAX_DEPTH``."""
    depth, builder = 0, None
    for ev, value in events:
        if ev == "start_map" or ev == "start_array":
            depth += 1
            if depth > MAX_DEPTH:
                raise _TooDeep(f"nested deeper than {MAX_DEPTH} levels")
            if depth == 2:
                builder = ijson.ObjectBuilder()
        elif ev == "end_map" or ev == "end_array":
            depth -= 1
            if depth == 1:
                builder.event(ev, value)
                yield builder.value
                builder = None
                continue
        if builder is not None:
            builder.event(ev, value)
        elif depth == 1 and ev != "start_array":
            yield value  # a scalar element: _parse names it


def _parse(path: Path, i: int, job: object) -> dict:
    """One job object, checked field by field."""
    where = f"{path}: job {i}"
    if not isinstance(job, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(job).__name__}")
    missing = [k for k in ("jobid", "submitted_time", "status", "attempts") if k not in job]
    if missing:
        raise TraceError(f"{where}: missing field(s) {', '.join(missing)}", field=missing[0])
    jobid = job["jobid"] if isinstance(job["jobid"], str) else None
    if not jobid:
        raise TraceError(f"{where}: field 'jobid': expected a non-empty string, got {job['jobid']!r}", field="jobid")
    where = f"{where} ({jobid})"
    status = job["status"]
    if status not in STATUS:
        raise TraceError(f"{where}: field 'status': unknown value {status!r} (expected one of "
                         f"{', '.join(STATUS)})", field="status")
    submit = _time(where, "submitted_time", job["submitted_time"])
    if submit is None:
        raise TraceError(f"{where}: field 'submitted_time': missing", field="submitted_time")
    attempts = job["attempts"]
    if not isinstance(attempts, list):
        raise TraceError(f"{where}: field 'attempts': expected a list, got {type(attempts).__name__}",
                         field="attempts")
    spans, gpus, nodes, server = [], 0, 0, None
    for k, a in enumerate(attempts):
        if not isinstance(a, dict):
            raise TraceError(f"{where}: attempt {k}: expected an object", field="attempts")
        start = _time(f"{where}: attempt {k}", "start_time", a.get("start_time"))
        end = _time(f"{where}: attempt {k}", "end_time", a.get("end_time"))
        if start is not None and end is not None and end < start:
            raise TraceError(f"{where}: attempt {k}: times out of order: end_time before start_time",
                             field="end_time")
        if spans and start is not None and spans[-1][0] is not None and start < spans[-1][0]:
            raise TraceError(f"{where}: attempt {k}: times not sorted: starts before attempt {k - 1}",
                             field="start_time")
        spans.append((start, end))
        if not gpus:
            gpus, nodes, server = _detail(where, k, a.get("detail", []))
    running = bool(spans) and spans[-1][0] is not None and spans[-1][1] is None
    starts = [s for s, _ in spans if s is not None]
    times = [submit] + [t for span in spans for t in span if t is not None]
    return {"jobid": jobid, "submit": submit, "status": STATUS[status], "attempts": spans, "gpus": gpus,
            "nodes": nodes or None, "server": server, "start": starts[0] if starts else None, "running": running,
            "last_time": max(times), "user": _opt_str(job.get("user")), "vc": _opt_str(job.get("vc"))}


def _detail(where: str, k: int, detail: object) -> tuple[int, int, str | None]:
    """(GPUs, servers, first server) of an attempt's ``detail``."""
    if not isinstance(detail, list):
        raise TraceError(f"{where}: attempt {k}: field 'detail': expected a list", field="detail")
    gpus = 0
    for d in detail:
        if not isinstance(d, dict) or not isinstance(d.get("gpus", []), list):
            raise TraceError(f"{where}: attempt {k}: field 'detail': expected {{ip, gpus: [...]}} entries",
                             field="detail")
        gpus += len(d.get("gpus", []))
    return gpus, len(detail), (detail[0].get("ip") if detail else None)


def _run_time(attempts: list[tuple], start: float | None, rule: str) -> float:
    """Run time of the finished attempts by the ``duration`` rule (0 if none finished)."""
    spans = [(s, e) for s, e in attempts if s is not None and e is not None]
    if not spans:
        return 0.0
    if rule == "wall":
        return spans[-1][1] - start
    return sum(e - s for s, e in spans)


def _censor(jobs: Jobs, rows_: list[int], snapshot: float, rule: str) -> None:
    """Jobs running at the snapshot end there (their last attempt's end, their duration)."""
    cols = jobs.cols
    for k in rows_:
        attempts = cols["attempts"][k]
        attempts[-1]["end"] = snapshot
        run = _run_time([(a["start"], a["end"]) for a in attempts], cols["start_time"][k], rule)
        cols["duration"][k] = run if run > 0 else None


def _time(where: str, field: str, value: object) -> float | None:
    if value in MISSING:
        return None
    if not isinstance(value, str):
        raise TraceError(f"{where}: field {field!r}: expected a time string, got {value!r}", field=field)
    return timestamp(where, None, field, value)


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) and value not in MISSING else None


def read_machine_list(path: Path, bad: BadRows | None = None) -> dict[str, tuple[int, float]]:
    """``cluster_machine_list`` as {machine: (GPUs, GB of memory per GPU)}."""
    machines = {}
    for line, r in rows(path, MACHINE_COLUMNS, bad=bad):
        name = text(path, line, "machineId", r["machineId"])
        gpus = int(number(path, line, "number of GPUs", r["number of GPUs"], minimum=0, integer=True))
        machines[name] = (gpus, _gpu_mem_gb(path, line, r["single GPU mem"]))
    return machines


def _gpu_mem_gb(path: Path, line: int, value: str) -> float:
    m = GPU_MEM.match(value)
    if not m:
        raise TraceError(f"{path}: line {line}: field 'single GPU mem': {value!r} is not an amount like '24GB'",
                         line=line, field="single GPU mem")
    if m["unit"] not in GB_PER_UNIT:
        raise TraceError(f"{path}: line {line}: field 'single GPU mem': unknown unit {m['unit']!r} in {value!r} "
                         f"(known: {', '.join(GB_PER_UNIT)})", line=line, field="single GPU mem")
    return float(m["value"]) * GB_PER_UNIT[m["unit"]]
