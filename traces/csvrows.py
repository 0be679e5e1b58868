"""Row-by-row CSV reading with errors that name the file, the line and the field."""

from __future__ import annotations

import csv
import gzip
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Mapping

from clustersim.traces.collect import BadRows
from clustersim.traces.schema import TraceError


def rows(path: Path, required: tuple[str, ...], delimiter: str = ",", *, header: list[str] | None = None,
         bad: BadRows | None = None) -> Iterator[tuple[int, dict]]:
    """Yield ``(line number, row)`` of a CSV; a missing column or a short row is an error.

    ``header`` names the columns of a headerless file (PAI, Google); otherwise line 1 does.
    A malformed row goes to ``bad`` (raised, or skipped as a reject).
    """
    bad = bad or BadRows()
    with open_text(path) as f:
        reader = csv.reader(f, delimiter=delimiter)
        if header is None:
            try:
                header = [h.strip() for h in next(reader)]
            except StopIteration:
                raise TraceError(f"{path}: empty file, expected a header with {', '.join(required)}") from None
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceError(f"{path}: line 1: missing column(s) {', '.join(missing)} "
                                 f"(header: {','.join(header)})", line=1)
        try:
            for values in reader:
                line = reader.line_num
                if not values or values == [""]:
                    continue
                if len(values) != len(header):
                    bad.reject(TraceError(f"{path}: line {line}: expected {len(header)} fields "
                                          f"({','.join(header)}), got {len(values)} (truncated or malformed row)",
                                          line=line), str(path), values)
                    continue
                yield line, dict(zip(header, values))
        except csv.Error as e:
            raise TraceError(f"{path}: line {reader.line_num}: malformed CSV ({e})", line=reader.line_num) from None


def open_text(path: Path):
    """A text file, gzip-compressed when its name ends in .gz (the Google trace shards)."""
    return gzip.open(path, "rt", newline="") if path.suffix == ".gz" else open(path, newline="")


def read_header(path: Path) -> list[str]:
    """The column names of a headerless table, from its one-line ``.header`` file (PAI 2020)."""
    try:
        text = path.read_text().strip()
    except OSError as e:
        raise TraceError(f"{path}: cannot read header file ({e.strerror})") from None
    names = [h.strip() for h in text.split(",")]
    if not text or "" in names:
        raise TraceError(f"{path}: header file must hold one line of comma-separated column names")
    return names


def number(path: Path, line: int, field: str, value: str, *, minimum: float | None = None,
           positive: bool = False, integer: bool = False) -> float:
    """Parse a numeric field; reject text, NaN/inf and values out of range with a clear error."""
    where = f"{path}: line {line}: field {field!r}"
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TraceError(f"{where}: {value!r} is not a number", line=line, field=field) from None
    if not math.isfinite(x):
        raise TraceError(f"{where}: {value!r} is not a finite number", line=line, field=field)
    if integer and not x.is_integer():
        raise TraceError(f"{where}: {value!r} is not a whole number", line=line, field=field)
    if positive and x <= 0:
        raise TraceError(f"{where}: must be > 0, got {value!r}", line=line, field=field)
    if minimum is not None and x < minimum:
        raise TraceError(f"{where}: must be >= {minimum:g}, got {value!r}", line=line, field=field)
    return x


def optional_number(path: Path, line: int, field: str, value: str | None, **checks) -> float | None:
    """``number`` for a field that may be empty (empty means unknown)."""
    if value is None or str(value).strip() == "":
        return None
    return number(path, line, field, value, **checks)


def text(path: Path, line: int, field: str, value: str | None) -> str:
    """A required non-empty text field, stripped."""
    s = (value or "").strip()
    if not s:
        raise TraceError(f"{path}: line {line}: field {field!r}: empty, a value is required", line=line, field=field)
    return s


def choice(path: Path, line: int, field: str, value: str, mapping: Mapping[str, str]) -> str:
    """Map an enumerated field (a status) through ``mapping``; an unknown value is an error."""
    s = value.strip()
    if s not in mapping:
        raise TraceError(f"{path}: line {line}: field {field!r}: unknown value {s!r} "
                         f"(expected one of {', '.join(mapping)})", line=line, field=field)
    return mapping[s]


TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def timestamp(path: Path | str, line: int | None, field: str, value: str) -> float:
    """Seconds of a ``YYYY-MM-DD HH:MM:SS`` wall-clock time (read as UTC: only differences matter).

    ``path`` only names the place in an error: a file, or a longer location such as a JSON job."""
    try:
        s = value.strip()
        # fromisoformat is much faster; strptime still takes unpadded fields ("2017-9-4 1:02:03")
        t = datetime.fromisoformat(s) if len(s) == 19 and s[10] == " " else datetime.strptime(s, TIME_FORMAT)
        return t.replace(tzinfo=timezone.utc).timestamp()
    except (AttributeError, ValueError):
        where = f"{path}: line {line}" if line is not None else str(path)
        raise TraceError(f"{where}: field {field!r}: {value!r} is not a time of the form {TIME_FORMAT}",
                         line=line, field=field) from None


class Ordered:
    """Checks that a column the format keeps sorted (arrival, event time) never goes back."""

    def __init__(self, path: Path, field: str):
        self.path, self.field, self.last = path, field, -math.inf

    def check(self, line: int, value: float) -> None:
        if value < self.last:
            raise TraceError(f"{self.path}: line {line}: field {self.field!r}: times not sorted "
                             f"({value:g} after {self.last:g})", line=line, field=self.field)
        self.last = value
