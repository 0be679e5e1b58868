"""Trace readers: each format is one module, registered by name, returning the canonical
job table (``traces.schema.JOB_TABLE``)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Callable

import pyarrow as pa

from traces.schema import TraceError, validate

DATA = Path(__file__).parent / "data"
BUNDLED = "bundled:"

Reader = Callable[..., pa.Table]
_READERS: dict[str, Reader] = {}
_MODULES = ("tiresias", "elasticflow")


def register(name: str):
    """Decorator: make ``fn(path, **options) -> job table`` the reader of format ``name``."""
    def deco(fn: Reader) -> Reader:
        _READERS[name] = fn
        return fn
    return deco


def formats() -> list[str]:
    _import_all()
    return sorted(_READERS)


def resolve(path: str | Path) -> Path:
    """A path as given, or ``bundled:<rel>`` for a file shipped in ``traces/data``."""
    s = str(path)
    p = DATA / s[len(BUNDLED):] if s.startswith(BUNDLED) else Path(s).expanduser()
    if not p.exists():
        raise TraceError(f"{s}: no such trace file ({p})")
    return p


def read(fmt: str, path: str | Path, **options) -> pa.Table:
    """Read a trace of format ``fmt`` into a validated job table."""
    _import_all()
    if fmt not in _READERS:
        raise TraceError(f"unknown trace format {fmt!r}; known: {', '.join(sorted(_READERS))}")
    p = resolve(path)
    return validate(_READERS[fmt](p, **options), str(p))


def _import_all() -> None:
    for m in _MODULES:
        importlib.import_module(f"traces.{m}")
