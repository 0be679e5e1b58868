"""The recorder: what happened, as columns, then the run's tables and summary.

Outputs of a run directory: ``jobs.parquet`` (one row per job), ``timeline.parquet``
(resources in use and job counts after every decision), ``events.parquet`` (every start,
stop, scale, migration, failure and finish) and ``summary.json``. Every file is written to
a temporary name and renamed, so an interrupted run never leaves a half-written output.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from array import array
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from clustersim.simulator import arrow   # output columns without pa.array's pandas import
from clustersim.simulator.errors import OutputError
from clustersim.simulator.job import EMPTY, FAULT_FIELDS, FaultState, JobState, Status, StopReason


FAILURE_CAUSES = ("failed", "node_down", "oom")   # StopReason values of failures
UNFINISHED_LISTED = 100   # summary.json lists this many unfinished jobs (jobs_unfinished counts all)

# the recorder's row of an ended job: JobState's numbers, each in its own compact column (array
# type codes: d float64, i int32, b int8); a time that is None is NaN
# (the engine's bookkeeping of a running job, busy_until, pending_since and version, is not kept)
_COLUMNS = (("progress", "d"), ("service", "d"), ("first_start", "d"), ("end_time", "d"), ("overhead_s", "d"),
            ("overhead_gpu_s", "d"), ("waited", "d"), ("preemptions", "i"), ("rescales", "i"), ("migrations", "i"),
            ("resizes", "i"), ("failures", "i"), ("status", "b"), ("stop_reason", "b"))
_NP = {name: {"d": np.float64, "i": np.int32, "b": np.int8}[code] for name, code in _COLUMNS}
_STATUSES = tuple(Status)
_STATUS_CODE = {s: i for i, s in enumerate(_STATUSES)}
_STOPS = (None, *StopReason)
_NULLABLE = ("first_start", "end_time")


_NAN = math.nan


def _or_nan(t: float | None) -> float:
    return math.nan if t is None else t


class Ended:
    """An ended job as the recorder keeps it: its spec and its row of the recorder's columns,
    read as the ``JobState`` it replaces reads (``engine.states``, ``recorder.states``). Read-only;
    the state of a job that has ended holds nothing and changes no more: its allocation is empty
    and its rates 0, and its throughput samples and phases are gone. Each recorder makes its own
    subclass, whose ``_rec`` is the recorder. Its row is its trace index (``spec.index``), so that
    it holds no row number of its own (a 1M-job run holds a million of them); ``EndedAt`` holds
    one where the run's jobs' indices are not 0 .. n - 1, each once (``Recorder``)."""

    __slots__ = ("spec",)
    _rec: "Recorder"
    allocation = EMPTY
    gpus = rate = steady_rate = 0.0
    phases = samples = None

    def __init__(self, spec):
        self.spec = spec

    @property
    def _row(self) -> int:
        return self.spec.index

    def _get(self, name: str):
        return self._rec._cols[name][self._row]

    @property
    def status(self) -> Status:
        return _STATUSES[self._get("status")]

    @property
    def stop_reason(self) -> StopReason | None:
        return _STOPS[self._get("stop_reason")]

    @property
    def since(self) -> float | None:
        """Progress is brought up to date at the end: the end time (None for a row of an unfinished job)."""
        return self.end_time

    @property
    def fault(self) -> FaultState | None:
        return self._rec._faults.get(self._row, (None, None))[0]

    @property
    def ckpt_next(self) -> float | None:
        return self._rec._faults.get(self._row, (None, None))[1]

    def __repr__(self) -> str:
        return f"Ended({self.spec.job_id!r}, {self.status.value})"


class EndedAt(Ended):
    """An ``Ended`` whose row is the order it ended in, not its trace index."""

    __slots__ = ("_row",)

    def __init__(self, spec, row: int):
        self.spec, self._row = spec, row


def _column_property(name: str) -> property:
    if name in _NULLABLE:
        def get(e: Ended):
            t = e._get(name)
            return None if t != t else t
    else:
        def get(e: Ended):
            return e._get(name)
    return property(get, doc=f"the job's ``{name}`` when it ended")


def _fault_property(name: str) -> property:
    default = getattr(FaultState(), name)

    def get(e: Ended):
        f = e.fault
        return default if f is None else getattr(f, name)
    return property(get, doc=f"``FaultState.{name}`` of the job")


for _name, _ in _COLUMNS:
    if _name not in ("status", "stop_reason"):
        setattr(Ended, _name, _column_property(_name))
for _name in FAULT_FIELDS:
    setattr(Ended, _name, _fault_property(_name))
del _name


def _indices_are_rows(jobs: Sequence) -> bool:
    """The jobs' indices are 0 .. len(jobs) - 1, each once."""
    n = len(jobs)
    idx = np.fromiter((j.index for j in jobs), dtype=np.int64, count=n)
    if n and (idx.min() < 0 or idx.max() >= n):
        return False
    seen = np.zeros(n, dtype=bool)
    seen[idx] = True
    return bool(seen.all())


