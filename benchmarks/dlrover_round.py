"""One DLRover decision round over 100 running PS/worker jobs, NSGA-II included (target: <= 2 s).

100 jobs of the DLRM workload arrive within a second on a cluster that holds them all at their cold
start; the run stops just before the first auto-scaling round (180 s), when every job has
trained at its first configuration. The round is then timed as a search round (a cold start's first
plan is the draft's closed form; every later round searches): for each job the NNLS fit and
NSGA-II's candidates, then the weighted greedy across jobs and the placement of the plans.

    .venv/bin/python benchmarks/dlrover_round.py [--jobs 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from clustersim.experiment import build_engine, compose


def round_time(jobs: int, seed: int = 0) -> tuple[float, int, int]:
    cfg = compose(["+experiment=dlrover_cluster", "policy=dlrover", "policy.history=null", f"seed={seed}",
                   f"trace.options.jobs={jobs}", "trace.options.arrival.rate_per_hour=360000",
                   f"cluster.groups=[{{count: {4 * jobs}, gpus: 0, cpus: 64, mem: 192, gpu_type: none}}]",
                   "until=170", "progress=false"])
    engine = build_engine(cfg)
    engine.run()
    policy = engine.policy
    view = engine._view()
    policy.next_round = view.now          # the round is due now
    for tr in policy.tracks.values():     # a cold start's first plan is [D]'s closed form, no search:
        tr.cold = False                   # time a search round, as every later one is
    t0 = time.perf_counter()
    decision = policy.decide(view)
    return time.perf_counter() - t0, len(view.running), len(decision.allocations)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    times = []
    for r in range(args.repeat):
        dt, running, changed = round_time(args.jobs, seed=r)
        times.append(dt)
        print(f"seed {r}: {running} running jobs, round {dt:.3f} s, {changed} jobs rescaled")
    print(f"median round: {sorted(times)[len(times) // 2]:.3f} s (target <= 2 s)")


if __name__ == "__main__":
    main()
