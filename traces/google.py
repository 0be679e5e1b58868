"""Google Borg cluster traces: ClusterData 2011-2 (``job_events`` + ``task_events``) and
ClusterData 2019 (``collection_events`` + ``instance_events``), google/cluster-data, CC-BY 4.0.

Both are event logs: a job is folded from its events. Times are microseconds since 600 s
before the trace window (0 = before the window, 2^63−1 = after it); CPU and memory
requests are normalized to the largest machine and are scaled here by a configurable
machine size (``machine_cpus`` cores, ``machine_mem_gb`` GB; the traces publish no absolute
capacity). There are no GPUs: every job is a CPU job whose tasks form one ``worker`` role.

* 2011: headerless CSV shards (``part-00000-of-00500.csv.gz``); ``path`` and ``task_events``
  may each be one file or a folder of shards, read in name order; each shard is sorted by time.
* 2019: BigQuery exports, CSV with a header row (``resource_request`` flattened as
  ``resource_request.cpus`` or ``resource_request_cpus``) or JSON lines (nested
  ``resource_request``; int64 values may be quoted); only ``collection_type`` 0 (jobs).

See docs/traces/google2011.md and docs/traces/google2019.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs, check_never_ran
from clustersim.traces.csvrows import Lines, Ordered, bad_text, no_rows, number, open_text, optional_number, rows, text_error
from clustersim.traces.schema import Role, TraceError, check_time

WINDOW_OFFSET_S = 600.0  # event times count from 600 s before the window (schema docs 2011 and v3)
AFTER_WINDOW = 2**63 - 1
US = 1e-6


@dataclass(frozen=True)
class Events:
    """One trace version's event codes and columns."""

    submit: int
    schedule: int
    terminal: dict[int, str]  # terminal event type -> status
    known: frozenset[int]
    tiers: tuple[tuple[int, str], ...]  # (highest priority of the tier, tier name)


# Tiers: ClusterData2011_2.md ("0 and 1 are free priorities; 9, 10 and 11 are production
# priorities"; it also names 12 "monitoring"); v3 document for 2019 (notes/traces.md §3a).
V2011 = Events(submit=0, schedule=1, known=frozenset(range(9)),
               tiers=((1, "free"), (8, "middle"), (11, "production"), (2**31, "monitoring")),
               terminal={2: "killed", 3: "failed", 4: "completed", 5: "killed", 6: "unknown"})
V2019 = Events(submit=0, schedule=3, known=frozenset(range(11)),
               tiers=((99, "free"), (115, "best_effort_batch"), (119, "mid"), (200, "production"), (2**31, "monitoring")),
               terminal={4: "killed", 5: "failed", 6: "completed", 7: "killed", 8: "unknown"})
JOB_EVENTS_2011 = ("time", "missing_info", "job_id", "event_type", "user", "scheduling_class", "job_name",
                   "logical_job_name")
TASK_EVENTS_2011 = ("time", "missing_info", "job_id", "task_index", "machine_id", "event_type", "user",
                    "scheduling_class", "priority", "cpu_request", "memory_request", "disk_space_request",
                    "different_machines_restriction")
COLLECTION_2019 = ("time", "type", "collection_id", "collection_type", "priority", "user", "collection_logical_name")
INSTANCE_2019 = ("time", "type", "collection_id", "instance_index", "resource_request.cpus",
                 "resource_request.memory")


@dataclass
class Job:
    """A job as its events so far describe it (times in s from the window start)."""

    submit: float | None = None
    attempts: list = field(default_factory=list)  # [start, end or None]
    status: str | None = None
    user: str | None = None
    name: str | None = None
    priority: int | None = None
    first_line: int = 0


@register("google2011", files=("task_events",))
def read_2011(path: Path, *, bad: BadRows, task_events: Path | None = None, machine_cpus: float = 32.0,
              machine_mem_gb: float = 128.0, never_ran: str = "drop"):
    """``path``: job_events (file or folder of shards); ``task_events``: the tasks' requests."""
    if task_events is None:
        raise TraceError(f"{path}: google2011 needs option task_events (a task_events file or folder)")
    _check_options(path, machine_cpus, machine_mem_gb, never_ran)
    events = ((p, line, r) for p in _files(path)
              for line, r in _ordered(p, rows(p, JOB_EVENTS_2011, header=list(JOB_EVENTS_2011), bad=bad), bad))
    jobs = _fold(events, V2011, bad, "job_id", "event_type", "user", "logical_job_name", None)
    tasks = ((p, line, r) for p in _files(task_events)
             for line, r in _ordered(p, rows(p, TASK_EVENTS_2011, header=list(TASK_EVENTS_2011), bad=bad), bad))
    sizes = _sizes(tasks, bad, "job_id", "task_index", "cpu_request", "memory_request", "priority")
    return _table(path, jobs, sizes, V2011, bad, machine_cpus, machine_mem_gb, never_ran)


