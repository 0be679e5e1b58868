"""Job-by-job agreement of a peer preset with the peer simulator's own per-job results.

The Pollux simulator's published Tiresias run (``traces/data/pollux/results/tiresias-1.0.csv``,
from petuum/adaptdl osdi21-artifact ``simulator/results-jobload/tiresias-1.0/summary.json``)
gives each job's JCT in each of the eight workloads. This runs ``+experiment=peer_pollux`` on
each workload (plus any overrides) and prints, per workload and over all jobs, the share of jobs
whose JCT is within 1 % and 5 % of the peer's, and the two means.

    .venv/bin/python tools/peer_agreement.py                       # the eight workloads, ~1 min
    .venv/bin/python tools/peer_agreement.py --workloads 6 profile.pollux_throughput=interpolated
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "traces/data/pollux/results/tiresias-1.0.csv"


def peer_jcts(path: Path = RESULTS) -> dict[str, list[float]]:
    """Workload name -> the peer's JCTs, in the workload file's job order."""
    with open(path, newline="") as f:
        return {r["workload"]: [float(x) for x in r["jcts"].split()] for r in csv.DictReader(f)}


def simulated_jcts(workload: str, overrides: list[str]) -> list[float]:
    """JCTs of ``+experiment=peer_pollux`` on one bundled workload, in trace order."""
    from clustersim.experiment import build_engine, compose
    cfg = compose(["+experiment=peer_pollux", f"trace.path=bundled:pollux/workloads/{workload}.csv",
                   "progress=false", *overrides])
    jobs = build_engine(cfg).run().jobs()
    jct = dict(zip(jobs.column("job_id").to_pylist(), jobs.column("jct").to_pylist()))
    with open(ROOT / f"traces/data/pollux/workloads/{workload}.csv", newline="") as f:
        return [jct[r["name"]] for r in csv.DictReader(f)]


def agreement(sim: list[float], peer: list[float]) -> tuple[float, float]:
    """Shares of jobs within 1 % and 5 % of the peer's JCT."""
    rel = np.abs(np.array(sim, dtype=float) / np.array(peer, dtype=float) - 1)
    return float((rel <= 0.01).mean()), float((rel <= 0.05).mean())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="1,2,3,4,5,6,7,8", help="comma-separated workload numbers")
    ap.add_argument("overrides", nargs="*", help="config overrides added to +experiment=peer_pollux")
    args = ap.parse_args(argv)
    peer = peer_jcts()
    all_sim, all_peer = [], []
    for n in args.workloads.split(","):
        w = f"workload-{n.strip()}"
        sim = simulated_jcts(w, args.overrides)
        a1, a5 = agreement(sim, peer[w])
        print(f"{w}: within 1% {a1:6.1%}  within 5% {a5:6.1%}  mean {np.mean(sim):9.1f} s  peer {np.mean(peer[w]):9.1f} s")
        all_sim += sim
        all_peer += peer[w]
    a1, a5 = agreement(all_sim, all_peer)
    print(f"all {len(all_sim)} jobs: within 1% {a1:.1%}  within 5% {a5:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
