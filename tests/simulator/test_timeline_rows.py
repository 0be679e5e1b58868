"""The timeline keeps a row per change of its values, not per decision: a row's values hold until
the next row, so a decision that changed nothing adds none, and the timeline still integrates to the
jobs' GPU-seconds."""

from __future__ import annotations

import numpy as np

from clustersim.simulator.engine import Engine
from clustersim.simulator.metrics import Recorder
from tests.factories import OnNodeZero, cluster, gpu_job, jobs


class _Cluster:
    """What the recorder reads of a cluster: the resources in use, the totals and the nodes' GPU types."""
    gpu_type = ("generic",)

    def __init__(self):
        self.used = [0.0, 0.0, 0.0]
        self.total = np.array([4.0, 0.0, 0.0])


def _rows(rec: Recorder) -> list[tuple]:
    t = rec.timeline()
    return list(zip(*(t.column(c).to_pylist() for c in ("time", "gpu_used", "running", "pending"))))


def test_a_sample_that_repeats_the_row_before_adds_none_and_an_instant_back_where_it_was_is_dropped():
    cl = _Cluster()
    rec = Recorder(cl)

    def at(t, gpus, running, pending):
        cl.used = [gpus, 0.0, 0.0]
        rec.sample(t, running, pending)

    at(0.0, 4.0, 2, 0)
    at(10.0, 4.0, 2, 0)   # nothing changed: no row
    at(20.0, 4.0, 2, 1)   # one more pending: a row
    at(30.0, 2.0, 1, 1)   # a release ...
    at(30.0, 4.0, 2, 1)   # ... and a start at the same instant: back to 20's values, 30's row dropped
    at(40.0, 4.0, 2, 0)
    at(40.0, 0.0, 0, 0)   # the same instant again: its row replaced (the last one counts)
    assert _rows(rec) == [(0.0, 4.0, 2, 0), (20.0, 4.0, 2, 1), (40.0, 0.0, 0, 0)]


def test_decisions_that_change_nothing_add_no_row_and_the_timeline_integrates_to_the_gpu_seconds():
    # 4 GPUs: a (2 GPUs, 100 s) and b (2 GPUs, 60 s) start at 0; c (2 GPUs, 30 s) arrives at 10 and
    # waits; b ends at 60 and c starts at once (running 2, pending 0: a row); c ends at 90, a at 100.
    # The wake-ups at 25, 50, 75 change nothing: no row (before, each wrote one).
    specs = jobs(gpu_job("a", 0.0, 2, 100.0), gpu_job("b", 0.0, 2, 60.0), gpu_job("c", 10.0, 2, 30.0))
    # (wake-ups every 25 s change nothing here, as Tiresias's queue checks mostly do)
    rec = Engine(specs, cluster(nodes=1, gpus=4), OnNodeZero(wakeup=25.0), progress=False).run()
    rows = _rows(rec)
    assert rows == [(0.0, 4.0, 2, 0), (10.0, 4.0, 2, 1), (60.0, 4.0, 2, 0), (90.0, 2.0, 1, 0), (100.0, 0.0, 0, 0)]
    times = [r[0] for r in rows] + [rec.end_time]
    area = sum(r[1] * (b - a) for r, a, b in zip(rows, times, times[1:]))
    # 4 x 90 + 2 x 10 = 380 = 2 x 100 + 2 x 60 + 2 x 30, the jobs' GPU-seconds
    assert area == sum(s.service for s in rec.states) == 380.0
    assert all(r[1:] != s[1:] for r, s in zip(rows, rows[1:]))   # no row repeats the one before
