"""Trace readers: each format is one module, registered by name, returning the canonical
job table (``traces.schema.JOB_TABLE``).

A reader is ``fn(path, *, bad, **options) -> pa.Table``; ``bad`` (a ``BadRows``) carries the
``on_bad_row`` rule and collects rejects. Options named in ``register(files=...)`` are
further input files of the format (a task table, a machine list): they are resolved like
``path`` and take part in the cache key.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa

from clustersim.traces.collect import BadRows
from clustersim.traces.schema import TraceError, validate

DATA = Path(__file__).parent / "data"
BUNDLED = "bundled:"

Reader = Callable[..., pa.Table]


@dataclass(frozen=True)
class Format:
    name: str
    read: Reader
    files: tuple[str, ...]  # options that name further input files
    module: str


_READERS: dict[str, Format] = {}
_MODULES = ("tiresias", "elasticflow", "gavel", "pollux", "philly_pollux", "openb", "helios", "philly",
            "alibaba_pai2020", "google")


def register(name: str, files: tuple[str, ...] = ()):
    """Decorator: make ``fn(path, *, bad, **options) -> job table`` the reader of format ``name``."""
    def deco(fn: Reader) -> Reader:
        _READERS[name] = Format(name, fn, tuple(files), fn.__module__)
        return fn
    return deco


def formats() -> list[str]:
    _import_all()
    return sorted(_READERS)


def get(fmt: str) -> Format:
    _import_all()
    if fmt not in _READERS:
        raise TraceError(f"unknown trace format {fmt!r}; known: {', '.join(sorted(_READERS))}")
    return _READERS[fmt]


def resolve(path: str | Path) -> Path:
    """A path as given, or ``bundled:<rel>`` for a file shipped in ``traces/data``."""
    s = str(path)
    p = DATA / s[len(BUNDLED):] if s.startswith(BUNDLED) else Path(s).expanduser()
    if not p.exists():
        raise TraceError(f"{s}: no such trace file ({p})")
    return p


def prepare(fmt: str, path: str | Path, options: dict) -> tuple[Format, Path, dict]:
    """The format, the resolved path and ``options`` with the format's file options resolved;
    an unknown format, a missing file or an option the reader lacks is an error."""
    f = get(fmt)
    p = resolve(path)
    check_options(f, options)
    return f, p, {k: (resolve(v) if k in f.files and v is not None else v) for k, v in options.items()}


def read(fmt: str, path: str | Path, *, on_bad_row: str = "error", bad: BadRows | None = None,
         **options) -> pa.Table:
    """Read a trace of format ``fmt`` into a validated job table.

    With ``on_bad_row="skip"`` bad rows are left out; pass ``bad`` to get them back.
    """
    bad = bad or BadRows(on_bad_row)
    f, p, resolved = prepare(fmt, path, options)
    return validate(f.read(p, bad=bad, **resolved), str(p))


def check_options(fmt: Format, options: dict) -> None:
    known = [k for k in inspect.signature(fmt.read).parameters if k not in ("path", "bad")]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TraceError(f"format {fmt.name!r} has no option(s) {', '.join(unknown)}; "
                         f"its options: {', '.join(known) or 'none'}")


def _import_all() -> None:
    for m in _MODULES:
        importlib.import_module(f"clustersim.traces.{m}")
