"""The peers' presets (docs/peers/) against the figures the peers publish with their workloads."""

from __future__ import annotations

import csv
from functools import cache

import numpy as np

from clustersim.reproduction import Case

POLLUX = "+experiment=peer_pollux"
WORKLOADS = range(1, 9)
# The Pollux artifact's own Tiresias run, per job (petuum/adaptdl osdi21-artifact,
# simulator/results-jobload/tiresias-1.0/summary.json; bundled, docs/peers/pollux.md)
RESULTS = "bundled:pollux/results/tiresias-1.0.csv"
DEPARTURES = ("What still differs per job (queueing cascades after a job placed on another layout than the one "
              "it was sized for): [peers/pollux.md](peers/pollux.md).")


@cache
def peer_jcts(workload: int) -> tuple[np.ndarray, tuple[str, ...]]:
    """The peer's JCT of every job of a workload, and the jobs' names, in the workload's order."""
    from clustersim.traces import resolve
    with open(resolve(RESULTS), newline="") as f:
        jcts = {r["workload"]: [float(x) for x in r["jcts"].split()] for r in csv.DictReader(f)}
    with open(resolve(f"bundled:pollux/workloads/workload-{workload}.csv"), newline="") as f:
        names = tuple(r["name"] for r in csv.DictReader(f))
    return np.array(jcts[f"workload-{workload}"]), names


def _ours(runs, workload: int) -> np.ndarray:
    jobs = runs["tiresias"].jobs.set_index("job_id")["jct"]
    return jobs.loc[list(peer_jcts(workload)[1])].to_numpy(dtype=float)


def _mean(workload: int):
    def metric(runs) -> float:
        return float(_ours(runs, workload).mean())
    return metric


def _within(workload: int, tolerance: float):
    def metric(runs) -> float:
        peer = peer_jcts(workload)[0]
        return 100.0 * float((np.abs(_ours(runs, workload) / peer - 1.0) <= tolerance).mean())
    return metric


def _runs(workload: int) -> dict[str, tuple[str, ...]]:
    return {"tiresias": (POLLUX, f"trace.path=bundled:pollux/workloads/workload-{workload}.csv")}


def _pollux(workload: int) -> list[Case]:
    where = "Pollux artifact, results-jobload"
    return [
        Case(f"pollux_w{workload}_tiresias_mean_jct", "peers", where,
             f"mean JCT of the Pollux preset's Tiresias, workload-{workload}", float(peer_jcts(workload)[0].mean()),
             unit="s", neutral=None, runs=_runs(workload), metric=_mean(workload), departures=DEPARTURES),
        Case(f"pollux_w{workload}_jobs_within_5pct", "peers", where,
             f"workload-{workload}: jobs whose JCT is within 5% of the peer's (the peer: all of them)", 100.0,
             unit="% of jobs", neutral=None, runs=_runs(workload), metric=_within(workload, 0.05),
             departures=DEPARTURES),
    ]


CASES = [c for w in WORKLOADS for c in _pollux(w)]

NOT_REPRODUCIBLE = [
    ("ElasticFlow's 195-job trace", "no published per-job or mean figures ship with the workload "
                                    "([peers/elasticflow.md](peers/elasticflow.md))"),
    ("Shockwave's 120-job trace", "its results ship only as Python pickles and a figure, none bundled in a "
                                  "readable form ([peers/shockwave.md](peers/shockwave.md))"),
    ("Tiresias's 60-job trace", "the peer publishes no figures for it; ours equals the trace's durations "
                                "([peers/tiresias.md](peers/tiresias.md))"),
]
