"""Standard analyses of a sweep (or of one run): tables and matplotlib figures.

    from clustersim import analysis
    data = analysis.load("runs/multirun/2026-11-22_10-00-00")   # collects the sweep if needed
    analysis.jct_cdf(data.jobs)
    analysis.metric_bars(data.runs, ["jct_mean", "jct_p95", "makespan"])

Every plotting function takes DataFrames as collected (``clustersim.collect``), draws on a given
``ax`` (or a new figure) and returns the figure; ``by`` names the column that tells the compared
configurations apart (default ``policy``). Every figure draws in one style
(``clustersim.style``: a colour per policy fixed across figures and sweeps, readable metric names
with units, times from the first arrival in s, min, h or days) and shows the configurations in one
order (``order``: the baseline first, oracles last). Bars show the mean over seeds (error bars:
standard deviation, a dot per seed) beside the ratio to the baseline's run of the same seed.
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


def summary_table(runs: pd.DataFrame, by="policy", metrics=("jct_mean", "jct_p95", "waiting_time_mean", "makespan",
                                                              "gpu_util_busy", "ftf_rho_mean", "preemptions")
                  ) -> pd.DataFrame:
    """Mean and standard deviation over seeds of each metric, one row per configuration;
    ``metrics=None``: every numeric column of the runs' summaries."""
    if metrics is None:
        skip = {"seed", "wall_time_s", "jobs", "nodes", "events", "decisions", "sim_end_time"}
        metrics = [c for c in runs.select_dtypes("number").columns
                   if c not in skip and not c.startswith("cluster") and runs[c].notna().any()]
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


def _oracle(name: str) -> bool:
    from clustersim import policies

    first = str(name).split(" ")[0]
    return first in policies.names() and policies.get(first).oracle


def order(df: pd.DataFrame, by="policy", baseline: str | None = None) -> list[str]:
    """The configurations in the order every figure shows them: the baseline first, then from
    the longest mean JCT to the shortest (so a row of bars reads as the gain over the baseline),
    oracles (they read the true remaining work) last."""
    lab = label(df, by)
    metric = "jct_mean" if "jct_mean" in df else "jct"
    means = df.assign(_by=lab).groupby("_by")[metric].mean() if metric in df else pd.Series(0.0, index=lab.unique())
    baseline = baseline or default_baseline(means.index)
    names = sorted(means.index, key=lambda n: (n != baseline, _oracle(n), -np.nan_to_num(means[n], nan=-np.inf), n))
    return names


def default_baseline(names) -> str:
    """FIFO where the sweep has it (the usual baseline of the papers), else the first configuration."""
    names = list(names)
    return "fifo" if "fifo" in names else sorted(names)[0]


def describe(runs: pd.DataFrame) -> str:
    """What a sweep is, for figure titles: trace(s), cluster(s) with their GPUs, sweep name, seeds."""
    def values(col):
        return sorted({str(v) for v in runs[col].dropna()}) if col in runs else []

    parts = []
    if values("trace"):
        parts.append("trace " + ", ".join(values("trace")))
    if "cluster_config" in runs:
        gpus = runs.groupby(runs["cluster_config"].astype(str))["cluster_gpus"].first() if "cluster_gpus" in runs else {}
        parts.append("cluster " + ", ".join(f"{c} ({gpus[c]:g} GPUs)" if c in gpus else c
                                            for c in values("cluster_config")))
    if values("experiment"):
        parts.append("sweep " + ", ".join(values("experiment")))
    if "seed" in runs and runs["seed"].nunique():
        seeds = sorted(runs["seed"].unique())
        parts.append(f"{len(seeds)} seed{'s' if len(seeds) > 1 else ''}")
    return " · ".join(parts)


def _title(fig, what: str, context: str | None) -> None:
    fig.suptitle(what + (f"\n{context}" if context else ""), fontsize="medium")


def jct_cdf(jobs: pd.DataFrame, by="policy", ax=None, log: bool = True, title: str | None = None,
            names: list[str] | None = None):
    """Cumulative distribution of JCT over finished jobs (all seeds pooled), one curve per configuration."""
    from clustersim.style import color, style, time_unit

    with style():
        fig, ax = _axes(ax, (5.5, 3.6))
        done = jobs[jobs["status"] == "finished"]
        lab = label(done, by)
        unit, per = time_unit(float(done["jct"].max()) if len(done) else 0.0)
        for name in names or order(done, by):
            jct = np.sort(done.loc[lab == name, "jct"].to_numpy()) / per
            if len(jct):
                ax.step(jct, np.arange(1, len(jct) + 1) / len(jct), where="post", label=name, color=color(name))
        if log:
            from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

            ax.set_xscale("log")   # plain numbers at 1, 2, 5 × 10^k; none at the minor ticks (they collide)
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"job completion time ({unit}, log scale)" if log else f"job completion time ({unit})")
        ax.set_ylabel("fraction of finished jobs")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="best")
        ax.set_title(title if title is not None else "JCT distribution (finished jobs, seeds pooled)")
        fig.tight_layout()
    return fig


