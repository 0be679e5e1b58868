"""Arrow columns built from numpy buffers, for the run's output tables.

``pa.array`` on Python objects imports pandas (~0.3 s) at its first call, only to ask whether
they are pandas objects; a run never hands it any. ``array`` builds the same columns from
numpy buffers with ``pa.Array.from_buffers`` (Arrow's columnar layout: a validity bitmap,
least significant bit first, then the values; for strings int32 offsets and the UTF-8 bytes),
which needs no pandas. ``to_numpy`` reads numeric columns back the same way (pyarrow's own
``to_numpy`` goes through its pandas conversion, which imports pandas too). tests/test_arrow.py
checks both against pyarrow's.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Iterable

import numpy as np
import pyarrow as pa

from clustersim.simulator.job import RoleSpec

_NUMPY = {pa.float64(): np.float64, pa.float32(): np.float32, pa.int64(): np.int64, pa.int32(): np.int32,
          pa.int16(): np.int16, pa.int8(): np.int8, pa.uint64(): np.uint64, pa.uint32(): np.uint32}
_INT32_MAX = 2**31 - 1


class _Compute:
    """``pyarrow.compute``, imported where a function of it is first used: importing it builds a
    wrapper for every Arrow kernel (~0.07 s, a tenth of a default run, which uses none)."""

    def __getattr__(self, name: str):
        import pyarrow.compute

        return getattr(pyarrow.compute, name)


compute = _Compute()   # ``from clustersim.simulator.arrow import compute as pc``


def array(values: Iterable, type: pa.DataType, nan_is_null: bool = False) -> pa.Array:
    """``pa.array(values, type)`` for a string, bool, integer or floating type: ``None`` is null
    (and NaN too with ``nan_is_null``, as ``pa.array(..., from_pandas=True)``). A value of the
    wrong kind raises TypeError; an integer out of the type's range, OverflowError."""
    if isinstance(values, np.ndarray) and values.dtype != object and type in _NUMPY:
        return _numeric(values, None, type, nan_is_null)
    vals = values.tolist() if isinstance(values, np.ndarray) else list(values)
    n = len(vals)
    valid = np.fromiter((v is not None for v in vals), dtype=bool, count=n)
    has_null = not valid.all()
    if type == pa.string():
        return _strings(vals, valid if has_null else None)
    if type == pa.bool_():
        if any(v is not None and not isinstance(v, (bool, np.bool_)) for v in vals):
            raise TypeError(f"expected bools for a {type} column, got {next(v for v in vals if v is not None)!r}")
        data = np.array([bool(v) for v in vals] if has_null else vals, dtype=bool)
        return _make(type, n, valid if has_null else None, [_bits(data)])
    filled = [0 if v is None else v for v in vals] if has_null else vals
    return _numeric(np.array(filled) if n else np.empty(0, np.float64), valid if has_null else None, type, nan_is_null)


def release_unused() -> None:
    """Give memory that dropped tables and their temporaries left free back to the OS: Arrow's
    pool keeps it for later Arrow allocations (mimalloc, jemalloc), and glibc's heap keeps what
    numpy buffers freed, neither of which a run's Python objects and recorded columns reuse
    (~120 MB and ~190 MB after a 1M-job trace's load and checks; docs/performance.md)."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    global _TRIM
    if _TRIM is False:
        import ctypes

        try:
            _TRIM = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _TRIM = None
    return _TRIM


_TRIM = False   # not looked up yet


def masked(values: np.ndarray, valid: np.ndarray, type: pa.DataType) -> pa.Array:
    """A column of ``values`` (a bool or numeric numpy array) with nulls where ``valid`` is False;
    the values under them are written as they are (``array`` writes 0 or False under a None)."""
    valid = None if valid.all() else valid
    if type == pa.bool_():
        return _make(type, len(values), valid, [_bits(values.astype(bool))])
    return _numeric(values, valid, type, False)


def _numeric(raw: np.ndarray, valid: np.ndarray | None, type: pa.DataType, nan_is_null: bool) -> pa.Array:
    dtype = _NUMPY.get(type)
    if dtype is None:
        raise TypeError(f"no column of type {type}")
    if raw.size and raw.dtype.kind not in ("iu" if pa.types.is_integer(type) else "iuf"):
        raise TypeError(f"expected numbers for a {type} column, got values of {raw.dtype}")
    if pa.types.is_integer(type) and raw.size:
        info = np.iinfo(dtype)
        if raw.min() < info.min or raw.max() > info.max:
            raise OverflowError(f"a value does not fit in {type}")
    data = np.ascontiguousarray(raw, dtype=dtype)
    if nan_is_null and pa.types.is_floating(type):
        nan = np.isnan(data)
        if nan.any():
            valid = ~nan if valid is None else valid & ~nan
    return _make(type, len(data), valid, [pa.py_buffer(data)])


def _strings(vals: list, valid: np.ndarray | None) -> pa.Array:
    try:
        enc = [b"" if v is None else v.encode("utf-8") for v in vals]
    except AttributeError:
        bad = next(v for v in vals if v is not None and not isinstance(v, str))
        raise TypeError(f"expected strings for a string column, got {bad!r}") from None
    return _string_array(np.fromiter(map(len, enc), dtype=np.int64, count=len(enc)), b"".join(enc), valid)


def _string_array(lengths: np.ndarray, data: bytes, valid: np.ndarray | None) -> pa.Array:
    """A string column from its rows' byte lengths and their bytes, one after another."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        raise OverflowError("a string column over 2 GiB needs pa.large_string()")
    return _make(pa.string(), len(lengths), valid, [pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])


