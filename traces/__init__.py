"""Trace readers: each format is one module, registered by name, returning the canonical
job table (``traces.schema.JOB_TABLE``).

A reader is ``fn(path, *, bad, **options) -> pa.Table``; ``bad`` (a ``BadRows``) carries the
``on_bad_row`` rule and collects rejects. Options named in ``register(files=...)`` are
further input files of the format (a task table, a machine list): they are resolved like
``path`` and take part in the cache key.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa

from clustersim.simulator.registry import Registry
from clustersim.traces.collect import BadRows
from clustersim.traces.schema import TraceError, validate

DATA = Path(__file__).parent / "data"
BUNDLED = "bundled:"
PKG = "pkg:"

Reader = Callable[..., pa.Table]


@dataclass(frozen=True)
class Format:
    name: str
    read: Reader
    files: tuple[str, ...]  # options that name further input files
    module: str


FORMATS = Registry("trace format", "clustersim.traces", "clustersim.traces")


def register(name: str, files: tuple[str, ...] = ()):
    """Decorator: make ``fn(path, *, bad, **options) -> job table`` the reader of format ``name``."""
    def deco(fn: Reader) -> Reader:
        return FORMATS.register(name, files=tuple(files))(fn)
    return deco


def formats() -> list[str]:
    return FORMATS.names()


def get(fmt: str) -> Format:
    try:
        e = FORMATS.get(fmt)
    except KeyError as err:
        raise TraceError(err.args[0]) from None
    return Format(e.name, e.obj, e.meta["files"], e.obj.__module__)


def resolve(path: str | Path) -> Path:
    """A path as given, ``bundled:<rel>`` for a file shipped in ``traces/data``, or
    ``pkg:<package>/<rel>`` for a file an installed package ships (a plug-in's sample trace)."""
    s = str(path)
    if s.startswith(PKG):
        p = _package_file(s)
    else:
        p = DATA / s[len(BUNDLED):] if s.startswith(BUNDLED) else Path(s).expanduser()
    if not p.exists():
        raise TraceError(f"{s}: no such trace file ({p})")
    return p


def _package_file(s: str) -> Path:
    import importlib.util
    package, _, rel = s[len(PKG):].partition("/")
    try:
        spec = importlib.util.find_spec(package) if package.isidentifier() else None
    except ImportError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise TraceError(f"{s}: no installed package {package!r}")
    return Path(list(spec.submodule_search_locations)[0]) / rel


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