def paired(runs: pd.DataFrame, metric: str, by="policy", baseline: str | None = None) -> pd.DataFrame:
    """``metric`` of every run over the baseline's in the same seed (and trace and cluster): one
    row per run with its configuration, seed and ratio. Pairing keeps a ranking that holds in
    every seed visible when seeds differ in workload more than policies differ."""
    keys = [k for k in ("seed", "trace", "cluster_config") if k in runs]
    r = runs.assign(_by=label(runs, by))
    baseline = baseline or default_baseline(r["_by"].unique())
    base = r[r["_by"] == baseline].set_index(keys)[metric].rename("_base")
    out = r.join(base, on=keys)
    out["ratio"] = out[metric] / out["_base"]
    return out[["_by", *keys, metric, "ratio"]].rename(columns={"_by": "config"})


def _paired_bars(ax, runs: pd.DataFrame, metric: str, by, baseline: str, names: list[str]) -> None:
    """Each configuration's ``metric`` over the baseline's run of the same seed: the mean as a bar,
    each seed as a dot, the baseline's 1 as a dashed line."""
    from clustersim.style import color

    pr = paired(runs, metric, by, baseline)
    for i, n in enumerate(names):
        v = pr.loc[pr["config"] == n, "ratio"].dropna().to_numpy()
        if len(v):
            ax.bar(i, v.mean(), color=color(n), alpha=0.85)
            ax.plot(np.full(len(v), i), v, "o", ms=3, color="black", alpha=0.6)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")


def metric_bars(runs: pd.DataFrame, metrics=("jct_mean", "jct_p95", "makespan"), by="policy", axes=None,
                baseline: str | None = None, title: str | None = None):
    """One column per metric: above, the mean over seeds per configuration (error bars = standard
    deviation, a dot per seed); below, each run over the baseline's run of the same seed (paired:
    bar = mean ratio, a dot per seed), with the baseline's line at 1. Bars read "n=<seeds>", and
    "all equal" where every seed gave the same value (the seed changed nothing there)."""
    import matplotlib.pyplot as plt

    from clustersim.style import color, metric_name, scaled, style

    metrics = [m for m in metrics if m in runs and runs[m].notna().any()]
    lab = label(runs, by)
    names = order(runs, by, baseline)
    baseline = baseline or default_baseline(names)
    names = order(runs, by, baseline)
    with style():
        if axes is None:
            fig, axes = plt.subplots(2, len(metrics), figsize=(2.6 * len(metrics) + 0.6, 5.2), squeeze=False)
        fig = axes[0][0].figure
        x = np.arange(len(names))
        for j, m in enumerate(metrics):
            raw, rel = axes[0][j], axes[1][j]
            ylabel, per = scaled(m, runs[m])
            for i, n in enumerate(names):
                v = runs.loc[lab == n, m].dropna().to_numpy() / per
                if not len(v):
                    continue
                raw.bar(i, v.mean(), yerr=v.std(ddof=1) if len(v) > 1 else 0, capsize=3, color=color(n), alpha=0.85)
                raw.plot(np.full(len(v), i), v, "o", ms=3, color="black", alpha=0.6)
                same = len(v) > 1 and np.ptp(v) == 0
                raw.annotate(f"n={len(v)}" + ("\nall\nequal" if same else ""), (i, 0), xytext=(0, 2),
                             textcoords="offset points", ha="center", va="bottom", fontsize=6, color="white")
            raw.set_title(metric_name(m))
            raw.set_ylabel(ylabel)
            _paired_bars(rel, runs, m, by, baseline, names)
            rel.set_ylabel(f"÷ {baseline}, same seed")
            for ax in (raw, rel):
                ax.set_xticks(x, names if ax is rel else [""] * len(names), rotation=30, ha="right")
                ax.set_xlim(-0.6, len(names) - 0.4)
        _title(fig, title if title is not None else "results per configuration: raw (top), paired with the "
               f"baseline {baseline} by seed (bottom)", None)
        fig.tight_layout()
    return fig


def _starts(jobs: pd.DataFrame | None, timelines: pd.DataFrame) -> pd.Series:
    """Each run's first arrival (s), where time axes start; the timeline's first sample without jobs."""
    if jobs is not None and len(jobs):
        return jobs.groupby("run")["submit_time"].min()
    return timelines.groupby("run")["time"].min()


