"""Run directory names and a sweep's manifest, as clustersim.sweep writes them and clustersim.collect
reads them: ``<policy>_<trace>_s<seed>_<hash>``, ``hash`` a short digest of the run's own overrides
(``hydra.*`` and ``progress`` left out: they do not change results); ``sweep.json`` lists every run
a sweep will make by its overrides and hash. No Hydra here: collecting runs needs none.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

SWEEP_FILE = "sweep.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_NO_EFFECT = ("hydra.", "hydra/", "+hydra", "progress=", "+progress=")   # overrides that change no result


def safe(value, limit: int = 40) -> str:
    """``value`` as one path component: letters, digits, ``_ . -`` only, no leading dot."""
    s = _UNSAFE.sub("-", str(value)).strip(".-")
    return s[:limit] or "x"


def result_overrides(overrides) -> list[str]:
    """The overrides that can change a run's results, sorted."""
    return sorted(o for o in (str(x) for x in overrides or ()) if not o.startswith(_NO_EFFECT))


def run_hash(overrides) -> str:
    """8 hex digits identifying a run by its overrides (order does not matter)."""
    return hashlib.sha1("\n".join(result_overrides(overrides)).encode()).hexdigest()[:8]


def run_name(policy, trace, seed, overrides) -> str:
    return f"{safe(policy)}_{safe(trace)}_s{safe(seed)}_{run_hash(overrides)}"


def hash_of(run_dir: Path) -> str | None:
    """The hash a run directory's name ends with, if it has one."""
    tail = run_dir.name.rsplit("_", 1)[-1]
    return tail if re.fullmatch(r"[0-9a-f]{8}", tail) else None


def expected(sweep_dir: Path) -> dict[str, list[str]] | None:
    """hash -> overrides of every run the sweep in ``sweep_dir`` was asked for (None: no manifest).
    A manifest that is not one (not JSON, another shape) is a ``ValueError`` naming the file."""
    f = Path(sweep_dir) / SWEEP_FILE
    if not f.is_file():
        return None
    try:
        return {str(r["hash"]): [str(o) for o in r["overrides"]] for r in json.loads(f.read_text())["runs"]}
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        raise ValueError(f"{f}: not a sweep manifest ({type(e).__name__}: {e})") from None


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def output_digests(run_dir: Path) -> dict[str, str]:
    """SHA-256 of each output file of a run directory (run.json and hidden files aside), by name:
    run.json records them and clustersim-collect checks them, so a deleted, truncated or
    swapped-in output is reported, never collected."""
    return {p.name: file_sha256(p) for p in sorted(Path(run_dir).iterdir())
            if p.is_file() and p.name != "run.json" and not p.name.startswith(".")}
