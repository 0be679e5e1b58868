"""Collecting a reader's jobs row by row, with the ``on_bad_row`` rule.

A reader parses each source row inside ``jobs.row(line, raw)``: any TraceError raised there
either stops the load (``on_bad_row: error``, the default) or is recorded as a reject and
the row left out (``skip``). ``jobs.add`` checks the job (types, ranges, unique id) before
keeping it, so a row is kept whole or not at all. Rows a format's documented rule leaves
out (e.g. openb pods that never ran) are counted in ``dropped`` with their reason: nothing
disappears without a trace in the load report.
"""

from __future__ import annotations

import csv
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from clustersim.traces.schema import Role, TraceError, build_table, check_job, validate

ON_BAD_ROW = ("error", "skip")
NEVER_RAN = ("drop", "keep")  # jobs the trace shows never running: left out (counted) or kept, duration null


def check_never_ran(rule: str) -> None:
    if rule not in NEVER_RAN:
        raise TraceError(f"never_ran must be one of {NEVER_RAN}, got {rule!r}")


KEPT = 100  # rejects a BadRows keeps in memory (the first ones)
SPOOLED = 10_000  # rejects its spool file lists (the first ones; choice: with MAX_TEXT, at most ~20 MB of
                  # rejects whatever the input; 5 MB of bad rows once wrote 285 MB); all are counted
MAX_TEXT = 1000  # characters of a reject's raw row and reason (a garbage "row" can be a megabyte)
REJECT_COLUMNS = ("source", "line", "field", "reason", "raw")


@dataclass(frozen=True, slots=True)
class Reject:
    """A source row left out under ``on_bad_row: skip``."""

    source: str
    line: int | None
    field: str | None
    reason: str
    raw: str

    def as_dict(self) -> dict:
        return asdict(self)


class BadRows:
    """The ``on_bad_row`` rule of one load and what it rejected or dropped.

    Memory and disk stay bounded whatever the input: ``rejected`` counts every reject, ``rejects``
    keeps the first ``KEPT``, and the first ``SPOOLED`` are streamed, as they come, to the CSV file
    ``spool`` (columns ``REJECT_COLUMNS``) where one is given (``listed`` of them).
    """

    def __init__(self, mode: str = "error", spool: Path | None = None):
        if mode not in ON_BAD_ROW:
            raise TraceError(f"on_bad_row must be one of {ON_BAD_ROW}, got {mode!r}")
        self.mode = mode
        self.spool = spool
        self.rejects: list[Reject] = []
        self.rejected = 0
        self.dropped: Counter[str] = Counter()
        self._out = None  # the spool's csv writer, opened at the first reject

    def reject(self, err: TraceError, source: str, raw: object = "", line: int | None = None) -> None:
        """Raise ``err`` (mode error) or record it as a reject (mode skip)."""
        if self.mode == "error":
            raise err
        line = err.line if err.line is not None else line
        r = Reject(source, line, err.field, _clip(str(err)), _clip(_raw_text(raw)))
        self.rejected += 1
        if len(self.rejects) < KEPT:
            self.rejects.append(r)
        if self.spool is not None and self.rejected <= SPOOLED:
            self._writer().writerow([r.source, r.line, r.field, r.reason, r.raw])

    @property
    def listed(self) -> int:
        """Rejects the spool file lists: the first ``SPOOLED``."""
        return min(self.rejected, SPOOLED)

    def drop(self, reason: str, count: int = 1) -> None:
        """Count rows left out by a documented rule of the format (not errors)."""
        self.dropped[reason] += count

    def close(self) -> None:
        """Flush the spool file (every reject so far is then on disk)."""
        if self._out is not None:
            self._out[0].close()
            self._out = None

    def _writer(self):
        if self._out is None:
            f = open(self.spool, "w", newline="", encoding="utf-8", errors="backslashreplace")
            w = csv.writer(f)
            w.writerow(REJECT_COLUMNS)
            self._out = (f, w)
        return self._out[1]


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"... ({len(text) - MAX_TEXT:,} more characters)"


def _raw_text(raw: object) -> str:
    if isinstance(raw, dict):
        return _clip(",".join(f"{k}={v}" for k, v in raw.items()))
    if isinstance(raw, (list, tuple)):
        return _clip("\t".join(map(str, raw)))
    return str(raw)


OPTIONAL = ("tenant", "user", "model", "priority", "deadline", "batch_size", "gpu_type", "attempts", "num_nodes")
_OPTIONAL = frozenset(OPTIONAL)
INT32_FIELDS = ("priority", "batch_size", "num_nodes")
JOB_FIELDS = ("job_id", "submit_time", "duration", "iterations", "roles", "status", "start_time") + OPTIONAL


