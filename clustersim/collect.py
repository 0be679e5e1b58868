"""Gather the run directories of a sweep into one Parquet dataset for analysis.

    clustersim-collect runs/multirun/2026-11-22_10-00-00 [-o out_dir] [--experiment NAME] [--strict]

writes to ``out_dir`` (default ``<sweep>/collected``) three datasets partitioned by experiment
and policy (``<name>/experiment=<e>/policy=<p>/part-0.parquet``; read one with
``pyarrow.parquet.read_table`` or ``pandas.read_parquet`` on its folder):

- ``runs``: one row per run: its choices, seed, every override (as the value the run used), the
  cluster it actually had (nodes, GPUs, CPUs, memory, GPUs per type), provenance and its summary;
- ``jobs``: every job of every run; ``timelines``: every run's timeline; ``tenants``: per-tenant
  summaries; each with the run's ``run``, ``experiment``, ``policy`` and ``seed``.

Only complete runs are collected. Failed runs (run.json says why), incomplete runs (started, never
finished: killed or still running), missing runs (in the sweep's ``sweep.json`` but without a
directory) and damaged runs (an output deleted, truncated or swapped in since the run wrote it:
its SHA-256 differs from the one run.json records; a run.json or summary.json that is not one)
are listed on stderr and left out; ``--strict`` makes any of them an error (exit 1).
The experiment is the sweep directory's name unless given; collecting another sweep into the
same ``out_dir`` adds its experiment beside the others, collecting the same one again replaces it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clustersim.rundirs import expected, file_sha256, hash_of, run_hash, safe

CHOICES = ("trace", "cluster", "policy", "overhead", "profile")
DATASETS = ("runs", "jobs", "timelines", "tenants")
PARTITIONS = ("experiment", "policy")


@dataclass
class Scan:
    """The state of every run under a sweep directory."""

    root: Path
    complete: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    incomplete: list[Path] = field(default_factory=list)
    missing: list[list[str]] = field(default_factory=list)
    damaged: list[tuple[Path, str]] = field(default_factory=list)   # ended, but an output is gone or altered
    notes: list[str] = field(default_factory=list)                  # about the sweep itself (its manifest)

    def report(self) -> str:
        n = len(self.complete) + len(self.failed) + len(self.incomplete) + len(self.missing) + len(self.damaged)
        lines = [f"{self.root}: {n} runs: {len(self.complete)} complete, {len(self.failed)} failed, "
                 f"{len(self.incomplete)} incomplete, {len(self.missing)} missing, {len(self.damaged)} damaged"]
        lines += [f"  note:       {note}" for note in self.notes]
        lines += [f"  failed:     {p.relative_to(self.root)}: {err}" for p, err in self.failed]
        lines += [f"  damaged:    {p.relative_to(self.root)}: {why}" for p, why in self.damaged]
        lines += [f"  incomplete: {p.relative_to(self.root)} (started, never finished: killed, or still running)"
                  for p in self.incomplete]
        lines += [f"  missing:    {' '.join(o) or '(no overrides)'} (no run directory)" for o in self.missing]
        return "\n".join(lines)


def _candidates(root: Path):
    """Directories that are runs: they hold run.json or Hydra's .hydra record (hidden staging
    directories and collected output are not runs)."""
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "collected")
        if "run.json" in files or os.path.isdir(os.path.join(here, ".hydra")):
            yield Path(here)


def scan(root: str | Path) -> Scan:
    root = Path(root)
    s = Scan(root)
    seen = set()
    for d in _candidates(root):
        try:
            meta = _meta(d)
        except ValueError as e:   # run.json is written last and whole: one that is not a record is damaged
            s.damaged.append((d, str(e)))
            seen.add(hash_of(d))
            continue
        seen.add(_hash(d, meta))
        status = (meta or {}).get("status")
        if meta is None:
            s.incomplete.append(d)
        elif status == "failed":
            s.failed.append((d, meta.get("error", "failed")))
        elif (d / "summary.json").is_file() and (status == "complete" or status is None):
            why = damage(d, meta)   # status None: run.json of a clustersim before run statuses
            s.damaged.append((d, why)) if why else s.complete.append(d)
        elif status == "complete":
            s.damaged.append((d, "summary.json is missing"))
        else:
            s.incomplete.append(d)
    try:
        want = expected(root) or {}
    except ValueError as e:
        s.notes.append(f"{e}; runs the sweep asked for but never made cannot be listed")
        want = {}
    s.missing = [o for h, o in want.items() if h not in seen]
    return s


def _meta(run: Path) -> dict | None:
    """A run's run.json; None when there is none (not ended); ``ValueError`` when it is not a
    run's record (not JSON, not a mapping)."""
    try:
        meta = json.loads((run / "run.json").read_bytes())
    except FileNotFoundError:
        return None
    except (ValueError, OSError) as e:
        raise ValueError(f"run.json is unreadable ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"run.json holds a {type(meta).__name__}, not a run's record")
    for key, types in (("config", (dict, type(None))), ("overrides", (list, type(None))),
                       ("status", (str, type(None))), ("outputs", (dict, type(None))), ("cluster", (dict, type(None)))):
        if not isinstance(meta.get(key), types):
            raise ValueError(f"run.json does not describe a run ({key} is a {type(meta[key]).__name__})")
    return meta


def damage(run: Path, meta: dict) -> str | None:
    """Why an ended run's outputs cannot be trusted (an output deleted, truncated or swapped in
    since the run wrote it: its SHA-256 differs from run.json's; a summary that is not JSON),
    or None. Runs recorded before output hashes are checked for a readable summary only."""
    outputs = meta.get("outputs")
    if isinstance(outputs, dict):
        for name, digest in outputs.items():
            if not (run / name).is_file():
                return f"{name} is missing (the run wrote it)"
            if file_sha256(run / name) != digest:
                return f"{name} differs from the file the run wrote (SHA-256 in run.json)"
    try:
        summary = json.loads((run / "summary.json").read_bytes())
    except (ValueError, OSError) as e:
        return f"summary.json is unreadable ({type(e).__name__}: {e})"
    return None if isinstance(summary, dict) else f"summary.json holds a {type(summary).__name__}, not a summary"


def _hash(run: Path, meta: dict | None) -> str | None:
    if meta and meta.get("overrides") is not None and "overrides" in meta:
        return run_hash(meta["overrides"])
    return hash_of(run)


def _lookup(config: dict, dotted: str):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _scalar(v):
    return v if v is None or isinstance(v, (bool, int, float, str)) else json.dumps(v, sort_keys=True)


def describe(run: Path, root: Path, experiment: str) -> dict:
    """A run's identity: path, experiment, choices, seed, every override's value, its cluster."""
    meta = _meta(run) or {}
    cfg = meta.get("config") or {}
    row = {"run": str(run.relative_to(root)) if run != root else run.name, "experiment": experiment}
    for group in CHOICES:
        row[group] = (cfg.get(group) or {}).get("name") if isinstance(cfg.get(group), dict) else None
    row["seed"] = cfg.get("seed")
    overrides = meta.get("overrides") or []
    row["overrides"] = " ".join(overrides)
    row["hash"] = run_hash(overrides)
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key.startswith("hydra") or key in CHOICES or key in row:
            continue
        row[key] = _scalar(_lookup(cfg, key))
    cl = meta.get("cluster") or {}
    row["cluster_config"] = row.pop("cluster")
    row["cluster"] = cl.get("shape")
    for k in ("nodes", "gpus", "cpus", "mem"):
        row[f"cluster_{k}"] = cl.get(k)
    for t, g in (cl.get("gpus_by_type") or {}).items():
        row[f"cluster_gpus_{safe(t)}"] = g
    row["version"], row["git_commit"] = meta.get("version"), meta.get("git_commit")
    row["wall_time_s"] = meta.get("wall_time_s")
    return row


def _tag(table: pa.Table, ident: dict) -> pa.Table:
    """``table`` with the run's identity columns in front."""
    cols = [("run", pa.string()), ("experiment", pa.string()), ("policy", pa.string()), ("seed", pa.int64())]
    for i, (name, typ) in enumerate(cols):
        table = table.add_column(i, name, pa.array([ident[name]] * len(table), typ))
    return table


def collect(root: str | Path, out: str | Path | None = None, experiment: str | None = None,
            ) -> tuple[pa.Table, pa.Table, Scan]:
    """Collect the complete runs under ``root`` into ``out``; returns (runs, jobs, scan)."""
    root = Path(root)
    s = scan(root)
    if not s.complete:
        raise FileNotFoundError(f"{root}: no complete run\n{s.report()}")
    experiment = safe(experiment or root.resolve().name)
    rows, parts = [], {name: [] for name in DATASETS[1:]}
    for run in list(s.complete):
        try:
            ident = describe(run, root, experiment)
            summary = json.loads((run / "summary.json").read_text())
            summary.pop("unfinished_jobs", None)   # a list; jobs.parquet has every job's status
            tagged = {name: _tag(pq.read_table(run / file), ident)
                      for name, file in (("jobs", "jobs.parquet"), ("timelines", "timeline.parquet"),
                                         ("tenants", "tenants.parquet")) if (run / file).is_file()}
        except (pa.ArrowException, OSError) as e:   # a run recorded before output hashes, damaged since
            s.complete.remove(run)
            s.damaged.append((run, f"an output is unreadable ({e})"))
            continue
        except (TypeError, AttributeError, ValueError) as e:   # run.json edited into another shape
            s.complete.remove(run)
            s.damaged.append((run, f"run.json does not describe a run ({type(e).__name__}: {e})"))
            continue
        rows.append({**ident, **{k: v for k, v in summary.items() if k not in ident}})
        for name, table in tagged.items():
            parts[name].append(table)
    if not rows:
        raise FileNotFoundError(f"{root}: no complete run\n{s.report()}")
    tables = {"runs": pa.Table.from_pylist(rows)}
    tables.update({k: pa.concat_tables(v, promote_options="default") for k, v in parts.items() if v})
    out = Path(out) if out else root / "collected"
    for name, table in tables.items():
        _write_partitioned(table, out / name, experiment)
    return tables["runs"], tables["jobs"], s


def _write_partitioned(table: pa.Table, folder: Path, experiment: str) -> None:
    """Replace this experiment's partition of ``folder`` (staged, then renamed into place)."""
    final = folder / f"experiment={experiment}"
    tmp = folder / f".experiment={experiment}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    pq.write_to_dataset(table.drop_columns(["experiment"]), tmp, partition_cols=["policy"],
                        basename_template="part-{i}.parquet")
    old = folder / f".experiment={experiment}.old-{os.getpid()}"
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def read(folder: str | Path, name: str = "runs"):
    """One collected dataset as a pandas DataFrame (``experiment`` and ``policy`` as strings)."""
    import pyarrow.dataset as ds

    data = ds.dataset(Path(folder) / name, format="parquet", partitioning="hive")
    df = data.to_table().to_pandas()
    for c in PARTITIONS:
        if c in df:
            df[c] = df[c].astype(str)
    return df


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="clustersim-collect", description=__doc__.splitlines()[0],
                                 epilog="Then: clustersim-plot <sweep dir> draws the standard figures.")
    ap.add_argument("sweep", type=Path, help="a sweep directory (or any folder holding run directories)")
    ap.add_argument("-o", "--out", type=Path, help="output folder (default: <sweep>/collected)")
    ap.add_argument("--experiment", help="experiment name (default: the sweep directory's name)")
    ap.add_argument("--strict", action="store_true", help="exit 1 if any run failed, is incomplete or missing")
    args = ap.parse_args(argv)
    try:
        runs, jobs, s = collect(args.sweep, args.out, args.experiment)
    except FileNotFoundError as e:
        sys.exit(f"clustersim-collect: {e}")
    left_out = len(s.failed) + len(s.incomplete) + len(s.missing) + len(s.damaged)
    if left_out or s.notes:
        print(s.report(), file=sys.stderr)
    if left_out:
        print(f"clustersim-collect: WARNING: {left_out} run(s) left out of the dataset "
              f"({len(s.failed)} failed, {len(s.incomplete)} incomplete, {len(s.missing)} missing, "
              f"{len(s.damaged)} damaged); re-run the sweep with the same hydra.sweep.dir to redo them",
              file=sys.stderr)
    print(f"{runs.num_rows} complete runs, {jobs.num_rows} job rows -> {args.out or args.sweep / 'collected'}")
    if left_out and args.strict:
        sys.exit(1)


if __name__ == "__main__":
    main()
