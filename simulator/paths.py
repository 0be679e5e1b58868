"""Where files live: data shipped with the package (``bundled:<path>`` names a file under
``traces/data``) and the cache of parsed traces and fitted profiles. Every layer resolves paths
here, so the simulator reads bundled data without importing the trace readers."""

from __future__ import annotations

import os
from pathlib import Path

from clustersim.simulator.errors import TraceError

DATA = Path(__file__).parent.parent / "traces" / "data"   # clustersim/traces/data, installed or checked out
BUNDLED = "bundled:"
CACHE_ENV = "CLUSTERSIM_CACHE"


def resolve(path: str | Path) -> Path:
    """A path as given, or ``bundled:<rel>`` for a file shipped in ``traces/data``."""
    s = str(path)
    p = DATA / s[len(BUNDLED):] if s.startswith(BUNDLED) else Path(s).expanduser()
    if not p.exists():
        raise TraceError(f"{s}: no such trace file ({p})")
    return p


def cache_dir() -> Path:
    """``$CLUSTERSIM_CACHE``, else ``~/.cache/clustersim/traces``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "clustersim" / "traces").expanduser()
