"""Converted traces cached as Parquet, keyed by the source files' content and the options.

The key hashes the format, every input file's bytes (SHA-256), the load options, the
canonical schema and the source code of the reader and of the helpers it parses with, so a
changed file, option or reader makes a new entry. The rejects and drop counts of the load
travel in the file's metadata, so a cached load reports exactly what the first one did.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clustersim.traces.collect import BadRows, Reject
from clustersim.traces.schema import JOB_TABLE

ENV = "CLUSTERSIM_CACHE"
META = b"clustersim.load"
SHARED = ("clustersim.traces.csvrows", "clustersim.traces.collect", "clustersim.traces.schema")  # the parsing code every reader runs


def default_dir() -> Path:
    """``$CLUSTERSIM_CACHE``, else ``~/.cache/clustersim/traces``."""
    return Path(os.environ.get(ENV) or Path.home() / ".cache" / "clustersim" / "traces").expanduser()


def file_digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files (names and bytes, in name order)."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        if path.is_dir():
            h.update(str(p.relative_to(path)).encode() + b"\0")
        with open(p, "rb") as f:
            h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()


def key(fmt: str, module: str, files: dict[str, Path], options: dict, on_bad_row: str) -> str:
    code = b"".join(Path(importlib.import_module(m).__file__).read_bytes() for m in (module, *SHARED))
    parts = {"format": fmt, "files": {k: file_digest(p) for k, p in sorted(files.items())},
             "options": options, "on_bad_row": on_bad_row, "schema": JOB_TABLE.to_string(),
             "reader": hashlib.sha256(code).hexdigest()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def load(directory: Path, k: str) -> tuple[pa.Table, BadRows] | None:
    path = directory / f"{k}.parquet"
    if not path.exists():
        return None
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid):
        return None  # a damaged entry is rebuilt
    meta = json.loads((table.schema.metadata or {}).get(META, b"{}"))
    bad = BadRows(meta.get("on_bad_row", "error"))
    bad.rejects = [Reject(**r) for r in meta.get("rejects", [])]
    bad.dropped.update(meta.get("dropped", {}))
    return table.replace_schema_metadata(None), bad


def store(directory: Path, k: str, table: pa.Table, bad: BadRows) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    meta = {"on_bad_row": bad.mode, "rejects": [r.as_dict() for r in bad.rejects], "dropped": dict(bad.dropped)}
    path = directory / f"{k}.parquet"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table.replace_schema_metadata({META: json.dumps(meta).encode()}), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