def over_time(timelines: pd.DataFrame, column: str = "gpu_util", by="policy", seed=None, ax=None,
              jobs: pd.DataFrame | None = None, names: list[str] | None = None, title: str | None = None):
    """``column`` of the timeline (gpu_util, pending, running, ...) over simulated time from the
    first arrival, for one seed (default: the smallest): small multiples, one panel per
    configuration on shared axes (overlaid step lines hide each other). ``ax``: a list of axes."""
    import matplotlib.pyplot as plt

    from clustersim.style import color, scaled, style, time_unit

    seed = timelines["seed"].min() if seed is None else seed
    tl = timelines[timelines["seed"] == seed]
    lab = label(tl, by)
    names = [n for n in (names or order(tl, by)) if (lab == n).any()]
    starts = _starts(None if jobs is None else jobs[jobs["seed"] == seed], tl)
    rel = tl["time"] - tl["run"].map(starts).fillna(0.0)
    unit, per = time_unit(float(rel.max()) if len(rel) else 0.0)
    ylabel, div = scaled(column, tl[column])
    with style():
        if ax is None:
            fig, axes = plt.subplots(len(names), 1, figsize=(6, 0.9 + 1.0 * len(names)), sharex=True, sharey=True,
                                     squeeze=False)
            axes = axes[:, 0]
        else:
            axes = np.atleast_1d(ax)
            fig = axes[0].figure
        for a, n in zip(axes, names):
            g = tl[lab == n].sort_values("time", kind="stable")
            t, v = (rel[g.index] / per).to_numpy(), (g[column] / div).to_numpy()
            a.fill_between(t, v, step="post", color=color(n), alpha=0.35, lw=0)
            a.step(t, v, where="post", color=color(n), lw=0.9)
            a.text(0.01, 0.92, n, transform=a.transAxes, ha="left", va="top", fontsize=8, weight="bold")
        top = float((tl[column] / div).max()) if len(tl) else 1.0
        axes[0].set_ylim(0, (top or 1.0) * 1.08)   # shared: every panel on the same scale, none clipped
        if jobs is not None and len(jobs):   # to the last job's end: a run's idle tail (timers) is not shown
            ends = jobs[jobs["seed"] == seed].groupby("run")["end_time"].max() - starts
            if ends.notna().any():
                axes[-1].set_xlim(0, float(ends.max()) / per * 1.02)
        axes[-1].set_xlabel(f"time since the first arrival ({unit})")
        fig.supylabel(ylabel, fontsize=9)
        _title(fig, title if title is not None else f"{ylabel.split(' (')[0]} over time, seed {seed}", None)
        fig.tight_layout()
    return fig


def gantt(run_dir: str | Path, ax=None, max_jobs: int = 200, max_rows: int = 100, title: str | None = None):
    """Per-job timeline of one run from its jobs.parquet and events.parquet, time from the first
    arrival. Up to ``max_jobs`` jobs: a bar per job (light: waiting for a first start; dark:
    holding GPUs, height = GPUs held relative to the job's largest allocation), labelled with the
    job's row number in arrival order (ids are long), at most 8 in high. More jobs: a heat map of
    the GPUs held, jobs grouped in arrival order into at most ``max_rows`` rows."""
    import pyarrow.parquet as pq

    from clustersim.style import style, time_unit

    run_dir = Path(run_dir)
    jobs = pq.read_table(run_dir / "jobs.parquet").to_pandas()
    jobs = jobs.sort_values("submit_time", kind="stable").reset_index(drop=True)
    events = pq.read_table(run_dir / "events.parquet").to_pandas().sort_values("time", kind="stable")
    t0 = float(jobs["submit_time"].min()) if len(jobs) else 0.0
    end_of_run = float(np.nanmax(jobs["end_time"].fillna(jobs["submit_time"]).to_numpy())) if len(jobs) else 0.0
    unit, per = time_unit(end_of_run - t0)
    with style():
        if len(jobs) > max_jobs:
            fig = _heat(jobs, events, ax, max_rows, t0, end_of_run, unit, per)
        else:
            fig = _bars(jobs, events, ax, t0, end_of_run, unit, per)
        fig.axes[0].set_title(title if title is not None else f"jobs over time: {run_dir.name}", fontsize=9)
        fig.tight_layout()
    return fig