class Recorder:
    def __init__(self, cluster, jobs: Sequence = ()):
        """``jobs``: the run's job specs. When their trace indices are 0 .. n - 1, each once (as a
        trace's are), an ended job's row is its index and its ``Ended`` holds no row number;
        otherwise rows go in the order jobs end (``EndedAt``)."""
        self.cluster = cluster
        types = set(cluster.gpu_type)
        self._one_type = types.pop() if len(types) == 1 else None   # the GPU type of every node, if one
        # compact columns (8 bytes a number, no object per value): a run records a few rows per job
        self._t = array("d")
        self._used = array("d")      # GPUs, cores, GB in use: three per timeline row
        self._running = array("i")   # job counts: int32, as the timeline table has them
        self._pending = array("i")
        # an event's job is its spec (the job id is read from it when the table is built), its kind
        # a one-byte code (``_kinds``, decoded when the table is built): a byte an event, not a pointer
        self._events: dict[str, list | array] = {"time": array("d"), "job": [], "kind": array("B"),
                                                 "gpus_before": array("d"), "gpus_after": array("d"),
                                                 "overhead_s": array("d")}
        e = self._events   # their appends, bound once: the recorder's hot path is one event per change
        self._append_event = tuple(e[k].append for k in ("time", "job", "kind", "gpus_before", "gpus_after",
                                                         "overhead_s"))
        self._kind_code: dict[str, int] = {}   # event kind -> its code, in the order kinds first came
        self._kinds: list[str] = []            # code -> event kind
        self._nodes: dict[str, list] = {"time": [], "node": [], "up": []}
        self.states: list[JobState] = []
        self.unfinished: list[dict] = []
        self.watchers: list = []
        self.end_time = 0.0
        self._seg: dict = {}        # job -> (since, {gpu type: GPUs held}) of its current allocation
        # gpu type -> {job: GPU-seconds} of its past allocations: one dict per type, not one per job
        self._by_type: dict[str, dict[str, float]] = {}
        # a row per ended job (and, at the end of the run, per unfinished one), at its trace index
        # (or in the order jobs ended, ``EndedAt``): the numbers of its JobState (``Ended``), 8
        # bytes or fewer each, instead of the state; grown ahead in zeros (``_grow``)
        self._cols = {name: array(code) for name, code in _COLUMNS}
        self._row_cols = tuple(self._cols.values())   # grown in place: these stay the columns
        self._jobs = len(jobs) if _indices_are_rows(jobs) else None
        self._written = 0   # rows written (the next row, where rows go in the order jobs end)
        self._faults: dict[int, tuple] = {}        # row -> (FaultState, ckpt_next) of the rows that have one
        self._gpu_s: dict[str, array] = {}         # gpu type -> GPU-seconds per row
        # its rows read this recorder
        self._Ended = type("Ended", (Ended if self._jobs is not None else EndedAt,), {"__slots__": (), "_rec": self})
        self._rows = np.zeros(0, dtype=np.int64)   # each job's row, in the trace's order (``finish``)

    # --- during the run (hot path: appends only)
    def sample(self, now: float, running: int, pending: int) -> None:
        """The timeline's row at ``now``: a row per change of the values, not per call. A row's
        values hold until the next row, so one that repeats the row before it carries nothing and
        is not kept (a decision that changed nothing); a second call at the same instant replaces
        that instant's row (the last one counts), which is dropped if it then repeats the row before."""
        t = self._t
        n = len(t)
        if n and t[-1] == now:
            if n > 1 and self._repeats(n - 2, running, pending):
                del t[-1], self._used[-3:], self._running[-1], self._pending[-1]
            else:
                self._used[-3:] = array("d", self.cluster.used)
                self._running[-1], self._pending[-1] = running, pending
        elif not n or not self._repeats(n - 1, running, pending):
            t.append(now)
            self._used.extend(self.cluster.used)
            self._running.append(running)
            self._pending.append(pending)
        for fn in self.watchers:
            fn(now)

    def _repeats(self, row: int, running: int, pending: int) -> bool:
        """Whether timeline row ``row`` holds the values a sample now would (the cluster's use, exactly)."""
        if self._running[row] != running or self._pending[row] != pending:
            return False
        used, k = self._used, 3 * row
        g, c, m = self.cluster.used
        return used[k] == g and used[k + 1] == c and used[k + 2] == m

    def watch(self, fn) -> None:
        """Call ``fn(now)`` after every timeline sample (every decision and release): a hook for
        tools that inspect the engine's state as it runs (the conformance suite, reports)."""
        self.watchers.append(fn)

    def event(self, now: float, st: JobState, kind: str, lost: float, gpus_before: float | None = None,
              gpus_after: float | None = None) -> None:
        """Record a change of job ``st`` (its state already changed): the event's row, and the job's
        GPU-seconds per GPU type (its last allocation closed at ``now``, its new one opened)."""
        time, job, kinds, before, after, overhead_s = self._append_event
        spec = st.spec
        time(now)
        job(spec)
        code = self._kind_code.get(kind)
        kinds(self._new_kind(kind) if code is None else code)
        gpus = st.gpus
        before(gpus if gpus_before is None else gpus_before)
        after(gpus if gpus_after is None else gpus_after)
        overhead_s(lost)
        # GPU-seconds per GPU type, in the event's step (one per change: a call fewer each)
        job_id = spec.job_id
        last = self._seg.pop(job_id, None)
        if last is not None:
            since, held = last
            by_type = self._by_type
            for t, g in held.items():
                acc = by_type.get(t)
                if acc is None:
                    acc = by_type[t] = {}
                acc[job_id] = acc.get(job_id, 0.0) + g * (now - since)
        alloc = st.allocation
        if kind != "finish" and alloc:
            held, roles, one = {}, spec.roles, self._one_type
            for name, nodes in alloc.items():
                r = roles[0]
                g = (r if r.name == name else spec.role(name)).gpu   # the first role needs no search
                if one is not None:   # every node of one GPU type: the same sum, in the same order, without
                    if nodes:         # a node's type read and a dict lookup and store per node
                        s = held.get(one, 0.0)
                        for count in nodes.values():
                            s += g * count
                        held[one] = s
                    continue
                types = self.cluster.gpu_type
                for node, count in nodes.items():
                    t = types[node]
                    held[t] = held.get(t, 0.0) + g * count
            self._seg[job_id] = (now, held)

    def _new_kind(self, kind: str) -> int:
        code = self._kind_code[kind] = len(self._kinds)   # a handful of kinds: 256 is far off
        self._kinds.append(kind)
        return code

    @property
    def event_rows(self) -> int:
        """Events recorded so far (the last one's row is ``event_rows - 1``)."""
        return len(self._events["time"])

    def amend_overhead(self, row: int, seconds: float) -> None:
        """Set the ``overhead_s`` of event ``row``: the testbed measures what a change cost once
        the job trains again, after the event was recorded at the decision."""
        self._events["overhead_s"][row] = seconds

    def node(self, now: float, node: int, up: bool) -> None:
        self._nodes["time"].append(now)
        self._nodes["node"].append(node)
        self._nodes["up"].append(up)

    def ended(self, st: JobState) -> "Ended":
        """Job ``st`` has ended (its last event recorded): its numbers become a row of the
        recorder's columns, and the returned ``Ended`` reads them there, so that the engine can
        hold it in the state's place and let the state go (a 1M-job run holds a million ended jobs)."""
        row = st.spec.index if self._jobs is not None else self._written
        self._written += 1
        if row >= len(self._cols["status"]):
            self._grow(row + 1)
        tally = st.tally   # read once: JobState's forwarding properties cost a call each
        # one store per column, in _COLUMNS' order, written out: a loop over (column, value) pairs
        # costs a tuple, a zip and an iteration per job (a million-job run ends a million)
        (progress, service, first_start, end_time, overhead_s, overhead_gpu_s, waited, preemptions, rescales,
         migrations, resizes, failures, status, stop_reason) = self._row_cols
        progress[row], service[row], waited[row] = st.progress, st.service, st.waited
        start, end = st.first_start, st.end_time   # _or_nan written out: two calls a job fewer
        first_start[row], end_time[row] = (_NAN if start is None else start), (_NAN if end is None else end)
        if tally is not None:   # without one (a job that never stopped or reshaped) its counts and costs are
            # zero, as the row holds them already: rows are grown in zeros and each is written once
            overhead_s[row], overhead_gpu_s[row] = tally.overhead_s, tally.overhead_gpu_s
            preemptions[row], rescales[row], migrations[row] = tally.preemptions, tally.rescales, tally.migrations
            resizes[row], failures[row] = tally.resizes, tally.failures
        # codes by position in _STATUSES and _STOPS (as _STATUS_CODE gives them): an Enum's hash is a Python call
        status[row], stop_reason[row] = _STATUSES.index(st.status), _STOPS.index(st.stop_reason)
        if st.fault is not None or st.ckpt_next is not None:
            self._faults[row] = (st.fault, st.ckpt_next)
        job, gpu_s = st.spec.job_id, self._gpu_s
        for t, per_job in self._by_type.items():   # its allocations are closed: GPU-seconds per type
            col = gpu_s.get(t)
            if col is None:
                col = self._gpu_s_column(t)
            col[row] = per_job.pop(job, 0.0)   # (0 in the types it never held)
        return self._Ended(st.spec) if self._jobs is not None else self._Ended(st.spec, row)

    def _grow(self, rows: int) -> None:
        """Room for ``rows`` rows at least, in zeros: a quarter more at a time (up to the job
        count, when rows are the jobs' indices), so that growing costs little a row."""
        have = len(self._cols["status"])
        add = max(rows - have, have // 4, 64)
        if self._jobs is not None:
            add = max(min(add, self._jobs - have), rows - have)
        for col in (*self._cols.values(), *self._gpu_s.values()):
            col.frombytes(bytes(col.itemsize * add))

    def _gpu_s_column(self, gpu_type: str) -> array:
        col = self._gpu_s.get(gpu_type)
        if col is None:
            col = self._gpu_s[gpu_type] = array("d", bytes(8 * len(self._cols["status"])))
        return col

    def finish(self, states: Iterable[JobState], end_time: float, reason=None) -> None:
        """The run is over: jobs still pending or running become unfinished, each with the reason
        ``reason(state)`` gives (for summary.json); every job is then a row of the columns.
        ``states``: each job's ``Ended`` (or, for a job that never ended, its state), in the trace's order."""
        self.end_time = end_time
        self.unfinished = []
        self.states = sorted(states, key=lambda s: s.spec.index)
        rows = np.empty(len(self.states), dtype=np.int64)
        for i, st in enumerate(self.states):
            if isinstance(st, Ended):
                rows[i] = st._row
                continue
            if st.status in (Status.PENDING, Status.RUNNING):
                self.unfinished.append({"job_id": st.spec.job_id, "status": st.status.value,
                                        "reason": reason(st) if reason else st.status.value})
                st.status = Status.UNFINISHED
            open_since, held = self._seg.get(st.spec.job_id, (end_time, {}))
            row = rows[i] = self.ended(st)._row   # the state stays: it holds what it held at the end
            for t, g in held.items():   # its allocation still open at the end of the run
                self._gpu_s_column(t)[row] += g * max(end_time - open_since, 0.0)
        self._rows = rows

    def column(self, name: str) -> np.ndarray:
        """A recorded column (``_COLUMNS``) of every job, in the trace's order, after ``finish``."""
        return np.frombuffer(self._cols[name], dtype=_NP[name])[self._rows] if len(self._rows) \
            else np.zeros(0, _NP[name])

    def _spec_column(self, get, dtype=np.float64) -> np.ndarray:
        return np.fromiter((get(s.spec) for s in self.states), dtype=dtype, count=len(self.states))

    # --- tables (from the columns, after ``finish``)
    def jobs(self) -> pa.Table:
        specs = [s.spec for s in self.states]
        f64 = lambda a: arrow.array(a, pa.float64())  # noqa: E731
        i32 = lambda name: arrow.array(self.column(name), pa.int32())  # noqa: E731
        first, end = self.column("first_start"), self.column("end_time")
        submit = self._spec_column(lambda s: s.submit_time)
        gpus: dict = {}   # roles -> GPUs at the request: a few distinct per trace
        num_gpus = np.fromiter((gpus[s.roles] if s.roles in gpus else gpus.setdefault(s.roles, s.num_gpus)
                                for s in specs), dtype=np.float64, count=len(specs))
        service = self.column("service")
        return pa.table({
            "job_id": arrow.array([s.job_id for s in specs], pa.string()),
            "tenant": arrow.array([s.tenant for s in specs], pa.string()),
            "user": arrow.array([s.user for s in specs], pa.string()),
            "model": arrow.array([s.model for s in specs], pa.string()),
            "profile": arrow.array([s.profile for s in specs], pa.string()),
            "num_gpus": f64(num_gpus),
            "duration_alone": arrow.array([s.duration for s in specs], pa.float64()),  # run alone at its request
            "submit_time": f64(submit),
            "first_start": _nullable(first),
            "end_time": _nullable(end),
            "jct": _nullable(end - submit),
            "queueing_delay": _nullable(first - submit),
            "waiting_time": f64(self.column("waited")),   # pending, after preemptions too
            "gpu_seconds": f64(service),
            "gpu_hours": f64(service / 3600.0),
            "progress": f64(self.column("progress") / self._spec_column(lambda s: s.total_work)),
            "preemptions": i32("preemptions"),
            "rescales": i32("rescales"),
            "resizes": i32("resizes"),
            "migrations": i32("migrations"),
            "failures": i32("failures"),
            "overhead_s": f64(self.column("overhead_s")),
            "overhead_gpu_s": f64(self.column("overhead_gpu_s")),
            "status": arrow.array([_STATUSES[c].value for c in self.column("status").tolist()], pa.string()),
            **self.peer_columns(specs, end),
            **self.fault_columns(specs),
        })

    def gpu_seconds_by_type(self) -> dict[str, np.ndarray]:
        """GPU-seconds each job held on each GPU type (allocations only, up to the end of the
        run), in the trace's order, after ``finish``."""
        return {t: np.frombuffer(col, dtype=np.float64)[self._rows] for t, col in self._gpu_s.items()}

    def peer_columns(self, specs: list, end: np.ndarray) -> dict:
        """Deadlines (absolute s: met, slack = deadline - end) and the GPU types a job ran on."""
        dl = [s.deadline for s in specs]
        d, has, met = self._deadlines()
        done = ~np.isnan(end)
        types = sorted(self.gpu_seconds_by_type().items())
        code = np.zeros(len(specs), dtype=np.int64)   # bit k: the job held type k
        for k, (_, v) in enumerate(types):
            code |= (v > 0).astype(np.int64) << k
        names = {c: "+".join(t for k, (t, _) in enumerate(types) if c >> k & 1) or None for c in np.unique(code).tolist()}
        return {
            "deadline": arrow.array(dl, pa.float64()),
            "deadline_met": arrow.masked(met, has, pa.bool_()),
            "deadline_slack": arrow.masked(np.where(has & done, d - end, 0.0), has & done, pa.float64()),
            "gpu_types": arrow.array([names[c] for c in code.tolist()], pa.string()),
        }

    def _deadlines(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each job's deadline (NaN: none), whether it has one, and whether it finished by it."""
        d = self._spec_column(lambda s: _or_nan(s.deadline))
        end = self.column("end_time")
        has = ~np.isnan(d)
        met = has & ~np.isnan(end)
        met[met] = end[met] <= d[met] + 1e-9
        return d, has, met

    def peer_summary(self, start: float, end: float) -> dict:
        """The deadline-satisfactory ratio (ElasticFlow §6: jobs with a deadline that finish by
        it, over jobs with a deadline; unfinished jobs miss) and GPU use per GPU type."""
        _, has, met = self._deadlines()
        with_dl, met = int(has.sum()), int(met.sum())
        # summed in the trace's order, as one job after another (sum's rounding, not numpy's pairwise one)
        used = {t: _sum(v) for t, v in self.gpu_seconds_by_type().items()}
        cap: dict[str, float] = {}
        for t, g in zip(self.cluster.gpu_type, self.cluster.capacity[:, 0]):
            cap[t] = cap.get(t, 0.0) + float(g)
        span = end - start
        return {
            "jobs_with_deadline": with_dl,
            "deadline_ratio": met / with_dl if with_dl else None,
            "gpu_seconds_by_type": {t: used.get(t, 0.0) for t in sorted(cap)},
            "gpu_util_by_type": {t: (used.get(t, 0.0) / (cap[t] * span) if cap[t] > 0 and span > 0 else None)
                                 for t in sorted(cap)},
        }

    def _fault_rows(self) -> list[tuple[int, FaultState]]:
        """(position in the trace's order, FaultState) of the jobs that have one, in that order."""
        if not self._faults:
            return []
        where = np.empty(len(self._cols["status"]), dtype=np.int64)
        where[self._rows] = np.arange(len(self._rows))
        return sorted((int(where[row]), f) for row, (f, _) in self._faults.items() if f is not None)

    def fault_columns(self, specs: list) -> dict:
        """Failures by cause, progress lost to them (fraction of the job's work, seconds of
        training, GPU-seconds) and the time from each failure until training again
        (simulator/faults.py)."""
        n = len(specs)
        by = {c: np.zeros(n, dtype=np.int32) for c in FAILURE_CAUSES}
        lost = {k: np.zeros(n) for k in ("lost_work", "lost_s", "lost_gpu_s", "recover_s")}
        for i, f in self._fault_rows():
            for c in FAILURE_CAUSES:
                by[c][i] = (f.failed_by or {}).get(c, 0)
            work = specs[i].total_work
            lost["lost_work"][i] = f.lost_iterations / work if work else 0.0
            lost["lost_s"][i], lost["lost_gpu_s"][i], lost["recover_s"][i] = f.lost_s, f.lost_gpu_s, f.recover_s
        return {**{f"failures_{c}": arrow.array(by[c], pa.int32()) for c in FAILURE_CAUSES},
                **{k: arrow.array(v, pa.float64()) for k, v in lost.items()}}

    def fault_summary(self) -> dict:
        """Completion rate (finished / all jobs), jobs failed, failures by cause, work lost (GPU-
        seconds, and in jobs' worth: the sum of lost fractions) and the mean time to recover."""
        status = self.column("status")
        n = len(status)
        faults = self._fault_rows()   # a job without a FaultState lost nothing: its zeros add nothing
        by: dict[str, int] = {c: 0 for c in FAILURE_CAUSES}
        for _, f in faults:
            for c, k in (f.failed_by or {}).items():
                by[c] = by.get(c, 0) + k
        recoveries = sum(f.recoveries for _, f in faults)
        work = [self.states[i].spec.total_work for i, _ in faults]
        zero = 0.0 if n else 0   # what sum over every job starts from: a float once it adds one
        return {
            "completion_rate": int((status == _STATUS_CODE[Status.FINISHED]).sum()) / n if n else None,
            "jobs_failed": int((status == _STATUS_CODE[Status.FAILED]).sum()),
            "failures": sum(by.values()),
            "failures_by_cause": by,
            "lost_gpu_s": sum((f.lost_gpu_s for _, f in faults), zero),
            "lost_s": sum((f.lost_s for _, f in faults), zero),
            "lost_work_jobs": sum((f.lost_iterations / w for (_, f), w in zip(faults, work) if w),
                                  0.0 if any(s.spec.total_work for s in self.states) else 0),
            "recover_s_mean": sum(f.recover_s for _, f in faults) / recoveries if recoveries else None,
        }

    def timeline(self) -> pa.Table:
        used = _floats(self._used).reshape(-1, 3)
        total = self.cluster.total
        util = np.divide(used, total, out=np.zeros_like(used), where=total > 0)
        f64 = lambda a: arrow.array(a, pa.float64())  # noqa: E731
        return pa.table({
            "time": arrow.array(_floats(self._t), pa.float64()),
            "gpu_used": f64(used[:, 0]), "cpu_used": f64(used[:, 1]), "mem_used": f64(used[:, 2]),
            "gpu_util": f64(util[:, 0]), "cpu_util": f64(util[:, 1]), "mem_util": f64(util[:, 2]),
            "running": arrow.array(np.frombuffer(self._running, dtype=np.int32).copy(), pa.int32()),
            "pending": arrow.array(np.frombuffer(self._pending, dtype=np.int32).copy(), pa.int32()),
        })

    def events(self) -> pa.Table:
        e = self._events
        return pa.table({
            "time": arrow.array(_floats(e["time"]), pa.float64()), "job_id": arrow.array([s.job_id for s in e["job"]], pa.string()),
            "kind": arrow.decoded(np.frombuffer(e["kind"], dtype=np.uint8), self._kinds),
            "gpus_before": arrow.array(_floats(e["gpus_before"]), pa.float64()),
            "gpus_after": arrow.array(_floats(e["gpus_after"]), pa.float64()),
            "overhead_s": arrow.array(_floats(e["overhead_s"]), pa.float64()),
        })

    def summary(self) -> dict:
        status = self.column("status")
        done = status == _STATUS_CODE[Status.FINISHED]
        submit = self._spec_column(lambda s: s.submit_time)
        end_time = self.column("end_time")
        jct = (end_time - submit)[done]
        queue = (self.column("first_start") - submit)[done]
        slowdown = jct / self._spec_column(lambda s: _or_nan(s.duration))[done] if done.any() else jct
        n = len(status)
        start = float(submit.min()) if n else 0.0
        ended = (status == _STATUS_CODE[Status.FINISHED]) | (status == _STATUS_CODE[Status.FAILED])
        n_ended = int(ended.sum())
        end = (float(end_time[ended].max()) if n_ended else start) if n_ended == n else self.end_time
        stats = lambda a, p: float(np.percentile(a, p)) if len(a) else None  # noqa: E731
        # sums in the trace's order, one job after another, as Python's sum adds them
        total = lambda name: _sum(self.column(name))  # noqa: E731
        return {
            "jobs": n,
            "jobs_finished": int(done.sum()),
            "jobs_unfinished": n - n_ended,
            "jct_mean": float(jct.mean()) if len(jct) else None,
            "jct_median": stats(jct, 50),
            "jct_p95": stats(jct, 95),
            "jct_p99": stats(jct, 99),
            "slowdown_mean": float(slowdown.mean()) if len(slowdown) else None,
            "slowdown_p95": stats(slowdown, 95),
            "queueing_delay_mean": float(queue.mean()) if len(queue) else None,
            "queueing_delay_p95": stats(queue, 95),
            "makespan": end - start,
            **{f"{r}_util_mean": u for r, u in zip(("gpu", "cpu", "mem"), self._mean_util(start, end))},
            "preemptions": total("preemptions"),
            "rescales": total("rescales"),
            "migrations": total("migrations"),
            "overhead_s": total("overhead_s"),
            "overhead_gpu_s": total("overhead_gpu_s"),
            "sim_end_time": self.end_time,
            **self.peer_summary(start, end),
            **self.fault_summary(),
            "unfinished_jobs": self.unfinished[:UNFINISHED_LISTED],
            **efficiency(self, start, end),
        }

    def _mean_util(self, start: float, end: float) -> list[float | None]:
        """Time-weighted mean of used/capacity over [start, end]: the areas summed a slice of rows at a
        time, row after row as ``(used * dt).sum(axis=0)`` adds them, without a copy of the timeline."""
        if end <= start or not self._t:
            return [None, None, None]
        t = np.frombuffer(self._t, dtype=np.float64)
        used = np.frombuffer(self._used, dtype=np.float64).reshape(-1, 3)
        area = np.zeros((1, 3))
        for i in range(0, len(t), _SLICE):
            times = np.clip(t[i:i + _SLICE + 1] if i + _SLICE < len(t) else np.append(t[i:], end), start, end)
            area = np.add.reduce(np.vstack([area, used[i:i + _SLICE] * np.diff(times)[:, None]]), axis=0)[None, :]
        total = self.cluster.total
        return [float(a / (c * (end - start))) if c > 0 else None for a, c in zip(area[0], total)]

    # --- output
    def write(self, run_dir: str | os.PathLike, meta: dict | None = None) -> dict:
        out = Path(run_dir)
        out.mkdir(parents=True, exist_ok=True)
        # one table at a time where it can be: the events are written and let go before the rest is built
        atomic_write(out / "events.parquet", lambda p: pq.write_table(self.events(), p))
        jobs, timeline = self.jobs(), self.timeline()
        rho = finish_time_fairness(jobs, timeline, self.cluster.total[0])
        jobs = jobs.append_column("ftf_rho", arrow.array(rho, pa.float64(), nan_is_null=True))
        tenants = tenant_summary(jobs)
        for name, table in (("jobs", jobs), ("timeline", timeline), ("tenants", tenants)):
            atomic_write(out / f"{name}.parquet", lambda p, t=table: pq.write_table(t, p))
        summary = {**self.summary(), **extra_summary(jobs, timeline, self.cluster.total)}
        if meta is not None:
            atomic_write(out / "run.json", lambda p: Path(p).write_text(json.dumps(meta, indent=2, default=str)))
        atomic_write(out / "summary.json", lambda p: Path(p).write_text(json.dumps(summary, indent=2)))
        return summary


_SLICE = 1 << 16   # rows a summary reads into Python objects at a time (choice: bounded memory, few slices)


def _sum(values: np.ndarray):
    """``sum(values.tolist())``: Python's sum, one value after another (numpy's sums pairwise,
    which rounds differently), a slice at a time."""
    total = 0
    for i in range(0, len(values), _SLICE):
        total = sum(values[i:i + _SLICE].tolist(), total)
    return total


def _nullable(values: np.ndarray) -> pa.Array:
    """A float64 column whose NaN are nulls (times a job never reached), zeros under them as
    ``arrow.array`` writes under a None."""
    valid = ~np.isnan(values)
    return arrow.masked(np.where(valid, values, 0.0), valid, pa.float64())


def _floats(column: array) -> np.ndarray:
    """A recorded ``array('d')`` column as float64 numbers (a copy: recording may go on)."""
    return np.frombuffer(column, dtype=np.float64).copy() if len(column) else np.zeros(0)


# --- derived metrics: fairness, per-tenant summaries, the busy window (docs/outputs.md)

def jobs_in_system(timeline: pa.Table, at: np.ndarray) -> np.ndarray:
    """Integral of (running + pending jobs) from the first sample to each time in ``at``."""
    t = arrow.to_numpy(timeline["time"])
    n = (arrow.to_numpy(timeline["running"]) + arrow.to_numpy(timeline["pending"])).astype(np.float64)
    if len(t) == 0:
        return np.zeros(len(at))
    cum = np.concatenate([[0.0], np.cumsum(n[:-1] * np.diff(t))])
    i = np.clip(np.searchsorted(t, at, side="right") - 1, 0, len(t) - 1)
    return cum[i] + n[i] * np.maximum(np.asarray(at) - t[i], 0.0)


def finish_time_fairness(jobs: pa.Table, timeline: pa.Table, total_gpus: float) -> np.ndarray:
    """Finish-time fairness rho per job (NaN for unfinished jobs): JCT in the shared cluster over
    the JCT it would have had alone on a 1/N share of the cluster (Themis, Mahajan et al.,
    NSDI'20; the same rho Gavel, OSDI'20, and Shockwave, NSDI'23, report).

    N is the time-average number of jobs in the system (running or pending, the job included)
    over the job's lifetime [submit, end]. Alone on 1/N of the cluster the job gets
    total_gpus / N GPUs; if that is less than it asks for it is time-shared (as in Gavel's
    isolated throughput), so its isolated JCT is ``duration_alone * max(1, gpus * N / total)``.
    rho <= 1: the job did at least as well as with its fair share; rho > 1: worse."""
    submit = arrow.to_numpy(jobs["submit_time"])
    end = arrow.to_numpy(jobs["end_time"]).astype(np.float64)   # None -> NaN
    done = ~np.isnan(end)
    rho = np.full(len(submit), np.nan)
    if not done.any() or total_gpus <= 0:
        return rho
    s, e = submit[done], end[done]
    life = e - s
    area = jobs_in_system(timeline, e) - jobs_in_system(timeline, s)
    n = np.maximum(np.divide(area, life, out=np.ones_like(life), where=life > 0), 1.0)
    gpus = arrow.to_numpy(jobs["num_gpus"])[done]
    alone = arrow.to_numpy(jobs["duration_alone"])[done] * np.maximum(1.0, gpus * n / total_gpus)
    rho[done] = np.divide(life, alone, out=np.full(len(life), np.nan), where=alone > 0)
    return rho


def tenant_summary(jobs: pa.Table) -> pa.Table:
    """One row per tenant (jobs without one: tenant null, last): jobs, finished, mean/p95 JCT,
    mean waiting time, GPU-hours, mean and max finish-time fairness rho."""
    tenant = jobs["tenant"].to_pylist()
    keys = sorted({t for t in tenant if t is not None}) + ([None] if None in tenant else [])
    code = {k: i for i, k in enumerate(keys)}
    group = np.array([code[t] for t in tenant], dtype=np.int64)
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(keys) + 1))
    col = {c: arrow.to_numpy(jobs[c]).astype(np.float64)[order]
           for c in ("jct", "waiting_time", "gpu_hours", "ftf_rho")}
    fin_all = (np.array(jobs["status"].to_pylist(), dtype=object) == Status.FINISHED.value)[order]
    stat = lambda a, f: float(f(a)) if len(a) else None  # noqa: E731
    rows = []
    for k, lo, hi in zip(keys, bounds[:-1], bounds[1:]):
        fin = fin_all[lo:hi]
        part = {c: v[lo:hi] for c, v in col.items()}
        rows.append({"tenant": k, "jobs": int(hi - lo), "jobs_finished": int(fin.sum()),
                     "jct_mean": stat(part["jct"][fin], np.mean),
                     "jct_p95": stat(part["jct"][fin], lambda a: np.percentile(a, 95)),
                     "waiting_time_mean": stat(part["waiting_time"][fin], np.mean),
                     "gpu_hours": float(part["gpu_hours"].sum()),
                     "ftf_rho_mean": stat(part["ftf_rho"][fin], np.mean),
                     "ftf_rho_max": stat(part["ftf_rho"][fin], np.max)})
    schema = pa.schema([("tenant", pa.string()), ("jobs", pa.int64()), ("jobs_finished", pa.int64()),
                        *[(c, pa.float64()) for c in ("jct_mean", "jct_p95", "waiting_time_mean", "gpu_hours",
                                                      "ftf_rho_mean", "ftf_rho_max")]])
    return pa.table({f.name: arrow.array([r[f.name] for r in rows], f.type) for f in schema})


