"""Per-decision cost of a policy with many running jobs: median and p95 of ``decide`` calls.

A synthetic steady state on a big cluster of 8-GPU nodes, run by the real engine (its views,
its decisions): ``--running`` jobs (1, 2, 4 or 8 GPUs, rigid, 4 cores and 20 GB per GPU task)
fill the cluster at t=0, ``--waiting`` more wait behind them, and new jobs arrive as a Poisson
stream at the rate jobs finish, so that the cluster stays full and the queue stays long. Every
``decide`` call after the first (which sees every initial job arrive) is timed, until
``--decisions`` calls; the report gives the median and p95 of all of them and of those that
changed allocations, with the mean numbers of running and waiting jobs they saw.

    python benchmarks/policy_decision.py [--policy tiresias] [--running 1000] [--waiting 500]
                                         [--decisions 3000] [--seed 0]

Target: tiresias under 100 us median with 1,000 running jobs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from clustersim import policies
from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobSpec, RoleSpec

SIZES = (1, 1, 1, 2, 2, 4, 8)   # GPUs per job, drawn uniformly: mean 19/7 GPUs
MEAN_S = 20_000.0               # mean running time of a job (exponential, at least 60 s)


def workload(running: int, waiting: int, decisions: int, seed: int) -> tuple[list[JobSpec], int]:
    """The jobs, and the number of 8-GPU nodes that the first ``running`` of them fill."""
    rng = np.random.default_rng(seed)
    n = running + waiting + 2 * decisions          # enough later arrivals for the timed decisions
    sizes = rng.choice(SIZES, size=n)
    durations = np.maximum(rng.exponential(MEAN_S, size=n), 60.0)
    rate = running / MEAN_S                         # jobs finishing per second at steady state
    later = np.cumsum(rng.exponential(1.0 / rate, size=n - running - waiting))
    submit = np.concatenate((np.zeros(running + waiting), later))
    jobs = []
    for i in range(n):
        g = int(sizes[i])
        role = RoleSpec("worker", g, 1.0, 4.0, 20.0, g, g)
        jobs.append(JobSpec(index=i, job_id=f"j{i}", submit_time=float(submit[i]), roles=(role,),
                            total_work=float(durations[i]), duration=float(durations[i]), model="resnet50"))
    nodes = int(np.ceil(sizes[:running].sum() / 8))
    return jobs, nodes


class Timed:
    """Times the wrapped policy's ``decide`` (everything else is passed through)."""

    def __init__(self, policy, limit: int):
        self.policy, self.limit = policy, limit
        self.oracle = policy.oracle
        self.calls = 0
        self.rows: list[tuple[float, int, int, bool]] = []   # (seconds, running, pending, changed)

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def reset(self, view) -> None:
        self.policy.reset(view)

    def decide(self, view):
        t0 = time.perf_counter()
        decision = self.policy.decide(view)
        dt = time.perf_counter() - t0
        self.calls += 1
        if self.calls > 1:   # the first call sees every initial job arrive
            self.rows.append((dt, len(view.running), len(view.pending), bool(decision.allocations)))
        if len(self.rows) >= self.limit:
            raise _Done
        return decision


class _Done(Exception):
    pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="tiresias")
    ap.add_argument("--running", type=int, default=1000)
    ap.add_argument("--waiting", type=int, default=500)
    ap.add_argument("--decisions", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON (benchmarks/suite.py reads them)")
    args = ap.parse_args()
    jobs, nodes = workload(args.running, args.waiting, args.decisions, args.seed)
    cluster = Cluster([NodeGroup(nodes, 8, 64, 512)])
    timed = Timed(policies.make(args.policy), args.decisions)
    engine = Engine(jobs, cluster, timed, progress=False)
    t0 = time.perf_counter()
    try:
        engine.run()
    except _Done:
        pass
    wall = time.perf_counter() - t0
    rows = timed.rows
    print(f"{args.policy}: {nodes} nodes x 8 GPUs, {len(jobs)} jobs; {len(rows)} decide calls timed "
          f"(run {wall:.1f} s, simulated {engine.now:,.0f} s)")
    out = {"policy": args.policy, "nodes": nodes, "jobs": len(jobs)}
    for label, key, sel in (("all calls", "all", rows),
                            ("calls changing allocations", "changing", [r for r in rows if r[3]])):
        if not sel:
            print(f"  {label}: none")
            continue
        t = sorted(r[0] for r in sel)
        med, p95 = statistics.median(t), t[min(len(t) - 1, int(0.95 * len(t)))]
        running, waiting = statistics.fmean(r[1] for r in sel), statistics.fmean(r[2] for r in sel)
        out[key] = {"calls": len(t), "median_us": med * 1e6, "p95_us": p95 * 1e6, "running": running,
                    "waiting": waiting}
        print(f"  {label:<27} n={len(t):>5}  median {med * 1e6:>8.1f} us  p95 {p95 * 1e6:>8.1f} us  "
              f"(mean running {running:,.0f}, waiting {waiting:,.0f})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))

if __name__ == "__main__":
    main()
