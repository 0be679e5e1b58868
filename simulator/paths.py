"""Where files live: data shipped with the package (``bundled:<path>`` names a file under
``traces/data``), files an installed package ships (``pkg:<package>/<path>``, a plug-in's sample
trace) and the cache of parsed traces and fitted profiles. Every layer resolves paths
here, so the simulator reads bundled data without importing the trace readers."""

from __future__ import annotations

import os
from pathlib import Path

from clustersim.simulator.errors import TraceError

DATA = Path(__file__).parent.parent / "traces" / "data"   # clustersim/traces/data, installed or checked out
BUNDLED = "bundled:"
PKG = "pkg:"
CACHE_ENV = "CLUSTERSIM_CACHE"


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


def cache_dir() -> Path:
    """``$CLUSTERSIM_CACHE``, else ``~/.cache/clustersim/traces``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "clustersim" / "traces").expanduser()