@register("google2019", files=("instance_events",))
def read_2019(path: Path, *, bad: BadRows, instance_events: Path | None = None, machine_cpus: float = 32.0,
              machine_mem_gb: float = 128.0, never_ran: str = "drop"):
    """``path``: collection_events; ``instance_events``: the instances' requests (CSV or JSON lines)."""
    if instance_events is None:
        raise TraceError(f"{path}: google2019 needs option instance_events (a CSV or JSON-lines file or folder)")
    _check_options(path, machine_cpus, machine_mem_gb, never_ran)
    collections = ((p, line, r) for p in _files(path) for line, r in _records(p, COLLECTION_2019, bad))
    jobs = _fold(_jobs_only(collections, bad), V2019, bad, "collection_id", "type", "user",
                 "collection_logical_name", "priority")
    instances = ((p, line, r) for p in _files(instance_events) for line, r in _records(p, INSTANCE_2019, bad))
    sizes = _sizes(_jobs_only(instances, bad), bad, "collection_id", "instance_index", "resource_request.cpus",
                   "resource_request.memory", None)
    return _table(path, jobs, sizes, V2019, bad, machine_cpus, machine_mem_gb, never_ran)


def _check_options(path: Path, machine_cpus: float, machine_mem_gb: float, never_ran: str) -> None:
    """Before any parsing: the event logs can be large."""
    check_never_ran(never_ran)
    if machine_cpus <= 0 or machine_mem_gb <= 0:
        raise TraceError(f"{path}: machine_cpus and machine_mem_gb must be > 0")


def _files(path: Path) -> list[Path]:
    """A file, or the trace shards in a folder (name order)."""
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise TraceError(f"{path}: empty folder, expected trace shards")
    return files


def _ordered(path: Path, it, bad: BadRows):
    """Rows of a 2011 shard, whose events must come in time order."""
    order = Ordered(path, "time")
    for line, r in it:
        try:
            order.check(line, _raw_time(path, line, r["time"]))
        except TraceError as err:
            bad.reject(err, str(path), r, line)
            continue
        yield line, r


def _records(path: Path, required: tuple[str, ...], bad: BadRows) -> Iterator[tuple[int, dict]]:
    """Rows of a 2019 export: JSON lines (``.json``/``.jsonl``, maybe gzipped) or CSV with a header."""
    name = path.name.removesuffix(".gz")
    if not name.endswith((".json", ".jsonl")):
        aliases = {c.replace(".", "_"): c for c in required if "." in c}
        for line, r in rows(path, tuple(c for c in required if "." not in c), bad=bad):
            r = {aliases.get(k, k): v for k, v in r.items()}
            missing = [c for c in required if c not in r]
            if missing:
                raise TraceError(f"{path}: line 1: missing column(s) {', '.join(missing)}", line=1)
            yield line, r
        return
    data = 0
    with open_text(path) as f:
        for line, text in Lines(path, f).numbered():
            if not text.strip():
                continue
            data += 1
            try:
                if bad_text(text):
                    raise text_error(path, line)
                obj = json.loads(text)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except TraceError as err:
                bad.reject(err, str(path), text.strip(), line)
                continue
            except (ValueError, RecursionError) as e:
                bad.reject(TraceError(f"{path}: line {line}: malformed JSON line ({str(e)[:200]})", line=line),
                           str(path), text.strip(), line)
                continue
            request = obj.pop("resource_request", None) or {}
            if isinstance(request, dict):
                obj.update({f"resource_request.{k}": v for k, v in request.items()})
            yield line, obj
    if not data:
        raise no_rows(path)


def _jobs_only(events, bad: BadRows):
    """2019 events of jobs (collection_type 0); alloc sets are counted and left out."""
    for p, line, r in events:
        ctype = r.get("collection_type")
        if ctype not in (None, "", 0, "0"):
            bad.drop("google2019: events of alloc sets (collection_type 1)")
            continue
        yield p, line, r


def _text(value) -> str:
    return "" if value is None else str(value).strip()


def _raw_time(path: Path, line: int, value) -> float:
    return number(path, line, "time", value, minimum=0, integer=True)


def _seconds(raw: float) -> float | None:
    """Seconds from the window start; None after the window; clamped to 0 before it."""
    if raw >= AFTER_WINDOW:
        return None
    return max(raw * US - WINDOW_OFFSET_S, 0.0)


def _fold(events, v: Events, bad: BadRows, id_col, type_col, user_col, name_col, priority_col) -> dict[str, Job]:
    """Jobs from their events, whatever order the files give them in: each job's events are
    sorted by time (at one instant: SUBMIT, other events, SCHEDULE, then terminal events) and
    folded into its first submission, attempts (schedule -> terminal event) and last status;
    user, name and priority come from the earliest event that gives them (priority: the latest)."""
    timelines: dict[str, list] = {}
    first_line: dict[str, int] = {}
    for path, line, r in events:
        try:
            t = _seconds(_raw_time(path, line, r.get("time")))
            check_time(f"{path}: line {line}", "time", t)
            kind = int(number(path, line, type_col, r.get(type_col), minimum=0, integer=True))
            if kind not in v.known:
                raise TraceError(f"{path}: line {line}: field {type_col!r}: unknown event type {kind}",
                                 line=line, field=type_col)
            job_id = _text(r.get(id_col))
            if not job_id:
                raise TraceError(f"{path}: line {line}: field {id_col!r}: empty", line=line, field=id_col)
            priority = optional_number(path, line, priority_col, r.get(priority_col), minimum=0, integer=True) \
                if priority_col else None
        except TraceError as err:
            bad.reject(err, str(path), r, line)
            continue
        if t is None:
            bad.drop("google: events after the trace window")
            continue
        first_line.setdefault(job_id, line)
        timelines.setdefault(job_id, []).append(
            (t, _rank(v, kind), kind, priority, _text(r.get(user_col)), _text(r.get(name_col))))
    return {job_id: _fold_job(sorted(timeline, key=lambda e: e[:3]), v, first_line[job_id])
            for job_id, timeline in timelines.items()}


