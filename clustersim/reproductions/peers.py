"""The peers' presets (docs/peers/) against the figures the peers publish with their workloads."""

from __future__ import annotations

from clustersim.reproduction import Case, value

POLLUX = "+experiment=peer_pollux"
# The Pollux artifact's own Tiresias results (petuum/adaptdl osdi21-artifact,
# simulator/results-jobload/tiresias-1.0/summary.json, "avgs"), as docs/peers/pollux.md quotes them
POLLUX_TIRESIAS = {1: 2473.65, 2: 5144.96}


def _pollux(workload: int) -> Case:
    path = () if workload == 1 else (f"trace.path=bundled:pollux/workloads/workload-{workload}.csv",)
    return Case(f"pollux_w{workload}_tiresias_mean_jct", "peers", "Pollux artifact, results-jobload",
                f"mean JCT of the Pollux preset's Tiresias, workload-{workload}", POLLUX_TIRESIAS[workload], unit="s",
                neutral=None, runs={"tiresias": (POLLUX, *path)}, metric=value("jct_mean", "tiresias"),
                departures="Per job the preset differs (jobs sized at the nominal batch, fitted goodput for "
                           "unmeasured placements): [peers/pollux.md](peers/pollux.md).")


CASES = [_pollux(1), _pollux(2)]

NOT_REPRODUCIBLE = [
    ("ElasticFlow's 195-job trace", "no published per-job or mean figures ship with the workload "
                                    "([peers/elasticflow.md](peers/elasticflow.md))"),
    ("Tiresias's 60-job trace", "the peer publishes no figures for it; ours equals the trace's durations "
                                "([peers/tiresias.md](peers/tiresias.md))"),
]
