"""The loading pipeline a trace config drives: read (through the cache) → concatenate →
transform, with a report of everything that was rejected, dropped or changed.

A trace config (configs/trace/*.yaml) holds ``format``, ``path`` (one or a list),
``options`` (the reader's, including its further files), ``on_bad_row`` (error | skip),
``cache`` ({enabled, dir}), ``transforms`` (list of steps, see traces.transform),
``prefix_ids`` and ``oversize`` (applied by the experiment once the cluster exists).
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

import pyarrow as pa

from clustersim import traces
from clustersim.simulator.arrow import compute as pc
from clustersim.simulator.params import check_params
from clustersim.traces import cache, synthetic, transform
from clustersim.traces.collect import REJECT_COLUMNS, BadRows, Reject
from clustersim.traces.schema import TraceError, validate

REJECTS_FILE = "trace_rejects.csv"


@dataclass
class LoadReport:
    """What a load did, for the run's metadata (``as_dict``) and its rejects file.

    ``rejects`` holds the first rejects of each source (``collect.KEPT``); all of them are in
    the CSV files ``reject_files`` (the cache entries' rejects, or temporary spools), which
    ``write_rejects`` concatenates without holding them in memory.
    """

    name: str
    format: str
    on_bad_row: str = "error"
    sources: list[dict] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    transforms: list[dict] = field(default_factory=list)
    oversize: dict | None = None
    jobs: int = 0
    rejected: int = 0
    listed: int = 0   # rejects the rejects file lists (the first collect.SPOOLED of each source)
    rejects: list[Reject] = field(default_factory=list)
    reject_files: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "format": self.format, "on_bad_row": self.on_bad_row, "sources": self.sources,
                "rejected": self.rejected, "rejects_file": REJECTS_FILE if self.rejected else None,
                "rejects_listed": self.listed,
                "dropped": self.dropped, "transforms": self.transforms, "oversize": self.oversize, "jobs": self.jobs}

    def write_rejects(self, path: str | Path) -> None:
        """All rejected rows as one CSV (source, line, field, reason, raw) at ``path``."""
        with open(path, "w", newline="", encoding="utf-8") as out:
            out.write(",".join(REJECT_COLUMNS) + "\r\n")
            for src in self.reject_files:
                with open(src, newline="", encoding="utf-8") as f:
                    f.readline()  # each spool's own header
                    shutil.copyfileobj(f, out)


@dataclass(frozen=True)
class TraceConfig:
    """The keys of a trace config and their types (checked before anything is read)."""

    name: str | None = None
    format: str | None = None
    path: str | list[str] | None = None
    options: dict | None = None
    on_bad_row: Literal["error", "skip"] = "error"
    oversize: Literal["error", "drop", "clamp"] = "error"
    cache: dict | None = None
    transforms: list[dict] | None = None
    prefix_ids: bool = False


@dataclass(frozen=True)
class CacheConfig:
    enabled: bool = True
    dir: str | None = None   # null: $CLUSTERSIM_CACHE or ~/.cache/clustersim/traces


def check_config(cfg: Mapping) -> None:
    """A trace config's keys, their types and its reader's options; errors name ``trace.<key>``."""
    check_params(TraceConfig, cfg, "trace.{}")
    check_params(CacheConfig, cfg.get("cache") or {}, "trace.cache.{}")
    fmt = _required(cfg, "format")
    options = dict(cfg.get("options") or {})
    if fmt == "synthetic":
        gen = options.pop("generator", None)
        if not isinstance(gen, str) or gen not in synthetic.GENERATORS:
            raise TraceError(f"trace.options.generator: unknown generator {gen!r}; known: "
                             f"{', '.join(synthetic.GENERATORS)}")
        check_params(synthetic.GENERATORS[gen], options, "trace.options.{}", skip=("rng",))
        return
    paths = cfg.get("path")
    for p in (paths if isinstance(paths, list) else [paths]):
        if p == "":
            raise TraceError("trace.path: an empty path; give the trace file")
    f = traces.get(fmt)
    for k in f.files:
        if options.get(k) is not None and (not isinstance(options[k], str) or not options[k]):
            raise TraceError(f"trace.options.{k}: must be a file path, got {options[k]!r}")
    check_params(f.read, {k: v for k, v in options.items() if k not in f.files}, "trace.options.{}",
                 skip=("path", "bad", *f.files))
    traces.check_options(f, options)


def load(cfg: Mapping, seed: int = 0) -> tuple[pa.Table, LoadReport]:
    """Load the trace a trace config describes; the seed drives random transforms and generators."""
    from clustersim.simulator.rng import component_rng

    check_config(cfg)
    fmt = _required(cfg, "format")
    report = LoadReport(name=str(cfg.get("name") or fmt), format=fmt, on_bad_row=cfg.get("on_bad_row") or "error")
    options = dict(cfg.get("options") or {})
    if fmt == "synthetic":
        table = synthetic.generate(component_rng(seed, "trace.synthetic"), **options)
        report.sources.append({"generator": options.get("generator"), "seed": seed, "jobs": table.num_rows})
    else:
        paths = cfg.get("path")
        paths = list(paths) if isinstance(paths, (list, tuple)) else [paths]
        if not paths or any(p is None for p in paths):
            raise TraceError(f"trace {report.name}: no path given")
        tables = [_read(fmt, p, options, report, cfg.get("cache") or {}) for p in paths]
        table = _concat(tables, paths, bool(cfg.get("prefix_ids")), report.name)
    table, report.transforms = transform.apply(table, list(cfg.get("transforms") or []),
                                               lambda name: component_rng(seed, name))
    report.jobs = table.num_rows
    if table.num_rows == 0:
        raise TraceError(f"trace {report.name}: no jobs left to simulate ({_accounting(report)})")
    return table, report


def _accounting(report: LoadReport) -> str:
    """Where the jobs went: rejects (and the file listing them), drops, transforms."""
    listed = "listed" if report.listed == report.rejected else f"the first {report.listed:,} listed"
    parts = [f"{report.rejected:,} row(s) rejected, {listed} in "
             f"{', '.join(str(p) for p in report.reject_files)}"] if report.rejected else ["no row rejected"]
    parts += [f"{n} dropped: {reason}" for reason, n in report.dropped.items()]
    parts += [f"{t['op']}: {t['jobs_before']} -> {t['jobs_after']} jobs" for t in report.transforms]
    return "; ".join(parts)


def source_files(fmt: str, path, options: dict) -> tuple[traces.Format, Path, dict, dict[str, Path]]:
    """The format, the resolved path, the resolved options, and every file the reader reads for
    ``path`` (the path, its further files, companions such as PAI ``.header`` files) by role."""
    f, p, resolved = traces.prepare(fmt, path, options)
    files = {"path": p, **{k: v for k, v in resolved.items() if k in f.files and v is not None}}
    companions = getattr(importlib.import_module(f.module), "companions", None)
    return f, p, resolved, {**files, **(companions(files) if companions else {})}


def input_files(cfg: Mapping) -> dict[str, Path]:
    """Every file a trace config reads (none for a generator), as ``<path>:<role>`` -> path: what a
    run's identity hashes besides its config (clustersim.experiment.inputs)."""
    if cfg.get("format") == "synthetic":
        return {}
    paths = cfg.get("path")
    out = {}
    for path in (list(paths) if isinstance(paths, (list, tuple)) else [paths]):
        if path is None:
            continue
        for role, file in source_files(cfg["format"], path, dict(cfg.get("options") or {}))[3].items():
            out[f"{path}:{role}"] = file
    return out


def _read(fmt: str, path, options: dict, report: LoadReport, cache_cfg: Mapping) -> pa.Table:
    f, p, resolved, files = source_files(fmt, path, options)
    plain = {k: v for k, v in options.items() if k not in f.files}
    use_cache = cache_cfg.get("enabled", True)
    directory = Path(cache_cfg.get("dir") or cache.default_dir()).expanduser()
    if use_cache:
        writable = cache.check_dir(directory)  # before the (maybe long) read
        k = cache.key(fmt, f.module, files, plain, report.on_bad_row)
        hit = cache.load(directory, k)
        if hit is None and not writable:   # a read-only cache still serves its entries; a miss runs uncached
            _warn(f"trace cache {directory} is not writable: {path} is read without storing it there")
            use_cache = False
    else:
        k = hit = None
    if hit is not None:
        table, bad = hit
    else:
        bad = BadRows(report.on_bad_row, spool=_spool(directory if use_cache else None, k))
        try:
            table = validate(f.read(p, bad=bad, **resolved), str(p))
        except BaseException:
            bad.close()
            bad.spool.unlink(missing_ok=True)
            raise
        bad.close()
        if use_cache:
            try:
                cache.store(directory, k, table, bad)
            except OSError as e:   # a full disk or a file-size limit costs the entry, not the run
                _warn(f"trace cache {directory}: cannot store {path} ({e.strerror or e}); the run goes on uncached")
        elif not bad.rejected:
            bad.spool.unlink(missing_ok=True)
    report.rejected += bad.rejected
    report.listed += bad.listed
    report.rejects.extend(bad.rejects)
    if bad.rejected:
        report.reject_files.append(bad.spool)
    for reason, n in bad.dropped.items():
        report.dropped[reason] = report.dropped.get(reason, 0) + n
    report.sources.append({"path": str(path), "jobs": table.num_rows, "rejected": bad.rejected,
                           "cache": ("hit" if hit is not None else "stored") if use_cache else
                           ("not writable" if k is not None else None),
                           "cache_key": k})
    return table


def _warn(message: str) -> None:
    print(f"clustersim: warning: {message}", file=sys.stderr, flush=True)


def _spool(directory: Path | None, k: str | None) -> Path:
    """Where a load streams its rejects: beside the cache entry it will become, else a temporary file."""
    if directory is not None:
        cache.remove_dead_spools(directory, k)   # a killed load's spool goes when the entry is next built
        return directory / f".{k}.{os.getpid()}.rejects.csv"
    fd, name = tempfile.mkstemp(prefix="clustersim-trace-rejects-", suffix=".csv")
    os.close(fd)
    return Path(name)


def _concat(tables: list[pa.Table], paths: list, prefix_ids: bool, name: str) -> pa.Table:
    if prefix_ids:
        tables = [t.set_column(0, t.schema.field("job_id"),
                               pc.binary_join_element_wise(Path(str(p)).stem, t["job_id"], "/"))
                  for t, p in zip(tables, paths)]
    if len(tables) == 1:
        return tables[0]
    table = pa.concat_tables(tables).combine_chunks()
    ids = table["job_id"]  # each file's table is validated: only ids can clash between files
    if pc.count_distinct(ids).as_py() != len(ids):
        raise TraceError(f"trace {name}: the files share job ids; set prefix_ids: true to prefix each id "
                         "with its file's name")
    return table


def _required(cfg: Mapping, key: str):
    value = cfg.get(key)
    if value in (None, ""):
        raise TraceError(f"trace config: {key!r} is required")
    return value