def extra_summary(jobs: pa.Table, timeline: pa.Table, total) -> dict:
    """Summary keys derived from the tables: total waiting time (after preemptions too),
    GPU-hours, fairness, and utilization over the busy window, the time with at least one job
    in the system (None where the cluster has none of a resource)."""
    fin = np.array(jobs["status"].to_pylist(), dtype=object) == Status.FINISHED.value
    wait = arrow.to_numpy(jobs["waiting_time"])[fin]
    rho = arrow.to_numpy(jobs["ftf_rho"])[fin]
    rho = rho[~np.isnan(rho)]
    t = arrow.to_numpy(timeline["time"])
    busy = (arrow.to_numpy(timeline["running"]) + arrow.to_numpy(timeline["pending"])) > 0
    dt = np.diff(t)
    out = {"waiting_time_mean": float(wait.mean()) if len(wait) else None,
           "waiting_time_p95": float(np.percentile(wait, 95)) if len(wait) else None,
           "gpu_hours": float(np.nansum(arrow.to_numpy(jobs["gpu_hours"]))),
           "ftf_rho_mean": float(rho.mean()) if len(rho) else None,
           "ftf_rho_max": float(rho.max()) if len(rho) else None,
           "ftf_unfair_fraction": float((rho > 1.0 + 1e-9).mean()) if len(rho) else None,
           "busy_time": float(dt[busy[:-1]].sum()) if len(t) > 1 else 0.0}
    for r, c in zip(("gpu", "cpu", "mem"), total):
        used = arrow.to_numpy(timeline[f"{r}_used"])
        area = float((used[:-1] * dt)[busy[:-1]].sum()) if len(t) > 1 else 0.0
        out[f"{r}_util_busy"] = area / (c * out["busy_time"]) if c > 0 and out["busy_time"] > 0 else None
    return out