def _rank(v: Events, kind: int) -> int:
    """Order of events at one instant: a job is submitted, queued, scheduled, then ends."""
    if kind == v.submit:
        return 0
    if kind == v.schedule:
        return 2
    return 3 if kind in v.terminal else 1


def _fold_job(timeline: list[tuple], v: Events, first_line: int) -> Job:
    job = Job(first_line=first_line)
    for t, _, kind, priority, user, name in timeline:
        job.user = job.user or user or None
        job.name = job.name or name or None
        if priority is not None:
            job.priority = int(priority)
        running = bool(job.attempts) and job.attempts[-1][1] is None
        if kind == v.submit and job.submit is None:
            job.submit = t
        elif kind == v.schedule and not running:
            job.attempts.append([t, None])
        elif kind in v.terminal:
            if running:
                job.attempts[-1][1] = t
            job.status = v.terminal[kind]
    return job


def _sizes(events, bad: BadRows, id_col, index_col, cpu_col, mem_col, priority_col) -> dict[str, list]:
    """Per job: [tasks, summed CPU request, summed memory request, highest task priority].

    A task's request is the largest it ever asked (requests can be updated while it runs)."""
    tasks: dict[tuple[str, str], list] = {}
    for path, line, r in events:
        try:
            key = (_text(r.get(id_col)), _text(r.get(index_col)))
            if not all(key):
                raise TraceError(f"{path}: line {line}: field {id_col!r}/{index_col!r}: empty", line=line)
            cpu = optional_number(path, line, cpu_col, r.get(cpu_col), minimum=0)
            mem = optional_number(path, line, mem_col, r.get(mem_col), minimum=0)
            prio = optional_number(path, line, priority_col, r.get(priority_col), minimum=0, integer=True) \
                if priority_col else None
        except TraceError as err:
            bad.reject(err, str(path), r, line)
            continue
        t = tasks.setdefault(key, [0.0, 0.0, None])
        t[0], t[1] = max(t[0], cpu or 0.0), max(t[1], mem or 0.0)
        if prio is not None:
            t[2] = int(prio) if t[2] is None else max(t[2], int(prio))
    sizes: dict[str, list] = {}
    for (job, _), (cpu, mem, prio) in tasks.items():
        s = sizes.setdefault(job, [0, 0.0, 0.0, None])
        s[0] += 1
        s[1] += cpu
        s[2] += mem
        if prio is not None:
            s[3] = prio if s[3] is None else max(s[3], prio)
    return sizes


def _tier(v: Events, priority: int | None) -> str | None:
    if priority is None:
        return None
    return next(name for top, name in v.tiers if priority <= top)


def _table(path: Path, folded: dict[str, Job], sizes: dict[str, list], v: Events, bad: BadRows,
           machine_cpus: float, machine_mem_gb: float, never_ran: str):
    snapshot = max((t for j in folded.values() for a in j.attempts for t in a if t is not None), default=0.0)
    jobs = Jobs(path, bad)
    order = sorted(folded, key=lambda k: (folded[k].submit is None, folded[k].submit or 0.0, k))
    for job_id, j in ((k, folded[k]) for k in order):  # by submission, then id: not by file order
        with jobs.row(j.first_line, job_id):
            if job_id not in sizes:
                bad.drop("google: job without task/instance events (size unknown)")
                continue
            if j.submit is None:
                raise TraceError(f"{path}: line {j.first_line} (job {job_id!r}): no SUBMIT event", field="type")
            tasks, cpu, mem, task_prio = sizes[job_id]
            attempts = [[s, e if e is not None else snapshot] for s, e in j.attempts]
            run = attempts[-1][1] - attempts[0][0] if attempts else 0.0
            if run <= 0 and never_ran == "drop":
                bad.drop("google: job never scheduled (or ran 0 s)")
                continue
            running = bool(j.attempts) and j.attempts[-1][1] is None
            priority = j.priority if j.priority is not None else task_prio
            role = Role("worker", tasks, 0.0, cpu / tasks * machine_cpus, mem / tasks * machine_mem_gb)
            jobs.add(job_id, j.submit, [role], status="running" if running else (j.status or "unknown"),
                     duration=run if run > 0 else None, start_time=attempts[0][0] if attempts else None,
                     attempts=[{"start": s, "end": e} for s, e in attempts], user=j.user, model=j.name,
                     priority=priority, tenant=_tier(v, priority))
    return jobs.table()