class Jobs:
    """A reader's jobs, column by column; ``table()`` builds the canonical job table."""

    def __init__(self, source: str | Path, bad: BadRows | None = None, unit: str = "line"):
        self.source = str(source)
        self.unit = unit  # what a source row is called in messages: a CSV line, a JSON job
        self.bad = bad or BadRows()
        self.cols: dict[str, list] = {k: [] for k in JOB_FIELDS}
        self._seen: dict[str, int | None] = {}
        self._line: int | None = None
        self._role_rows: dict[Role, dict] = {}

    @contextmanager
    def row(self, line: int | None, raw: object = ""):
        """Parse one source row; a TraceError inside is raised or recorded as a reject."""
        self._line = line
        try:
            yield
        except TraceError as err:
            self.bad.reject(err, self.source, raw, line)

    def add(self, job_id: str, submit_time: float, roles: list[Role], *, status: str = "unknown",
            duration: float | None = None, iterations: float | None = None, start_time: float | None = None,
            **optional) -> None:
        """Check one job and keep it; raise TraceError naming the file, line and reason."""
        if not optional.keys() <= _OPTIONAL:
            raise TypeError(f"unknown job field(s) {sorted(optional.keys() - _OPTIONAL)}")
        where = f"{self.source}: {self.unit} {self._line}" if self._line is not None else self.source
        if not job_id:
            raise TraceError(f"{where}: field 'job_id': empty job id", field="job_id")
        where = f"{where} (job {job_id!r})"
        if job_id in self._seen:
            first = self._seen[job_id]
            raise TraceError(f"{where}: duplicate job_id (first seen at line {first})", field="job_id")
        check_job(where, submit_time, duration, iterations, status, [self._role_row(r) for r in roles],
                  start_time=start_time,
                  deadline=optional.get("deadline"))
        if start_time is not None and start_time + 1e-9 < submit_time:
            raise TraceError(f"{where}: times out of order: start {start_time:g} s before submission "
                             f"{submit_time:g} s", field="start_time")
        for k in INT32_FIELDS:
            v = optional.get(k)
            if v is not None and not -2**31 <= v < 2**31:
                raise TraceError(f"{where}: field {k!r}: {v:g} is out of range for a 32-bit integer", field=k)
        self._seen[job_id] = self._line
        cols = self.cols
        cols["job_id"].append(job_id)
        cols["submit_time"].append(submit_time)
        cols["roles"].append(roles)
        cols["status"].append(status)
        cols["duration"].append(duration)
        cols["iterations"].append(iterations)
        cols["start_time"].append(start_time)
        for k in OPTIONAL:
            cols[k].append(optional.get(k))

    def _role_row(self, role: Role) -> dict:
        row = self._role_rows.get(role)
        if row is None:
            row = self._role_rows[role] = role.as_row()
        return row

    def __len__(self) -> int:
        return len(self.cols["job_id"])

    def table(self, rebase: bool = False):
        """The job table; ``rebase`` shifts times so that the first submission is at 0 s."""
        cols = self.cols
        if rebase and cols["submit_time"]:
            origin = min(cols["submit_time"])

            def shift(t):
                return None if t is None else t - origin

            cols = {**cols, "submit_time": [t - origin for t in cols["submit_time"]],
                    "start_time": [shift(t) for t in cols["start_time"]],
                    "deadline": [shift(t) for t in cols["deadline"]],
                    "attempts": [None if a is None else [{"start": shift(x["start"]), "end": shift(x["end"])} for x in a]
                                 for a in cols["attempts"]]}
        return build_table(cols)


def checked_table(cols: dict):
    """The job table of columns a reader parsed at once (``JOB_FIELDS`` names; numbers as numpy
    arrays, absent optional ones null) when every job passes what ``Jobs.add`` checks (a
    non-empty id seen once, ``check_job`` as ``schema.validate`` does it, 32-bit integers); else
    None, and the reader reads its rows one by one through ``Jobs``, which names the first bad
    one. (No ``start_time`` here: its order against the submission is a check of ``add`` this
    does not repeat.)"""
    if "start_time" in cols:
        raise ValueError("checked_table: a start_time column is checked row by row (Jobs.add)")
    if not all(cols["job_id"]):
        return None
    for k in INT32_FIELDS:
        v = cols.get(k)
        if v is not None and len(v) and not (-2**31 <= np.min(v) and np.max(v) < 2**31):
            return None
    try:
        return validate(build_table(cols), "")   # check_job's checks, and each id once
    except (OverflowError, TraceError):   # OverflowError: a count no int32 holds (check_job's task limit)
        return None