def decoded(codes: np.ndarray, labels: list[str]) -> pa.Array:
    """The string column whose row i is ``labels[codes[i]]``, built from buffers in numpy
    (``Array.take`` would import pyarrow.compute, and with it pandas; a Python string per row
    would cost a million objects for a million events)."""
    enc = [s.encode("utf-8") for s in labels]
    lens = np.fromiter(map(len, enc), dtype=np.int64, count=len(enc))
    table = np.zeros((len(enc), max(lens.max(initial=0), 1)), dtype=np.uint8)   # label i's bytes, padded
    for i, b in enumerate(enc):
        table[i, :len(b)] = np.frombuffer(b, dtype=np.uint8)
    row_len = lens[codes]
    data = table[codes][np.arange(table.shape[1]) < row_len[:, None]]   # each row's bytes, in row order
    return _string_array(row_len, data.tobytes(), None)


def _bits(mask: np.ndarray) -> pa.Buffer:
    """Arrow's bit-packed layout: bit i of byte i // 8 is element i (least significant first)."""
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def _make(type: pa.DataType, n: int, valid: np.ndarray | None, buffers: list) -> pa.Array:
    if valid is None:
        return pa.Array.from_buffers(type, n, [None, *buffers], null_count=0)
    return pa.Array.from_buffers(type, n, [_bits(valid), *buffers], null_count=int(n - valid.sum()))


def to_numpy(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``column.to_numpy(zero_copy_only=False)`` for a numeric column, read from its buffers
    (pyarrow's goes through its pandas conversion, which imports pandas): the values, or with
    nulls float64 with NaN for them. Read-only when no copy was needed."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    dtype = _NUMPY.get(column.type)
    if dtype is None:
        raise TypeError(f"no numpy column of type {column.type}")
    parts = []
    for a in chunks:
        validity, data = a.buffers()[:2]
        end = a.offset + len(a)
        values = np.frombuffer(data, dtype=dtype, count=end)[a.offset:] if end else np.empty(0, dtype)
        if a.null_count:
            valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), count=end, bitorder="little")[a.offset:]
            values = np.where(valid.astype(bool), values, np.nan)
        parts.append(values)
    if not parts:
        return np.empty(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def to_bools(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean column as a numpy bool array, read from its bit-packed buffers (nulls read as False)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for a in chunks:
        validity, data = a.buffers()[:2]
        end = a.offset + len(a)
        bits = lambda buf: np.unpackbits(np.frombuffer(buf, dtype=np.uint8), count=end,  # noqa: E731
                                         bitorder="little")[a.offset:].astype(bool)
        values = bits(data) if end else np.empty(0, bool)
        if a.null_count:
            values &= bits(validity)
        parts.append(values)
    return np.concatenate(parts) if parts else np.empty(0, bool)


def role_rows(column: pa.ChunkedArray) -> list[tuple]:
    """Each job's roles (the job table's ``roles`` column) as a tuple of value tuples in
    ``RoleSpec``'s field order, read column by column (no dict per role: a million-job trace
    would hold a million of them at once)."""
    column = column.combine_chunks()
    bounds = column.offsets.to_pylist()   # into the child array of all the table's roles
    base = bounds[0] if bounds else 0
    # the roles of these rows only (a slice's ``values`` are all the table's; ``flatten`` would
    # import pyarrow.compute, which a run that needs no kernel does not load)
    flat = column.values.slice(base, bounds[-1] - base if bounds else 0)
    values = list(zip(*(flat.field(f.name).to_pylist() for f in fields(RoleSpec) if f.init)))
    return [tuple(values[a - base:b - base]) for a, b in zip(bounds, bounds[1:])]
