"""Alibaba PAI GPU cluster trace v2020 (alibaba/clusterdata ``cluster-trace-gpu-v2020``,
CC-BY 4.0; Weng et al., "MLaaS in the Wild", NSDI'22).

Headerless CSVs whose column names are in ``<table>.header`` files (looked up beside each
CSV, else the published headers bundled in ``traces/data/alibaba_v2020``):

* ``pai_job_table`` (``path``): job_name, inst_id, user, status, start_time (= submission),
  end_time — seconds
* ``pai_task_table`` (``task_table``, required): one row per task (role) of a job, with
  ``inst_num`` instances each asking ``plan_cpu`` % of a core, ``plan_mem`` GB and
  ``plan_gpu`` % of a GPU (50 = half a GPU), and its ``gpu_type``
* ``pai_instance_table`` (``instance_table``, optional): the earliest instance launch is
  the job's start (else the earliest task start)
* ``pai_group_tag_table`` (``group_tag_table``, optional): ``group`` (recurring-job hash,
  the tenant; the user otherwise, as the trace's authors do) and ``workload`` (the model)

Times are made relative to the first submission. See docs/traces/alibaba_pai2020.md.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from clustersim.traces import DATA, register
from clustersim.traces.collect import BadRows, Jobs, check_never_ran
from clustersim.traces.csvrows import choice, number, optional_number, read_header, rows, text
from clustersim.traces.schema import MAX_DEMAND, MAX_TASKS, Role, TraceError

STATUS = {"Terminated": "completed", "Failed": "failed", "Running": "running", "Waiting": "pending"}
BUNDLED_HEADERS = DATA / "alibaba_v2020"
JOB = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
        "plan_gpu", "gpu_type")
INSTANCE = ("job_name", "start_time")
GROUP_TAG = ("inst_id", "group", "workload")
TABLES = {"path": "pai_job_table", "task_table": "pai_task_table", "instance_table": "pai_instance_table",
          "group_tag_table": "pai_group_tag_table"}  # input file option -> the table it holds


@register("alibaba_pai2020", files=("task_table", "instance_table", "group_tag_table"))
def read(path: Path, *, bad: BadRows, task_table: Path | None = None, instance_table: Path | None = None,
         group_tag_table: Path | None = None, never_ran: str = "drop"):
    check_never_ran(never_ran)
    if task_table is None:
        raise TraceError(f"{path}: alibaba_pai2020 needs the task table (option task_table: pai_task_table.csv)")
    tasks, broken = _tasks(task_table, bad)
    starts = _instance_starts(instance_table, bad) if instance_table else None
    tags = _group_tags(group_tag_table, bad) if group_tag_table else {}
    jobs = Jobs(path, bad)
    censored: list[int] = []
    snapshot, seen = 0.0, set()
    for line, r in rows(path, JOB, header=_header(path, "pai_job_table", JOB), bad=bad):
        with jobs.row(line, r):
            name = text(path, line, "job_name", r["job_name"])
            seen.add(name)
            if name in broken:
                raise TraceError(f"{path}: line {line}: job {name!r} has a rejected row in {task_table.name} "
                                 f"(line {broken[name]})", field="job_name")
            if name not in tasks:
                raise TraceError(f"{path}: line {line}: job {name!r} has no task in {task_table.name}",
                                 field="job_name")
            status = choice(path, line, "status", r["status"], STATUS)
            submit = number(path, line, "start_time", r["start_time"], minimum=0)
            end = optional_number(path, line, "end_time", r["end_time"], minimum=0)
            roles, gpu_type, task_start = _roles(tasks[name])
            start = starts.get(name) if starts is not None else task_start
            duration, running = None, status == "running" and not end
            if running:
                pass  # censored: ends at the snapshot, once every row is read
            elif start is not None and end is not None and end > start:
                duration = end - start
            elif start is not None and end is None and status != "pending":
                raise TraceError(f"{path}: line {line}: field 'end_time': missing for a {r['status']} job",
                                 field="end_time")
            elif never_ran == "drop":
                bad.drop("alibaba_pai2020: job never ran (no instance start, or 0 s)")
                snapshot = max(snapshot, submit, end or 0.0)
                continue
            inst = r["inst_id"].strip()
            group, workload = tags.get(inst, (None, None))
            user = r["user"].strip() or None
            jobs.add(name, submit, roles, status=status, start_time=start, duration=duration, user=user,
                     tenant=group or user, model=workload, gpu_type=gpu_type)
            snapshot = max(snapshot, submit, end or 0.0)  # rows that pass only: a rejected one sets nothing
            if running:
                censored.append(len(jobs) - 1)
    for k in censored:
        start = jobs.cols["start_time"][k]
        jobs.cols["duration"][k] = snapshot - start if start is not None and snapshot > start else None
    orphans = sum(1 for j in tasks if j not in seen)
    if orphans:
        bad.drop("alibaba_pai2020: jobs in the task table absent from the job table", orphans)
    return jobs.table(rebase=True)


def companions(files: dict[str, Path]) -> dict[str, Path]:
    """The header file each input table is read with, for the cache key: editing a header
    changes the table."""
    found = {f"{k}.header": _header_file(p, TABLES[k]) for k, p in files.items() if k in TABLES}
    return {k: p for k, p in found.items() if p is not None}


def _header_file(csv_path: Path, table: str) -> Path | None:
    """``<stem>.header`` beside the CSV, else ``<table>.header`` beside it, else the bundled one."""
    places = (csv_path.with_suffix(".header"), csv_path.parent / f"{table}.header", BUNDLED_HEADERS / f"{table}.header")
    return next((p for p in places if p.is_file()), None)


def _header(csv_path: Path, table: str, required: tuple[str, ...]) -> list[str]:
    """The table's columns, from its header file (``_header_file``).
    (``rows`` checks the columns of a header it reads itself, not of one it is given.)"""
    found = _header_file(csv_path, table)
    if found is None:
        raise TraceError(f"{csv_path}: no header file for {table}")
    header = read_header(found)
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(f"{csv_path}: header lacks column(s) {', '.join(missing)} (header: {','.join(header)})")
    return header


def _tasks(path: Path, bad: BadRows) -> tuple[dict[str, list], dict[str, int]]:
    """{job: [(task, instances, gpu, cpu, mem, gpu_type, start)]}, and the jobs with a rejected task row."""
    tasks: dict[str, list] = defaultdict(list)
    broken: dict[str, int] = {}
    for line, r in rows(path, TASK, header=_header(path, "pai_task_table", TASK), bad=bad):
        try:
            job = text(path, line, "job_name", r["job_name"])
            num = lambda k, **c: number(path, line, k, r[k], **c)  # noqa: E731
            opt = lambda k: optional_number(path, line, k, r[k], minimum=0, maximum=100 * MAX_DEMAND) or 0.0  # noqa: E731
            task = (text(path, line, "task_name", r["task_name"]),
                    int(num("inst_num", positive=True, integer=True, maximum=MAX_TASKS)),
                    opt("plan_gpu") / 100, opt("plan_cpu") / 100, opt("plan_mem"), r["gpu_type"].strip() or None,
                    optional_number(path, line, "start_time", r["start_time"], minimum=0))
        except TraceError as err:
            bad.reject(err, str(path), r, line)
            if r.get("job_name", "").strip():
                broken.setdefault(r["job_name"].strip(), line)
            continue
        tasks[job].append(task)
    return tasks, broken


def _roles(tasks: list) -> tuple[list[Role], str | None, float | None]:
    """Roles (one per task, named after it), the GPU types asked for, the earliest task start."""
    roles, names, types = [], defaultdict(int), set()
    for name, count, gpu, cpu, mem, gpu_type, _ in tasks:
        names[name] += 1
        roles.append(Role(name if names[name] == 1 else f"{name}#{names[name]}", count, gpu, cpu, mem))
        if gpu > 0 and gpu_type:
            types.add(gpu_type)
    started = [t[6] for t in tasks if t[6]]
    return roles, "|".join(sorted(types)) or None, min(started) if started else None


def _instance_starts(path: Path, bad: BadRows) -> dict[str, float]:
    """Earliest launch per job; 0 means the instance never started (the trace's convention)."""
    starts: dict[str, float] = {}
    for line, r in rows(path, INSTANCE, header=_header(path, "pai_instance_table", INSTANCE), bad=bad):
        try:
            t = optional_number(path, line, "start_time", r["start_time"], minimum=0)
        except TraceError as err:
            bad.reject(err, str(path), r, line)
            continue
        if t:
            job = r["job_name"].strip()
            starts[job] = min(t, starts.get(job, t))
    return starts


def _group_tags(path: Path, bad: BadRows) -> dict[str, tuple[str | None, str | None]]:
    return {r["inst_id"].strip(): (r["group"].strip() or None, r["workload"].strip() or None)
            for _, r in rows(path, GROUP_TAG, header=_header(path, "pai_group_tag_table", GROUP_TAG), bad=bad)}
