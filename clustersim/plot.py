"""The standard figures of a sweep or of one run, as PNG and SVG.

    clustersim-plot <sweep dir | run dir> [-o out_dir] [--by policy] [--format png svg]

writes to ``out_dir`` (default ``<dir>/plots``): ``jct_cdf``, ``jct_makespan_bars`` (mean over
seeds, error bars = standard deviation), ``gpu_util`` and ``queue_length`` over time (smallest
seed), ``gantt_<run>`` for runs of at most 200 jobs (one per configuration, smallest seed), and
``summary.csv`` and ``tenants.csv`` (per-tenant mean JCT per configuration). A sweep directory is
collected first (clustersim-collect) when it has not been.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def plot(path: str | Path, out: str | Path | None = None, by="policy", formats=("png", "svg")) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clustersim import analysis

    path = Path(path)
    data = analysis.load(path)
    out = Path(out) if out else data.root / "plots"
    written = []

    def save(fig, name):
        written.extend(analysis.save(fig, out / name, formats))
        plt.close(fig)

    save(analysis.jct_cdf(data.jobs, by), "jct_cdf")
    save(analysis.metric_bars(data.runs, ("jct_mean", "jct_p95", "makespan"), by), "jct_makespan_bars")
    if not data.timelines.empty:
        save(analysis.over_time(data.timelines, "gpu_util", by), "gpu_util")
        save(analysis.over_time(data.timelines, "pending", by), "queue_length")
    first = data.runs.sort_values("seed").assign(_by=analysis.label(data.runs, by)).groupby("_by").head(1)
    for _, r in first.iterrows():
        if r.get("jobs", 0) <= 200:
            run_dir = data.root / r["run"] if (data.root / r["run"]).is_dir() else data.root
            save(analysis.gantt(run_dir), f"gantt_{Path(r['run']).name}")
    out.mkdir(parents=True, exist_ok=True)
    analysis.summary_table(data.runs, by).to_csv(out / "summary.csv")
    written.append(out / "summary.csv")
    if not data.tenants.empty:
        analysis.tenant_table(data.tenants, by).to_csv(out / "tenants.csv")
        written.append(out / "tenants.csv")
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="clustersim-plot", description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="a sweep directory, a clustersim-collect folder or a run directory")
    ap.add_argument("-o", "--out", type=Path, help="output folder (default: <dir>/plots)")
    ap.add_argument("--by", nargs="+", default=["policy"],
                    help="column(s) telling configurations apart (default: policy; e.g. policy policy.gittins)")
    ap.add_argument("--format", nargs="+", default=["png", "svg"], choices=["png", "svg", "pdf"])
    args = ap.parse_args(argv)
    try:
        written = plot(args.path, args.out, args.by[0] if len(args.by) == 1 else args.by, args.format)
    except FileNotFoundError as e:
        sys.exit(f"clustersim-plot: {e}")
    for p in written:
        print(p)


if __name__ == "__main__":
    main()
