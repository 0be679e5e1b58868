"""Replay all ten ElasticFlow clusters (69,351 jobs) under FIFO; report CPU time, events/s, peak memory.

Each cluster runs on its own cluster of 8-GPU nodes sized to 1.2 x its mean busy GPUs (at
least its largest job): configs/cluster/auto8.yaml. The run goes through the same path as
the `clustersim` command (trace pipeline without cache, model zoo, engine). Phases are timed
in CPU seconds of this process. Targets: docs/performance.md.

    python benchmarks/elasticflow_fifo.py [--policy fifo] [--profile zoo|linear] [--clusters 01,02]
"""

from __future__ import annotations

import argparse
import resource
import time

from clustersim.experiment import build_engine, compose, load_trace


def timed(cfg) -> tuple[dict, object, dict]:
    """Load, build, run and summarise one config as `clustersim` does: (CPU seconds per phase, engine,
    summary). CPU time (this process's), not wall: the machines these run on are shared."""
    t0 = time.process_time()
    table, report = load_trace(cfg.trace)
    t1 = time.process_time()
    engine = build_engine(cfg, table, report)
    del table   # as `clustersim` does (experiment.run): the run holds no second copy of the trace
    t2 = time.process_time()
    recorder = engine.run()
    t3 = time.process_time()
    s = recorder.summary()
    t4 = time.process_time()
    return {"load_s": t1 - t0, "build_s": t2 - t1, "run_s": t3 - t2, "summary_s": t4 - t3}, engine, s


def replay(name: str, policy: str, profile: str) -> dict:
    cfg = compose(["trace=elasticflow_raw", f"trace.path=bundled:elasticflow/raw/cluster{name}.csv",
                   "trace.cache.enabled=false", "cluster=auto8", f"policy={policy}", f"profile={profile}",
                   "progress=false"])
    phases, engine, s = timed(cfg)
    return {"cluster": name, "jobs": s["jobs"], "finished": s["jobs_finished"], "gpus": engine.cluster.total_gpus,
            "load_s": phases["load_s"], "build_s": phases["build_s"], "run_s": phases["run_s"], "events": engine.events,
            "jct_mean": s["jct_mean"], "gpu_util": s["gpu_util_mean"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--profile", default="zoo")
    ap.add_argument("--clusters", default=",".join(f"{i:02d}" for i in range(1, 11)))
    args = ap.parse_args()
    rows, t0 = [], time.perf_counter()
    print(f"{'cluster':>7} {'jobs':>6} {'GPUs':>5} {'load s':>7} {'build s':>8} {'run s':>7} {'events/s':>9} "
          f"{'JCT mean s':>11} {'GPU util':>8}")
    for name in args.clusters.split(","):
        r = replay(name, args.policy, args.profile)
        rows.append(r)
        print(f"{r['cluster']:>7} {r['jobs']:>6} {r['gpus']:>5.0f} {r['load_s']:>7.2f} {r['build_s']:>8.2f} "
              f"{r['run_s']:>7.2f} {r['events'] / r['run_s']:>9,.0f} {r['jct_mean']:>11,.0f} {r['gpu_util']:>8.1%}")
    wall = time.perf_counter() - t0
    jobs = sum(r["jobs"] for r in rows)
    events = sum(r["events"] for r in rows)
    sim = sum(r["run_s"] for r in rows)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"total ({args.policy}, profile {args.profile}): {jobs} jobs ({sum(r['finished'] for r in rows)} "
          f"finished), wall {wall:.1f} s, CPU (load {sum(r['load_s'] for r in rows):.1f}, build "
          f"{sum(r['build_s'] for r in rows):.1f}, engine {sim:.1f}), {events / sim:,.0f} events/s, "
          f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
