"""Row-by-row CSV reading with errors that name the file, the line and the field."""

from __future__ import annotations

import codecs
import csv
import gzip
import math
import re
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from clustersim.traces.collect import BadRows
from clustersim.traces.schema import TraceError


MAX_LINE = 1 << 20  # characters of one line: a longer one is not a trace row (binary, wrong file)
_BAD_TEXT = re.compile("[\x00\udc80-\udcff]")  # NUL, or a byte that is not UTF-8 (surrogate-escaped)
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
              (codecs.BOM_UTF16_BE, "UTF-16"))
READ_ERRORS = (OSError, EOFError, zlib.error)  # a folder, a damaged gzip, a disk error


def rows(path: Path, required: tuple[str, ...], delimiter: str = ",", *, header: list[str] | None = None,
         bad: BadRows | None = None) -> Iterator[tuple[int, dict]]:
    """Yield ``(line number, row)`` of a CSV; a missing column or a short row is an error.

    ``header`` names the columns of a headerless file (PAI, Google); otherwise line 1 does.
    A malformed row (wrong field count, bytes that are not UTF-8) goes to ``bad`` (raised, or
    skipped as a reject); an unreadable file or header is always an error.
    """
    bad = bad or BadRows()
    with open_text(path) as f:
        src = Lines(path, f)
        reader = csv.reader(src, delimiter=delimiter)
        try:
            if header is None:
                header = _header_row(path, reader, src, required)
            last, data = reader.line_num, 0
            for values in reader:
                line, first, last = reader.line_num, last + 1, reader.line_num
                if not values or values == [""]:
                    continue
                data += 1
                if src.undecodable >= first:
                    bad.reject(src.text_error(src.undecodable), str(path), values)
                    continue
                if len(values) != len(header):
                    bad.reject(TraceError(f"{path}: line {line}: expected {len(header)} fields "
                                          f"({','.join(header)}), got {len(values)} (truncated or malformed row)",
                                          line=line), str(path), values)
                    continue
                yield line, dict(zip(header, values))
            if data == 0:
                raise no_rows(path)
        except csv.Error as e:
            raise TraceError(f"{path}: line {reader.line_num}: malformed CSV ({e})", line=reader.line_num) from None


PLAIN_CHUNK = 1 << 16   # characters ``plain_blocks`` reads at a time (choice: ~1,000 ITP rows; their fields as
                        # Python strings are ~30x that, so a file given up on partway costs ~2 MB)


class NotPlain(Exception):
    """A file ``plain_blocks`` leaves to ``rows``: its reader reads it row by row instead."""


def plain_blocks(path: Path, delimiter: str = ",") -> Iterator[dict[str, list[str]]]:
    """A CSV file's data lines as columns (header name -> the lines' fields, raw), a block of
    lines at a time, while every line is plain: no quote, no bad byte, no blank or over-long line,
    the header's field count on each line, a header of distinct names. csv.reader splits such a
    line at each delimiter, so these are the fields ``rows`` yields, in the same order. Raises
    NotPlain at the first line that is not plain, and for a file that cannot be read through or
    holds no data line: ``rows`` then reads it, naming the line at fault."""
    longest = min(MAX_LINE - 1, csv.field_size_limit())   # a line's characters before its line break
    header, rest, data = None, "", 0
    try:
        with open_text(path) as f:
            while rest is not None:
                chunk = f.read(PLAIN_CHUNK)
                text = rest + chunk
                if chunk:   # its whole lines now, the last one's start with the next chunk
                    cut = text.rfind("\n") + 1
                    text, rest = text[:cut], text[cut:]
                    if len(rest) > longest:
                        raise NotPlain
                else:
                    rest = None   # the end: the last line, if it has no line break
                if not text:
                    continue
                if "\r" in text:
                    text = text.replace("\r\n", "\n")   # csv.reader ends a line at \r\n as at \n
                if '"' in text or "\r" in text or _BAD_TEXT.search(text):
                    raise NotPlain
                lines = text.split("\n")
                if lines[-1] == "":
                    lines.pop()
                if "" in lines or max(map(len, lines)) > longest:
                    raise NotPlain
                if header is None:
                    header = [h.strip() for h in lines.pop(0).split(delimiter)]
                    if len(set(header)) != len(header):
                        raise NotPlain
                rows = [line.split(delimiter) for line in lines]
                if any(len(r) != len(header) for r in rows):
                    raise NotPlain
                if rows:
                    data += len(rows)
                    yield dict(zip(header, map(list, zip(*rows))))
    except (TraceError, *READ_ERRORS):
        raise NotPlain from None
    if not data:
        raise NotPlain


