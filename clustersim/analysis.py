"""Standard analyses of a sweep (or of one run): tables and matplotlib figures.

    from clustersim import analysis
    data = analysis.load("runs/multirun/2026-11-22_10-00-00")   # collects the sweep if needed
    analysis.jct_cdf(data.jobs)
    analysis.metric_bars(data.runs, ["jct_mean", "jct_p95", "makespan"])

Every plotting function takes DataFrames as collected (``clustersim.collect``), draws on a given
``ax`` (or a new figure) and returns the figure; ``by`` names the column that tells the compared
configurations apart (default ``policy``). Bars show the mean over seeds with the standard
deviation as error bars; the count of seeds is printed on each bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass
class Sweep:
    runs: pd.DataFrame
    jobs: pd.DataFrame
    timelines: pd.DataFrame
    tenants: pd.DataFrame
    root: Path


def load(path: str | Path, collect_first: bool = True) -> Sweep:
    """A sweep's collected datasets: ``path`` is a sweep directory (collected into
    ``<path>/collected`` when that is missing or older than a run), a folder written by
    clustersim-collect, or a single run directory."""
    from clustersim.collect import collect, read

    path = Path(path)
    if (path / "runs").is_dir() and not (path / "run.json").exists():
        folder, root = path, path.parent
    else:
        folder, root = path / "collected", path
        if collect_first and (_stale(folder, root) or not (folder / "runs").is_dir()):
            collect(root, folder, experiment=None)
    frames = {n: read(folder, n) if (folder / n).is_dir() else pd.DataFrame()
              for n in ("runs", "jobs", "timelines", "tenants")}
    return Sweep(**frames, root=root)


def _stale(folder: Path, root: Path) -> bool:
    if not (folder / "runs").is_dir():
        return True
    made = min(p.stat().st_mtime for p in (folder / "runs").rglob("*.parquet"))
    return any(p.stat().st_mtime > made for p in root.rglob("run.json") if folder not in p.parents)


def label(df: pd.DataFrame, by: str | list[str]) -> pd.Series:
    """One label per row from the column(s) ``by`` (``policy`` or e.g. ``["policy", "policy.gittins"]``)."""
    cols = [by] if isinstance(by, str) else list(by)
    if len(cols) == 1:
        return df[cols[0]].astype(str)
    return df[cols].astype(str).agg(" ".join, axis=1)


def summary_table(runs: pd.DataFrame, by="policy",
                  metrics=("jct_mean", "jct_p95", "waiting_time_mean", "makespan", "gpu_util_busy",
                           "ftf_rho_mean", "preemptions")) -> pd.DataFrame:
    """Mean and standard deviation over seeds of each metric, one row per configuration."""
    metrics = [m for m in metrics if m in runs]
    g = runs.assign(_by=label(runs, by)).groupby("_by")[metrics]
    out = g.mean().join(g.std(ddof=1).add_suffix("_std")).join(g.size().rename("seeds"))
    out.index.name = by if isinstance(by, str) else " ".join(by)
    return out.sort_values(metrics[0]) if metrics else out


def tenant_table(tenants: pd.DataFrame, by="policy", metric="jct_mean") -> pd.DataFrame:
    """Tenants as rows, configurations as columns, ``metric`` averaged over seeds."""
    t = tenants.assign(_by=label(tenants, by), tenant=tenants["tenant"].fillna("(none)"))
    return t.pivot_table(index="tenant", columns="_by", values=metric, aggfunc="mean")


def _axes(ax, size=(6, 3.5)):
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=size)
    return ax.figure, ax


def jct_cdf(jobs: pd.DataFrame, by="policy", ax=None, log: bool = True):
    """Cumulative distribution of JCT over finished jobs (all seeds pooled), one curve per configuration."""
    fig, ax = _axes(ax)
    done = jobs[jobs["status"] == "finished"]
    for name, g in done.groupby(label(done, by)):
        jct = np.sort(g["jct"].to_numpy())
        ax.step(jct, np.arange(1, len(jct) + 1) / len(jct), where="post", label=name)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def metric_bars(runs: pd.DataFrame, metrics=("jct_mean", "jct_p95", "makespan"), by="policy", axes=None):
    """One panel per metric: mean over seeds per configuration, error bars = standard deviation."""
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if m in runs]
    if axes is None:
        fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2), squeeze=False)
        axes = axes[0]
    fig = axes[0].figure
    table = summary_table(runs, by, metrics).sort_index()
    x = np.arange(len(table))
    for ax, m in zip(axes, metrics):
        err = table[f"{m}_std"].fillna(0.0).to_numpy()
        bars = ax.bar(x, table[m].to_numpy(), yerr=err, capsize=3, color="C0")
        for b, n in zip(bars, table["seeds"]):
            ax.annotate(f"n={n}", (b.get_x() + b.get_width() / 2, 0), ha="center", va="bottom", fontsize="x-small",
                        color="white")
        ax.set_xticks(x, table.index, rotation=30, ha="right")
        ax.set_title(m + (" (s)" if m.startswith(("jct", "makespan", "waiting", "queueing")) else ""))
    fig.tight_layout()
    return fig


def over_time(timelines: pd.DataFrame, column: str = "gpu_util", by="policy", seed=None, ax=None):
    """``column`` of the timeline (gpu_util, pending, running, ...) over simulated time, one line per
    configuration, for one seed (default: the smallest)."""
    fig, ax = _axes(ax)
    seed = timelines["seed"].min() if seed is None else seed
    tl = timelines[timelines["seed"] == seed]
    for name, g in tl.groupby(label(tl, by)):
        for _, run in g.groupby("run"):
            ax.step(run["time"], run[column], where="post", label=name)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel({"gpu_util": "GPU utilization", "pending": "pending jobs (queue length)",
                   "running": "running jobs"}.get(column, column))
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def gantt(run_dir: str | Path, ax=None, max_jobs: int = 200):
    """Per-job timeline of one run: waiting (light) and holding GPUs (dark, height = GPUs held
    relative to the job's largest allocation), from its jobs.parquet and events.parquet."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    jobs = pq.read_table(run_dir / "jobs.parquet").to_pandas()
    if len(jobs) > max_jobs:
        raise ValueError(f"{run_dir}: {len(jobs)} jobs; a Gantt chart is for small runs (max_jobs={max_jobs})")
    events = pq.read_table(run_dir / "events.parquet").to_pandas().sort_values("time", kind="stable")
    fig, ax = _axes(ax, (7, max(2.5, 0.12 * len(jobs) + 1)))
    row = {j: i for i, j in enumerate(jobs["job_id"])}
    end_of_run = float(np.nanmax(jobs["end_time"].fillna(jobs["submit_time"]).to_numpy())) if len(jobs) else 0.0
    for j, ev in events.groupby("job_id", sort=False):
        y = row[j]
        times, gpus = ev["time"].to_numpy(), ev["gpus_after"].to_numpy()
        top = max(gpus.max(), 1e-9)
        for t0, t1, g in zip(times, np.append(times[1:], end_of_run), gpus):
            if g > 0 and t1 > t0:
                ax.barh(y, t1 - t0, left=t0, height=0.8 * g / top, color="C0")
    sub, first = jobs["submit_time"].to_numpy(), jobs["first_start"].fillna(end_of_run).to_numpy()
    ax.barh(np.arange(len(jobs)), first - sub, left=sub, height=0.8, color="C1", alpha=0.3)
    ax.set_yticks(np.arange(len(jobs)), jobs["job_id"], fontsize="xx-small")
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (s)  (light: waiting for a first start; dark: holding GPUs)")
    fig.tight_layout()
    return fig


def profile_fit(name: str, ax=None):
    """A zoo profile's measured throughput points against its fitted speed model, per batch size."""
    from clustersim.simulator import profiles

    prof = profiles.load().profile(name)
    samples = prof.table_samples()
    if not samples:
        raise ValueError(f"profile {name!r} has no measured GPU table to compare a fit with")
    fig, ax = _axes(ax)
    for i, batch in enumerate(sorted({x[2] for x, _ in samples})):
        pts = [(x, v) for x, v in samples if x[2] == batch]
        ax.plot([x[0] for x, _ in pts], [v for _, v in pts], "o", color=f"C{i}", label=f"measured, batch {batch:g}")
        n = np.arange(1, max(x[0] for x, _ in pts) + 1)
        if prof.model is not None:   # a fitted model (all-reduce): predicted at every GPU count
            xs = [(k, int(np.ceil(k / prof.gpus_per_node)), batch) for k in n]
            ax.plot(n, prof.model.predict(xs), "-", color=f"C{i}", label=f"fit, batch {batch:g}")
        elif batch in prof.tables:   # a table model: what the simulator interpolates between the points
            ax.plot(n, [float(prof.tables[batch].predict((k,))[0]) for k in n], "-", color=f"C{i}",
                    label=f"interpolated, batch {batch:g}")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("iterations/s")
    ax.set_title(f"{name}: {prof.speed_kind} model vs its measured table")
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    return fig


def save(fig, out: str | Path, formats=("png", "svg")) -> list[Path]:
    """Write ``fig`` as ``out.<format>`` for each format; returns the paths."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in formats:
        p = out.with_suffix(f".{f}")
        fig.savefig(p, dpi=120)
        paths.append(p)
    return paths