def atomic_write(path: Path, write) -> None:
    """Write through ``write(tmp_path)`` then rename, so ``path`` is whole or absent. A failed
    write is an ``OutputError`` naming ``path`` (the OS names no file for a write past a
    file-size limit or onto a full disk)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(str(tmp))
        os.replace(tmp, path)
    except OSError as e:
        if isinstance(e, OutputError):
            raise
        raise OutputError(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def format_summary(summary: dict) -> str:
    """The short table printed at the end of a run."""
    rows = [
        ("jobs finished", f"{summary['jobs_finished']} / {summary['jobs']}"
                          + (f" ({summary['jobs_failed']} failed)" if summary.get("jobs_failed") else "")),
        ("JCT mean / median (s)", _pair(summary["jct_mean"], summary["jct_median"])),
        ("JCT p95 / p99 (s)", _pair(summary["jct_p95"], summary["jct_p99"])),
        ("slowdown mean / p95", _pair(summary["slowdown_mean"], summary["slowdown_p95"], "{:,.2f}")),
        ("queueing delay mean (s)", _num(summary["queueing_delay_mean"])),
        *([("waiting time mean (s)", _num(summary["waiting_time_mean"]))] if "waiting_time_mean" in summary else []),
        ("makespan (s)", _num(summary["makespan"])),
        ("GPU / CPU / mem util", " / ".join(_pct(summary[f"{r}_util_mean"]) for r in ("gpu", "cpu", "mem"))),
        *([("GPU util (busy window)", _pct(summary["gpu_util_busy"])),
           ("fairness rho mean / max", _pair(summary["ftf_rho_mean"], summary["ftf_rho_max"], "{:,.2f}"))]
          if "gpu_util_busy" in summary else []),
        ("preemptions / rescales", f"{summary['preemptions']} / {summary['rescales']}"),
        ("overhead (s)", _num(summary["overhead_s"])),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _num(x, fmt: str = "{:,.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _pair(a, b, fmt: str = "{:,.1f}") -> str:
    return f"{_num(a, fmt)} / {_num(b, fmt)}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


EXACT_SIZES = 256   # choice: t(p*) is searched at every size up to 256 tasks (beyond any job of the
SIZE_STEP = 2 ** (1 / 16)   # papers' testbeds), then in steps of ~4.4%: a 100,000-GPU job costs ~230
                            # rate evaluations, not 100,000 (each over up to 12,500 nodes)


def _sizes(top: int) -> list[int]:
    """The task counts t(p*) is searched over: all up to ``EXACT_SIZES``, then geometric steps,
    and ``top`` itself."""
    sizes = list(range(1, min(top, EXACT_SIZES) + 1))
    k = float(EXACT_SIZES)
    while k < top:
        k *= SIZE_STEP
        sizes.append(min(int(round(k)), top))
    return sizes


def efficiency(rec: Recorder, start: float, end: float) -> dict:
    """EDL's and SideCar's elasticity metrics.

    ``gpu_efficiency_mean``: time-weighted mean over busy GPUs of t(p)/t(p*), a job's per-GPU
    throughput at its size p over its best (EDL §1 fn 1, §6.3; the best searched over ``_sizes``); ``cluster_efficiency_mean``: the
    same summed per GPU with idle GPUs at 0, over all GPUs (EDL Fig. 12). Both need the run's
    speed model (``rec.speed``) and cover single-role GPU jobs (sizes packed on the fewest nodes).
    ``overhead_ratio``: time lost to reshaping (scale, rescale, migrate; not starts or resumes) over
    the jobs' total run time (first start to end), SideCar Table VIII; ``scale_out_events`` / ``scale_in_events``: SideCar Fig. 11's adding and
    removing events."""
    ev, code = rec._events, rec._kind_code   # kinds are one-byte codes (Recorder._kinds)
    kinds = ev["kind"]
    out = {"scale_out_events": kinds.count(code["scale_out"]) if "scale_out" in code else 0,
           "scale_in_events": kinds.count(code["scale_in"]) if "scale_in" in code else 0}
    ran = rec.column("end_time") - rec.column("first_start")   # NaN where a job never started or never ended
    ran = _sum(ran[~np.isnan(ran)])
    reshaping_codes = {code[k] for k in ("scale_out", "scale_in", "rescale", "migrate") if k in code}
    reshaping = sum(o for k, o in zip(kinds, ev["overhead_s"]) if k in reshaping_codes)
    out["overhead_ratio"] = reshaping / ran if ran > 0 else None
    speed = getattr(rec, "speed", None)
    out["gpu_efficiency_mean"] = out["cluster_efficiency_mean"] = None
    if speed is None or end <= start:
        return out
    per_node = max(float(rec.cluster.capacity[:, 0].max(initial=1.0)), 1.0)

    def rate(spec, role, k: int) -> float:
        nodes = max(1, int(np.ceil(k * role.gpu / per_node)))
        per, extra = divmod(k, nodes)
        return speed.rate(spec, {role.name: {i: per + (i < extra) for i in range(nodes) if per + (i < extra)}})

    def eff(spec, gpus: float) -> float | None:
        if len(spec.roles) != 1 or spec.roles[0].gpu <= 0 or gpus <= 0:
            return None
        role = spec.roles[0]
        n = int(round(gpus / role.gpu))
        top = max(role.max_count, role.count, n)
        t_best = max(rate(spec, role, k) / k for k in _sizes(top))
        return rate(spec, role, n) / (n * t_best) if t_best > 0 and n > 0 else None

    # busy GPUs and efficiency-weighted GPUs change only at events. Per event (in time order) the
    # GPUs and efficiency x GPUs the job counts with before (``old``) and after it (``new``); the
    # running sums and the areas under them are then numpy's cumulative sums, which add one value
    # after another as a Python loop does (not pairwise): the same figures to the bit
    # eff worked out once per key: jobs of one profile, batch and request (the build's shared roles
    # object: no roles hash an event) share their speeds; a profile-less job has its own
    known: dict[tuple, float | None] = {}
    held: dict[str, tuple[float, float]] = {}   # job -> (GPUs, efficiency x GPUs) it counts with
    busy = weighted = busy_area = eff_area = 0.0
    t_prev = start
    for t, specs, g in _by_time(ev["time"], ev["job"], ev["gpus_after"]):
        old_g, old_w, new_g, new_w = [], [], [], []
        for spec, gpus in zip(specs, g.tolist()):
            job_id = spec.job_id
            old = held.pop(job_id, None)
            old_g.append(0.0 if old is None else old[0])
            old_w.append(0.0 if old is None else old[1])
            e = None
            if gpus > 0:
                k = (spec.profile, spec.batch_size, id(spec.roles), gpus) if spec.profile else (job_id, gpus)
                e = known.get(k, known)
                if e is known:
                    e = known[k] = eff(spec, gpus)
            if e is None:
                new_g.append(0.0)
                new_w.append(0.0)
            else:
                held[job_id] = (gpus, e * gpus)
                new_g.append(gpus)
                new_w.append(e * gpus)
        t = np.minimum(np.maximum(t, start), end)
        dt = np.diff(t, prepend=t_prev)
        t_prev = float(t[-1])
        busy, busy_area = _areas(busy, busy_area, old_g, new_g, dt)
        weighted, eff_area = _areas(weighted, eff_area, old_w, new_w, dt)
    gpu_area = float(rec.cluster.total[0]) * (end - start)
    out["gpu_efficiency_mean"] = eff_area / busy_area if busy_area > 0 else None
    out["cluster_efficiency_mean"] = eff_area / gpu_area if gpu_area > 0 else None
    return out


def _areas(level: float, area: float, minus: list, plus: list, dt: np.ndarray) -> tuple[float, float]:
    """A level that each event first lowers by ``minus`` then raises by ``plus``, and the area under
    it, each event's ``dt`` after the previous one: the loop ``area += level * dt; level -= minus;
    level += plus`` over the events, from (``level``, ``area``), in numpy's sequential cumulative sums."""
    steps = np.empty(2 * len(plus) + 1)
    steps[0] = level
    steps[1::2] = minus
    np.negative(steps[1::2], out=steps[1::2])
    steps[2::2] = plus
    levels = np.cumsum(steps)   # levels[2i]: the level before event i
    parts = np.empty(len(plus) + 1)
    parts[0] = area
    np.multiply(levels[0:-1:2], dt, out=parts[1:])
    return float(levels[-1]), float(np.cumsum(parts)[-1])


def _by_time(times: array, jobs: list, gpus: array, chunk: int = 1 << 12):
    """The events in time order (ties in the order recorded: a stable sort, as ``sorted`` by time), a
    chunk at a time: (times, job specs, GPUs after) arrays and list of up to ``chunk`` events, so
    that no copy of a long run's events is held at once (choice: 4,096 events, about 0.5 MB of Python
    floats in the efficiency loop's per-event lists and numpy arrays under glibc's 128 KiB mmap
    threshold; numpy's per-chunk cost is then a few ms a run)."""
    t, g = np.frombuffer(times, dtype=np.float64), np.frombuffer(gpus, dtype=np.float64)   # read, not copied
    if not (t[1:] < t[:-1]).any():   # recorded as the clock went, so in order already: no sort to hold
        for i in range(0, len(t), chunk):
            yield t[i:i + chunk], jobs[i:i + chunk], g[i:i + chunk]
        return
    order = np.argsort(t, kind="stable")
    for i in range(0, len(order), chunk):
        idx = order[i:i + chunk]
        yield t[idx], [jobs[k] for k in idx.tolist()], g[idx]