def no_rows(path: Path) -> TraceError:
    """A file with no data row at all (empty, or a header only): never an empty trace in silence."""
    return TraceError(f"{path}: no data rows (the file is empty or holds a header only)")


def _header_row(path: Path, reader, src: "Lines", required: tuple[str, ...]) -> list[str]:
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise TraceError(f"{path}: empty file, expected a header with {', '.join(required)}") from None
    if src.undecodable:
        raise src.text_error(src.undecodable)
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(f"{path}: line 1: missing column(s) {', '.join(missing)} "
                         f"(header: {','.join(header)[:200]})", line=1)
    return header


class Lines:
    """The lines of an open text file, numbered, each at most ``MAX_LINE`` characters.

    ``undecodable`` is the number of the last line holding a NUL or a byte that is not UTF-8
    (0: none yet), so that a reader rejects the row it falls in; a read error (a damaged gzip
    member, a disk error) becomes a TraceError naming the line.
    """

    def __init__(self, path: Path, f):
        self.path, self.f, self.line, self.undecodable = path, f, 0, 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        try:
            text = self.f.readline(MAX_LINE + 1)
        except READ_ERRORS as e:
            raise TraceError(f"{self.path}: line {self.line + 1}: cannot read the file ({e})", line=self.line + 1) from None
        if not text:
            raise StopIteration
        self.line += 1
        if len(text) > MAX_LINE:
            raise TraceError(f"{self.path}: line {self.line}: longer than {MAX_LINE:,} characters (not a text "
                             "trace of this format?)", line=self.line)
        if _BAD_TEXT.search(text):
            self.undecodable = self.line
        return text

    def numbered(self) -> Iterator[tuple[int, str]]:
        """``(line number, text)`` of each line (for line-oriented formats: Gavel, JSON lines)."""
        for text in self:
            yield self.line, text

    def text_error(self, line: int) -> TraceError:
        return text_error(self.path, line)


def text_error(path: Path, line: int) -> TraceError:
    return TraceError(f"{path}: line {line}: not UTF-8 text (a NUL or an undecodable byte); "
                      "trace files must be UTF-8", line=line)


def bad_text(text: str) -> bool:
    """Whether a line read by ``open_text`` holds a NUL or a byte that is not UTF-8."""
    return _BAD_TEXT.search(text) is not None


def open_text(path: Path):
    """A trace file as UTF-8 text (a UTF-8 BOM skipped), gzip-compressed when its name ends in
    .gz (the Google trace shards). Bytes that are not UTF-8 are kept as surrogate escapes, so
    that the row holding them is rejected with its line number (``Lines``); a folder, a
    UTF-16/32 file or an unreadable file is an error naming the file."""
    if path.is_dir():
        raise TraceError(f"{path}: is a folder, expected a trace file")
    gz = path.suffix == ".gz"
    try:
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
            head = f.read(4)
    except READ_ERRORS as e:
        raise TraceError(f"{path}: cannot read the file ({e})") from None
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            raise TraceError(f"{path}: line 1: the file is {name}-encoded; trace files must be UTF-8 "
                             "(convert it, e.g. iconv -f UTF-16 -t UTF-8)", line=1)
    kw = dict(encoding="utf-8-sig", errors="surrogateescape", newline="")
    return gzip.open(path, "rt", **kw) if gz else open(path, **kw)


def read_header(path: Path) -> list[str]:
    """The column names of a headerless table, from its one-line ``.header`` file (PAI 2020)."""
    with open_text(path) as f:
        text = next(Lines(path, f), "").strip()
    names = [h.strip() for h in text.split(",")]
    if not text or "" in names or bad_text(text):
        raise TraceError(f"{path}: header file must hold one line of comma-separated UTF-8 column names")
    return names


def number(path: Path, line: int, field: str, value: str, *, minimum: float | None = None,
           positive: bool = False, integer: bool = False, maximum: float | None = None) -> float:
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
    if maximum is not None and x > maximum:
        raise TraceError(f"{where}: must be <= {maximum:g}, got {value!r}", line=line, field=field)
    return x


def numbers(values: list[str], *, minimum: float | None = None, positive: bool = False, integer: bool = False,
            maximum: float | None = None) -> np.ndarray:
    """``number`` over a column of fields: their values (float64); NotPlain when any of them fails
    a check of ``number`` (the reader then goes row by row, and ``number`` names it)."""
    try:
        x = np.fromiter(map(float, values), dtype=np.float64, count=len(values))   # number()'s parse
    except ValueError:
        raise NotPlain from None
    ok = np.isfinite(x)
    if integer:
        ok &= np.floor(x) == x
    if positive:
        ok &= x > 0
    if minimum is not None:
        ok &= x >= minimum
    if maximum is not None:
        ok &= x <= maximum
    if not ok.all():
        raise NotPlain
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