def _bars(jobs, events, ax, t0, end_of_run, unit, per):
    fig, ax = _axes(ax, (7, min(8.0, max(2.5, 0.11 * len(jobs) + 1.2))))
    row = {j: i for i, j in enumerate(jobs["job_id"])}
    for j, ev in events.groupby("job_id", sort=False):
        y = row[j]
        times, gpus = (ev["time"].to_numpy() - t0) / per, ev["gpus_after"].to_numpy()
        top = max(gpus.max(), 1e-9)
        for a, b, g in zip(times, np.append(times[1:], (end_of_run - t0) / per), gpus):
            if g > 0 and b > a:
                ax.barh(y, b - a, left=a, height=0.8 * g / top, color="#0072B2")
    sub = (jobs["submit_time"].to_numpy() - t0) / per
    first = (jobs["first_start"].fillna(end_of_run).to_numpy() - t0) / per
    ax.barh(np.arange(len(jobs)), first - sub, left=sub, height=0.8, color="#E69F00", alpha=0.35)
    step = max(1, int(np.ceil(len(jobs) / 40)))   # at most ~40 labels: readable at any height
    ax.set_yticks(np.arange(0, len(jobs), step), [str(i) for i in range(0, len(jobs), step)])
    ax.set_ylim(len(jobs) - 0.5, -0.5)
    ax.set_ylabel("job (in arrival order)")
    ax.set_xlabel(f"time since the first arrival ({unit}); light: waiting for a first start, dark: holding GPUs")
    ax.grid(False)
    return fig


def _heat(jobs, events, ax, max_rows, t0, end_of_run, unit, per, columns: int = 400):
    """GPUs held at each of ``columns`` instants by the jobs of each row (jobs in arrival order)."""
    fig, ax = _axes(ax, (7, 4.5))
    rows = min(max_rows, len(jobs))
    row_of = dict(zip(jobs["job_id"], np.arange(len(jobs)) * rows // len(jobs)))
    centers = t0 + (np.arange(columns) + 0.5) * (end_of_run - t0) / columns
    ev = events.assign(_row=events["job_id"].map(row_of))
    ev["_next"] = ev.groupby("job_id")["time"].shift(-1).fillna(end_of_run)
    ev = ev[ev["gpus_after"] > 0]
    # a difference array per row: +g where a holding interval starts, -g where it ends, summed along time
    diff = np.zeros((rows, columns + 1))
    np.add.at(diff, (ev["_row"].to_numpy(), np.searchsorted(centers, ev["time"].to_numpy())), ev["gpus_after"])
    np.add.at(diff, (ev["_row"].to_numpy(), np.searchsorted(centers, ev["_next"].to_numpy())), -ev["gpus_after"])
    held = np.cumsum(diff, axis=1)[:, :columns]
    img = ax.imshow(held, aspect="auto", interpolation="nearest", cmap="viridis",
                    extent=(0, (end_of_run - t0) / per, rows, 0))
    fig.colorbar(img, ax=ax, label="held (GPUs)")
    per_row = len(jobs) / rows
    ax.set_ylabel(f"jobs in arrival order ({per_row:,.0f} per row)" if per_row > 1 else "job (in arrival order)")
    ax.set_xlabel(f"time since the first arrival ({unit})")
    ax.grid(False)
    return fig


def sweep_summary(data: Sweep, by="policy", baseline: str | None = None):
    """One page of a sweep: JCT distribution, mean and p95 JCT and makespan paired with the
    baseline by seed, GPU utilisation and mean waiting time (the share of jobs meeting their
    deadline instead, where jobs have deadlines); titled with what the sweep is."""
    import matplotlib.pyplot as plt

    from clustersim.style import color, metric_name, scaled, style

    runs = data.runs
    names = order(runs, by, baseline)
    baseline = baseline or default_baseline(names)
    names = order(runs, by, baseline)
    lab = label(runs, by)
    with style():
        fig, axes = plt.subplots(2, 3, figsize=(10, 6))
        jct_cdf(data.jobs, by, ax=axes[0][0], names=names, title="JCT distribution")
        for ax, m in zip((axes[0][1], axes[0][2], axes[1][0]), ("jct_mean", "jct_p95", "makespan")):
            _paired_bars(ax, runs, m, by, baseline, names)
            ax.set_title(f"{metric_name(m)} ÷ {baseline} (same seed)")
            ax.set_ylabel("ratio")
        with_deadlines = "deadline_ratio" in runs and runs["deadline_ratio"].notna().any()
        last = "deadline_ratio" if with_deadlines else "waiting_time_mean"   # ElasticFlow's measure where jobs have them
        for ax, m in zip((axes[1][1], axes[1][2]), ("gpu_util_busy", last)):
            if m not in runs or not runs[m].notna().any():
                ax.set_visible(False)
                continue
            ylabel, per = scaled(m, runs[m])
            for i, n in enumerate(names):
                v = runs.loc[lab == n, m].dropna().to_numpy() / per
                if len(v):
                    ax.bar(i, v.mean(), yerr=v.std(ddof=1) if len(v) > 1 else 0, capsize=3, color=color(n), alpha=0.85)
            ax.set_title(metric_name(m))
            ax.set_ylabel(ylabel)
        for ax in list(axes[0][1:]) + list(axes[1]):
            ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right")
        _title(fig, "Sweep summary", describe(runs))
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
        fig.savefig(p, dpi=150, bbox_inches="tight")
        paths.append(p)
    return paths
