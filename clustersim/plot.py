"""The standard figures of a sweep or of one run, as PNG and SVG.

    clustersim-plot <sweep dir | run dir> [-o out_dir] [--by policy] [--baseline fifo] [--format png svg]

writes to ``out_dir`` (default ``<dir>/plots``): ``summary`` (one page: JCT distribution, mean and
p95 JCT and makespan over the baseline's in the same seed, GPU utilisation, waiting time),
``jct_cdf``, ``jct_makespan_bars`` (mean over seeds with a dot per seed, and beside it each run
over the baseline's run of the same seed), ``gpu_util`` and ``queue_length`` over time (one panel
per configuration, smallest seed), ``gantt_<run>`` (one per configuration, smallest seed: a bar
per job up to 200 jobs, a heat map of the GPUs held above), and ``summary.csv`` (mean and standard
deviation over seeds of every summary metric) and ``tenants.csv`` (per-tenant mean JCT per
configuration). Titles name the trace, the cluster and the sweep; every figure shows the
configurations in the same order (the baseline first, oracles last) and each policy in its own
colour. A sweep directory is collected first (clustersim-collect) when it has not been.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def plot(path: str | Path, out: str | Path | None = None, by="policy", formats=("png", "svg"),
         baseline: str | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clustersim import analysis

    path = Path(path)
    data = analysis.load(path)
    out = Path(out) if out else data.root / "plots"
    written = []
    names = analysis.order(data.runs, by)
    if baseline is not None and baseline not in names:
        raise ValueError(f"--baseline {baseline}: not a configuration of this sweep ({', '.join(names)})")
    baseline = baseline or analysis.default_baseline(names)
    names = analysis.order(data.runs, by, baseline)
    context = analysis.describe(data.runs)

    def save(fig, name):
        written.extend(analysis.save(fig, out / name, formats))
        plt.close(fig)

    save(analysis.sweep_summary(data, by, baseline), "summary")
    save(analysis.jct_cdf(data.jobs, by, names=names, title=f"JCT distribution (finished jobs, seeds pooled)\n{context}"),
         "jct_cdf")
    save(analysis.metric_bars(data.runs, ("jct_mean", "jct_p95", "makespan"), by, baseline=baseline,
                              title=f"mean over seeds (top) and ÷ {baseline} in the same seed (bottom)\n{context}"),
         "jct_makespan_bars")
    if not data.timelines.empty:
        for column, name in (("gpu_util", "gpu_util"), ("pending", "queue_length")):
            what = {"gpu_util": "GPU utilisation", "pending": "queue length"}[column]
            seed = data.timelines["seed"].min()
            save(analysis.over_time(data.timelines, column, by, jobs=data.jobs, names=names,
                                    title=f"{what} over time, seed {seed}\n{context}"), name)
    first = data.runs.sort_values("seed").assign(_by=analysis.label(data.runs, by)).groupby("_by").head(1)
    for _, r in first.iterrows():
        run_dir = data.root / r["run"] if (data.root / r["run"]).is_dir() else data.root
        save(analysis.gantt(run_dir, title=f"{r['_by']}, seed {r['seed']}: jobs over time\n{context}"),
             f"gantt_{Path(r['run']).name}")
    out.mkdir(parents=True, exist_ok=True)
    analysis.summary_table(data.runs, by, metrics=None).to_csv(out / "summary.csv")
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
    ap.add_argument("--baseline", help="the configuration others are divided by, seed by seed (default: fifo "
                                       "where the sweep has it, else the first by name)")
    ap.add_argument("--format", nargs="+", default=["png", "svg"], choices=["png", "svg", "pdf"])
    args = ap.parse_args(argv)
    try:
        written = plot(args.path, args.out, args.by[0] if len(args.by) == 1 else args.by, args.format, args.baseline)
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"clustersim-plot: {e}")
    for p in written:
        print(p)


if __name__ == "__main__":
    main()
