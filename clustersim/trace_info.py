"""What a trace asks of a cluster, before any run.

    clustersim-trace-info [trace=<name>] [trace.path=...] [cluster=<name>] [overrides ...]

prints the trace's jobs, span (first arrival to last arrival, and to the last job's end if every
job started on arrival), GPU-hours, job sizes and durations, and the offered load on the cluster:
the GPU-hours the jobs ask for over the GPU-hours the cluster has during the span. An offered
load near or above 1 means queues build up and policies differ; far below 1, most jobs start on
arrival and every policy gives about the same JCT. Jobs without a duration in the trace
(iterations only, as Gavel's) take it from their speed profile at the requested GPUs, as a run
would. Warnings follow the figures: jobs larger than the cluster (the trace's ``oversize`` rule
then fails, drops or shrinks them), jobs whose duration cannot be told, and a workload the seed
does not change (seeds then repeat one run).
"""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clustersim.simulator import cluster as cluster_mod
from clustersim.simulator import rng
from clustersim.traces.transform import oversize


def info(table: pa.Table, cluster, durations: np.ndarray | None = None) -> dict:
    """The figures ``clustersim-trace-info`` prints, from a trace's job table and a cluster;
    ``durations`` (s, NaN: unknown) replace the trace's where given (from the speed profiles)."""
    submit = table["submit_time"].to_numpy(zero_copy_only=False).astype(np.float64)
    dur = table["duration"].to_numpy(zero_copy_only=False).astype(np.float64) if durations is None else durations
    gpus = table["num_gpus"].to_numpy(zero_copy_only=False).astype(np.float64)
    known = ~np.isnan(dur)
    gpu_h = float(np.sum(gpus[known] * dur[known]) / 3600.0)
    first, last = (float(submit.min()), float(submit.max())) if len(submit) else (0.0, 0.0)
    end = float(np.max(submit[known] + dur[known])) if known.any() else last
    window = end - first
    cap = float(cluster.total[0])
    return {
        "jobs": int(table.num_rows),
        "jobs_without_duration": int((~known).sum()),
        "arrival_span_s": last - first,
        "span_s": window,
        "gpu_hours": gpu_h,
        "gpus_median": float(np.median(gpus)) if len(gpus) else None,
        "gpus_max": float(gpus.max()) if len(gpus) else None,
        "duration_median_s": float(np.median(dur[known])) if known.any() else None,
        "duration_p95_s": float(np.percentile(dur[known], 95)) if known.any() else None,
        "cluster_gpus": cap,
        "cluster_nodes": cluster.num_nodes,
        # offered load: GPU-time asked for / GPU-time the cluster offers from first arrival to last end
        "offered_load": gpu_h * 3600.0 / (cap * window) if cap > 0 and window > 0 else None,
        "tenants": int(pc.count_distinct(table["tenant"]).as_py()) if "tenant" in table.column_names else 0,
    }


