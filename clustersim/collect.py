"""Gather the run directories of a sweep into one Parquet dataset for analysis.

    clustersim-collect runs/multirun/2026-11-22_10-00-00 [-o out_dir]

writes ``runs.parquet`` (one row per run: its config choices, seed and summary) and
``jobs.parquet`` (every run's jobs, with a ``run`` column) to ``out_dir`` (default:
``<sweep>/collected``). A directory without ``summary.json`` is an interrupted run: it is
listed and left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clustersim.simulator.metrics import atomic_write

CHOICES = ("trace", "cluster", "policy", "overhead", "profile")


def run_dirs(root: Path) -> tuple[list[Path], list[Path]]:
    """(finished runs, interrupted runs) under ``root``, in path order."""
    done, broken = [], []
    for meta in sorted(root.rglob("run.json")):
        (done if (meta.parent / "summary.json").exists() else broken).append(meta.parent)
    return done, broken


def describe(run: Path, root: Path) -> dict:
    """A run's identity: its path, its config choices and seed."""
    cfg = json.loads((run / "run.json").read_text())["config"]
    row = {"run": str(run.relative_to(root))}
    for group in CHOICES:
        if isinstance(cfg.get(group), dict):
            row[group] = cfg[group].get("name")
    row["seed"] = cfg.get("seed")
    return row


def collect(root: str | Path, out: str | Path | None = None) -> tuple[pa.Table, pa.Table, list[Path]]:
    root = Path(root)
    runs, broken = run_dirs(root)
    if not runs:
        raise FileNotFoundError(f"{root}: no finished run (no run.json beside a summary.json)")
    rows, jobs = [], []
    for run in runs:
        ident = describe(run, root)
        rows.append({**ident, **json.loads((run / "summary.json").read_text())})
        table = pq.read_table(run / "jobs.parquet")
        jobs.append(table.add_column(0, "run", pa.array([ident["run"]] * len(table), pa.string())))
    summary = pa.Table.from_pylist(rows)
    jobs_table = pa.concat_tables(jobs)
    out = Path(out) if out else root / "collected"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "runs.parquet", lambda p: pq.write_table(summary, p))
    atomic_write(out / "jobs.parquet", lambda p: pq.write_table(jobs_table, p))
    return summary, jobs_table, broken


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="clustersim-collect", description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path, help="a sweep directory (or any folder holding run directories)")
    ap.add_argument("-o", "--out", type=Path, help="output folder (default: <sweep>/collected)")
    args = ap.parse_args(argv)
    try:
        summary, jobs, broken = collect(args.sweep, args.out)
    except FileNotFoundError as e:
        sys.exit(f"clustersim-collect: {e}")
    for b in broken:
        print(f"skipped interrupted run (no summary.json): {b}", file=sys.stderr)
    print(f"{summary.num_rows} runs, {jobs.num_rows} job rows -> {args.out or args.sweep / 'collected'}")


if __name__ == "__main__":
    main()
