"""Replay all ten ElasticFlow clusters (69,351 jobs) under FIFO; report wall time, events/s, peak memory.

Each cluster runs on its own cluster of 8-GPU nodes sized to 1.2 x its mean busy GPUs (at
least its largest job), as configs/cluster/auto8.yaml does. Target: under 30 s in all, one core.

    python benchmarks/elasticflow_fifo.py [--policy fifo] [--clusters 01,02]
"""

from __future__ import annotations

import argparse
import resource
import time

import policies
import traces
from clustersim.experiment import trace_gpu_demand
from simulator.cluster import from_config
from simulator.engine import Engine
from simulator.workload import build_jobs

AUTO = {"auto": {"gpus_per_node": 8, "load_factor": 1.2}}


def replay(name: str, policy: str) -> dict:
    table = traces.read("elasticflow", f"bundled:elasticflow/raw/cluster{name}.csv")
    t0 = time.perf_counter()
    cluster = from_config(AUTO, trace_gpu_demand(table))
    engine = Engine(build_jobs(table), cluster, policies.make(policy), progress=False)
    t1 = time.perf_counter()
    recorder = engine.run()
    t2 = time.perf_counter()
    s = recorder.summary()
    return {"cluster": name, "jobs": s["jobs"], "finished": s["jobs_finished"], "gpus": cluster.total_gpus,
            "build_s": t1 - t0, "run_s": t2 - t1, "events": engine.events,
            "jct_mean": s["jct_mean"], "gpu_util": s["gpu_util_mean"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--clusters", default=",".join(f"{i:02d}" for i in range(1, 11)))
    args = ap.parse_args()
    rows, t0 = [], time.perf_counter()
    print(f"{'cluster':>7} {'jobs':>6} {'GPUs':>5} {'build s':>8} {'run s':>7} {'events/s':>9} {'JCT mean s':>11} "
          f"{'GPU util':>8}")
    for name in args.clusters.split(","):
        r = replay(name, args.policy)
        rows.append(r)
        print(f"{r['cluster']:>7} {r['jobs']:>6} {r['gpus']:>5.0f} {r['build_s']:>8.2f} {r['run_s']:>7.2f} "
              f"{r['events'] / r['run_s']:>9,.0f} {r['jct_mean']:>11,.0f} {r['gpu_util']:>8.1%}")
    wall = time.perf_counter() - t0
    jobs = sum(r["jobs"] for r in rows)
    events = sum(r["events"] for r in rows)
    sim = sum(r["run_s"] for r in rows)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"total: {jobs} jobs ({sum(r['finished'] for r in rows)} finished), wall {wall:.1f} s "
          f"(loading included), engine {sim:.1f} s, {events / sim:,.0f} events/s, peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
