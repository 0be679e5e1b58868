"""Wall time of every registered policy on one bundled trace (named apart from the policies package,
which a script called policies.py would shadow).

    .venv/bin/python benchmarks/policy_times.py [--trace bundled:elasticflow/raw/cluster04.csv] [--format elasticflow]

The cluster is the ``auto8`` config's (8-GPU nodes, 1.2 x the trace's mean busy GPUs).
The periodic policies (drf, tetris) run on their default 20-minute interval.
"""

from __future__ import annotations

import argparse
import time

from clustersim import policies
from clustersim import traces
from clustersim.experiment import compose, trace_gpu_demand
from clustersim.simulator.cluster import from_config
from clustersim.simulator.engine import Engine
from clustersim.simulator.workload import build_jobs

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="bundled:elasticflow/raw/cluster04.csv")
    ap.add_argument("--format", default="elasticflow")
    ap.add_argument("--policies", nargs="*", default=policies.names())
    args = ap.parse_args()
    table = traces.read(args.format, args.trace)
    jobs = build_jobs(table, args.trace)
    auto8, demand = compose(["cluster=auto8"]).cluster, trace_gpu_demand(table)
    print(f"{args.trace}: {len(jobs)} jobs on {from_config(auto8, demand).num_nodes} x 8 GPUs")
    print(f"{'policy':<10} {'wall s':>8} {'JCT mean s':>12} {'preemptions':>12}")
    for name in args.policies:
        cluster = from_config(auto8, demand)
        t0 = time.perf_counter()
        summary = Engine(jobs, cluster, policies.make(name), progress=False).run().summary()
        wall = time.perf_counter() - t0
        print(f"{name:<10} {wall:>8.2f} {summary['jct_mean']:>12,.0f} {summary['preemptions']:>12}")


if __name__ == "__main__":
    main()
