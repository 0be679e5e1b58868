"""How far the Shockwave preset's adapted durations are from Shockwave's rules along each job's
actual run pattern.

The ``shockwave`` reader sizes each job by its training time under Shockwave's batch-size
adaptation when it runs round after round (traces/gavel.py ``isolated_seconds``). In a shared run a
job is preempted and resumed; Shockwave's simulator charges each resumed round 20 s, which moves the
round ends where batch-size changes are requested and applied. This reads a run's events.parquet,
replays each job's rules with its resumed rounds charged, and prints how far that job's running time
(training plus charges) is from the run's.

    .venv/bin/clustersim +experiment=peer_shockwave hydra.run.dir=/tmp/sw
    .venv/bin/python tools/shockwave_adaptation_check.py /tmp/sw/events.parquet
"""

from __future__ import annotations

import argparse
import statistics

import pyarrow.parquet as pq

from clustersim import traces
from clustersim.traces.gavel import RESUME_CHARGE_S, Throughputs, isolated_seconds

TRACE = "bundled:shockwave/shockwave_120.trace"
TABLE = "bundled:shockwave/tacc_throughputs.json"
ROUND_S = 120.0


def segments(events, job_id: str) -> list[tuple[float, float]]:
    """The job's running intervals (start or resume to stop or finish)."""
    e = events[events.job_id == job_id].sort_values("time", kind="stable")
    starts = e[e.kind.isin(["start", "resume"])].time.tolist()
    ends = e[e.kind.isin(["stop", "finish"])].time.tolist()
    return list(zip(starts, ends))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("events", help="events.parquet of a +experiment=peer_shockwave run")
    args = ap.parse_args()
    events = pq.read_table(args.events).to_pandas()
    table = Throughputs.read(traces.resolve(TABLE))
    rows = [line.rstrip("\n").split("\t") for line in traces.resolve(TRACE).read_text().splitlines() if line.strip()]
    gaps = []
    for i, r in enumerate(rows):
        model, batch = r[0].rsplit(" (batch size ", 1)
        runs = segments(events, str(i))
        first, k = set(), 0
        for s, f in runs:   # the round index at which each run begins (whole rounds of ROUND_S)
            first.add(k)
            k += max(1, round((f - s) / ROUND_S))
        a = isolated_seconds(model, int(batch[:-1]), int(r[6]), int(r[5]), r[7], float(r[10]), table, ROUND_S,
                             resumed=first.__contains__)
        gaps.append(a.seconds + RESUME_CHARGE_S * a.charged - sum(f - s for s, f in runs))
    size = [abs(g) for g in gaps]
    print(f"{len(size)} jobs: running time under Shockwave's rules along the run's own pattern minus the run's: "
          f"mean |diff| {statistics.mean(size):.1f} s, max {max(size):.1f} s; within 60 s: "
          f"{sum(x <= 60 for x in size)}, within 120 s: {sum(x <= 120 for x in size)}")


if __name__ == "__main__":
    main()