def format_info(name: str, cluster_name: str, d: dict) -> str:
    num = lambda x, f="{:,.1f}": "-" if x is None else f.format(x)  # noqa: E731
    rows = [
        ("trace", name),
        ("jobs", f"{d['jobs']:,}" + (f" ({d['jobs_without_duration']:,} without a duration)"
                                     if d["jobs_without_duration"] else "")),
        ("tenants", f"{d['tenants']:,}"),
        ("arrivals span (h)", num(d["arrival_span_s"] / 3600, "{:,.2f}")),
        ("span to last end (h)", num(d["span_s"] / 3600, "{:,.2f}")),
        ("GPU-hours", num(d["gpu_hours"])),
        ("GPUs per job median / max", f"{num(d['gpus_median'], '{:g}')} / {num(d['gpus_max'], '{:g}')}"),
        ("duration median / p95 (s)", f"{num(d['duration_median_s'])} / {num(d['duration_p95_s'])}"),
        ("cluster", f"{cluster_name}: {d['cluster_nodes']} nodes, {d['cluster_gpus']:g} GPUs"),
        ("offered load", num(d["offered_load"], "{:.2f}")),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([*(f"{k:<{width}}  {v}" for k, v in rows), *(f"warning: {w}" for w in d.get("warnings", []))])


def warnings(c: dict, table: pa.Table, cluster, d: dict, seed_used: bool, durations_from: str | None) -> list[str]:
    """What a study on this trace and cluster should know before it starts."""
    out = []
    _, over = oversize(table, cluster.capacity, "clamp")   # clamp never raises: it counts the misfits
    if over["count"]:
        rule = c["trace"].get("oversize") or "error"
        then = {"error": "every run fails (set trace.oversize=drop or clamp, or choose a larger cluster)",
                "drop": "runs drop them (trace.oversize=drop)",
                "clamp": "runs shrink them to the largest node set (trace.oversize=clamp)"}[rule]
        out.append(f"{over['count']:,} of {d['jobs']:,} job(s) can never fit this cluster (largest "
                   f"{d['gpus_max']:g} GPUs; e.g. {over['jobs'][0]!r}): {then}")
    if durations_from:
        out.append(durations_from)
    if d["jobs_without_duration"]:
        out.append(f"{d['jobs_without_duration']:,} job(s) have no duration the trace or a speed profile gives: "
                   "they are left out of the GPU-hours and the offered load")
    if not seed_used:
        out.append("the seed changes nothing in this workload (no job's profile is drawn at random: each names a "
                   "known model, or profile=linear; no generator or sampling): seeds vary only the noise of what "
                   "policies observe (observe.*) and faults, so a policy that reads neither repeats one run")
    return out


def profile_durations(c: dict, table: pa.Table, cluster) -> tuple[np.ndarray, str | None]:
    """Each job's duration: the trace's, else (iterations only) the run's own rule, its speed
    profile's rate at the requested GPUs (simulator.workload.build_jobs); NaN where neither. The
    jobs are built even when every duration is known: a run draws profiles for jobs without a
    known model, and whether the seed does that is one of the warnings."""
    from clustersim.simulator.errors import TraceError
    from clustersim.simulator.workload import Assignment, build_jobs

    dur = table["duration"].to_numpy(zero_copy_only=False).astype(np.float64)
    missing = int(np.isnan(dur).sum())
    assignment = Assignment.from_config(c["profile"])
    if assignment is None:
        return dur, None
    try:
        jobs = build_jobs(table, f"trace {c['trace'].get('name')}", assignment, cluster, c.get("seed", 0))
    except TraceError:
        return dur, None
    got = np.array([np.nan if j.duration is None else j.duration for j in jobs])
    filled = int((np.isnan(dur) & ~np.isnan(got)).sum()) if missing else 0
    return np.where(np.isnan(dur), got, dur), (f"{filled:,} of {len(dur):,} job(s) have no duration in the trace: "
                                               "theirs come from the speed profiles (iterations / speed at the "
                                               "requested GPUs), as in a run" if filled else None)


def main(argv: list[str] | None = None) -> None:
    from clustersim.experiment import check, compose, load_trace, trace_gpu_demand
    from clustersim.simulator.errors import ConfigError, TraceError

    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return
    try:
        c = check(compose(args))
        with rng.watch() as draws:   # does the seed change the workload?
            table, _ = load_trace(c["trace"], c.get("seed", 0))
            cluster = cluster_mod.from_config(c["cluster"], trace_gpu_demand(table))
            durations, note = profile_durations(c, table, cluster)
        d = info(table, cluster, durations)
        d["warnings"] = warnings(c, table, cluster, d, bool(draws.drawn()), note)
    except (ConfigError, TraceError) as e:
        sys.exit(f"clustersim-trace-info: error: {e}")
    print(format_info(c["trace"]["name"], c["cluster"].get("name") or "cluster", d))


if __name__ == "__main__":
    main()
