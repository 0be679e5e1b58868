"""Converted traces cached as Parquet, keyed by the source files' content and the options.

The key hashes the format, every input file's bytes (SHA-256) — the reader's further files
and companions such as PAI ``.header`` files included —, the load options, the canonical
schema and the source code of the reader and of the helpers it parses with, so a changed
file, option or reader makes a new entry. The drop counts and the first rejects of the load
travel in the file's metadata, all its rejects in ``<key>.rejects.csv`` beside it, so a
cached load reports exactly what the first one did. A damaged entry is rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clustersim.simulator.paths import CACHE_ENV as ENV, cache_dir as default_dir  # noqa: F401  (this module's API)
from clustersim.traces.collect import BadRows, Reject
from clustersim.traces.schema import JOB_TABLE, TraceError

META = b"clustersim.load"
SHARED = ("clustersim.traces.csvrows", "clustersim.traces.collect", "clustersim.traces.schema")  # the parsing code every reader runs


def file_digest(path: Path) -> str:
    """SHA-256 of a file, or of a folder's files (names and bytes, in name order)."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        if path.is_dir():
            h.update(str(p.relative_to(path)).encode() + b"\0")
        st = p.stat()
        h.update(_sha256(str(p.resolve()), st.st_size, st.st_mtime_ns))
    return h.hexdigest()


@functools.lru_cache(maxsize=1024)
def _sha256(path: str, size: int, mtime_ns: int) -> bytes:
    """One file's SHA-256, read once while its size and modification time stay the same: a run
    hashes its trace for the cache key and again for its identity (clustersim.experiment.inputs),
    and a sweep's runs in one process read the same files."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").digest()


def key(fmt: str, module: str, files: dict[str, Path], options: dict, on_bad_row: str) -> str:
    code = b"".join(Path(importlib.import_module(m).__file__).read_bytes() for m in (module, *SHARED))
    parts = {"format": fmt, "files": {k: file_digest(p) for k, p in sorted(files.items())},
             "options": options, "on_bad_row": on_bad_row, "schema": JOB_TABLE.to_string(),
             "reader": hashlib.sha256(code).hexdigest()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (leftovers of dead ones may be removed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_spools(directory: Path, k: str) -> None:
    """Rejects spools of entry ``k`` left by loads that were killed (``.<k>.<pid>.rejects.csv``)."""
    for p in directory.glob(f".{k}.*.rejects.csv"):
        pid = p.name[len(k) + 2:-len(".rejects.csv")]
        if pid.isdigit() and not pid_alive(int(pid)):
            p.unlink(missing_ok=True)


def rejects_path(directory: Path, k: str) -> Path:
    """The entry's rejects, as the CSV ``BadRows`` spools (present when the load rejected rows)."""
    return directory / f"{k}.rejects.csv"


def load(directory: Path, k: str) -> tuple[pa.Table, BadRows] | None:
    """The cached table and what its load rejected and dropped; None when there is no entry or
    it is damaged (unreadable, another schema, bad metadata, rejects file missing): the caller
    then rebuilds it, and ``store`` replaces the damaged files."""
    path = directory / f"{k}.parquet"
    if not path.is_file():
        return None
    try:
        table = pq.ParquetFile(path).read()   # read_table goes through pyarrow.dataset, which imports pandas
        meta = json.loads((table.schema.metadata or {})[META])
        table = table.replace_schema_metadata(None)
        if not table.schema.equals(JOB_TABLE):
            return None
        bad = BadRows(meta["on_bad_row"])
        bad.rejected = int(meta["rejected"])
        bad.rejects = [Reject(**r) for r in meta["kept"]]
        bad.dropped.update({str(reason): int(n) for reason, n in meta["dropped"].items()})
    except Exception:  # noqa: BLE001 - whatever is wrong with a cache file, the source is read again
        return None
    if bad.rejected:
        bad.spool = rejects_path(directory, k)
        if not bad.spool.is_file():
            return None
    return table, bad


def store(directory: Path, k: str, table: pa.Table, bad: BadRows) -> None:
    """Write the entry: the table (rejects kept in memory and drop counts in its metadata) and
    the load's spooled rejects, moved beside it. Both are renamed into place."""
    bad.close()
    meta = {"on_bad_row": bad.mode, "rejected": bad.rejected, "kept": [r.as_dict() for r in bad.rejects],
            "dropped": dict(bad.dropped)}
    path = directory / f"{k}.parquet"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if bad.rejected and bad.spool is not None:
            os.replace(bad.spool, rejects_path(directory, k))
            bad.spool = rejects_path(directory, k)
        pq.write_table(table.replace_schema_metadata({META: json.dumps(meta).encode()}), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def check_dir(directory: Path) -> bool:
    """Before any reading: the cache folder is a folder, made if need be; whether new entries can
    be written there (a read-only cache still serves the entries it has)."""
    if directory.exists() and not directory.is_dir():
        raise TraceError(f"cache.dir {directory}: exists and is not a folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False   # not there and cannot be made: nothing to serve, nothing to store
    return os.access(directory, os.W_OK | os.X_OK)
