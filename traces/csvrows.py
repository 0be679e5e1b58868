"""Row-by-row CSV reading with errors that name the file, the line and the field."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterator

from traces.schema import TraceError


def rows(path: Path, required: tuple[str, ...], delimiter: str = ",") -> Iterator[tuple[int, dict]]:
    """Yield ``(line number, row)`` of a headed CSV; a missing column or a short row is an error."""
    with open(path, newline="") as f:
        reader = csv.reader(f, delimiter=delimiter)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise TraceError(f"{path}: empty file, expected a header with {', '.join(required)}") from None
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(f"{path}: line 1: missing column(s) {', '.join(missing)} (header: {','.join(header)})")
        for values in reader:
            line = reader.line_num
            if not values or values == [""]:
                continue
            if len(values) != len(header):
                raise TraceError(f"{path}: line {line}: expected {len(header)} fields, got {len(values)} "
                                 "(truncated or malformed row)")
            yield line, dict(zip(header, values))


def number(path: Path, line: int, field: str, value: str, *, minimum: float | None = None,
           positive: bool = False, integer: bool = False) -> float:
    """Parse a numeric field; reject text, NaN/inf and values out of range with a clear error."""
    where = f"{path}: line {line}: field {field!r}"
    try:
        x = float(value)
    except ValueError:
        raise TraceError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(x):
        raise TraceError(f"{where}: {value!r} is not a finite number")
    if integer and not x.is_integer():
        raise TraceError(f"{where}: {value!r} is not a whole number")
    if positive and x <= 0:
        raise TraceError(f"{where}: must be > 0, got {value!r}")
    if minimum is not None and x < minimum:
        raise TraceError(f"{where}: must be >= {minimum:g}, got {value!r}")
    return x


