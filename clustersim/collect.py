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
finished: killed or still running) and missing runs (in the sweep's ``sweep.json`` but without a
directory) are listed on stderr and left out; ``--strict`` makes any of them an error (exit 1).
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

from clustersim.rundirs import expected, hash_of, run_hash, safe

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

    def report(self) -> str:
        n = len(self.complete) + len(self.failed) + len(self.incomplete) + len(self.missing)
        lines = [f"{self.root}: {n} runs: {len(self.complete)} complete, {len(self.failed)} failed, "
                 f"{len(self.incomplete)} incomplete, {len(self.missing)} missing"]
        lines += [f"  failed:     {p.relative_to(self.root)}: {err}" for p, err in self.failed]
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
        meta = _meta(d)
        seen.add(_hash(d, meta))
        status = (meta or {}).get("status")
        if meta is None:
            s.incomplete.append(d)
        elif status == "failed":
            s.failed.append((d, meta.get("error", "failed")))
        elif (d / "summary.json").is_file() and (status == "complete" or status is None):
            s.complete.append(d)   # status None: run.json of a clustersim before run statuses
        else:
            s.incomplete.append(d)
    want = expected(root) or {}
    s.missing = [o for h, o in want.items() if h not in seen]
    return s


def _meta(run: Path) -> dict | None:
    try:
        return json.loads((run / "run.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


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
    for run in s.complete:
        ident = describe(run, root, experiment)
        summary = json.loads((run / "summary.json").read_text())
        summary.pop("unfinished_jobs", None)   # a list; jobs.parquet has every job's status
        rows.append({**ident, **{k: v for k, v in summary.items() if k not in ident}})
        for name, file in (("jobs", "jobs.parquet"), ("timelines", "timeline.parquet"),
                           ("tenants", "tenants.parquet")):
            if (run / file).is_file():
                parts[name].append(_tag(pq.read_table(run / file), ident))
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
    left_out = len(s.failed) + len(s.incomplete) + len(s.missing)
    if left_out:
        print(s.report(), file=sys.stderr)
        print(f"clustersim-collect: WARNING: {left_out} run(s) left out of the dataset "
              f"({len(s.failed)} failed, {len(s.incomplete)} incomplete, {len(s.missing)} missing); "
              f"re-run the sweep with the same hydra.sweep.dir to redo them", file=sys.stderr)
    print(f"{runs.num_rows} complete runs, {jobs.num_rows} job rows -> {args.out or args.sweep / 'collected'}")
    if left_out and args.strict:
        sys.exit(1)


if __name__ == "__main__":
    main()
