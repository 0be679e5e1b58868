"""The running jobs a Tiresias plan did not admit (``stops``) are released for the plan to place its
starting jobs, then kept on their nodes where nothing took them. Tiresias keeps each job's rows per
node across plans (while its allocation stays the same object) and releases and keeps them on the
touched rows read once: at every plan the released matrix must equal, bit for bit, what
``placement.release`` job by job gives (each job's rows worked out again), and the jobs kept must be
those ``placement.keep_in_place`` job by job keeps, or a decision would change."""

import numpy as np
import pytest

from clustersim.policies.elastic_tiresias import ElasticTiresias
from clustersim.policies.placement import keep_in_place, keep_rows, release, release_rows
from clustersim.policies.tiresias import Tiresias
from clustersim.simulator.engine import Engine
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster
from tests.policies.overloaded import Curves, overloaded


class FullRelease:
    """Checks each plan's release and keep of its stops against the job-by-job placement calls."""

    def __init__(self, **params):
        super().__init__(**params)
        self.released = self.kept = self.stopped = self.reused = self.changed = 0

    def _release(self, free, stops):
        for job in stops:   # the rows kept on the record: still this allocation's, or worked out again
            if job.alloc is job.view.allocation:
                self.reused += 1
            elif job.alloc is not None:
                self.changed += 1
        full = free.copy()
        for job in stops:
            release(full, job.view)
        got = super()._release(free, stops)
        assert free.tobytes() == full.tobytes()   # the same floats: placement reads these rows
        self.released += len(stops)
        return got

    def _keep(self, free, stops, released):
        full = free.copy()
        want = [keep_in_place(full, job.view) for job in stops]
        got = super()._keep(free, stops, released)
        assert got == want
        self.kept += sum(want)
        self.stopped += len(want) - sum(want)
        return got


class CheckedTiresias(FullRelease, Tiresias):
    pass


class CheckedElasticTiresias(FullRelease, ElasticTiresias):
    pass


@pytest.mark.parametrize("params", [
    {},
    {"queue_order": "pollux"},
    {"gittins": True, "gittins_delta": 100.0},
    {"placement": "consolidate", "starvation_knob": 1.0},
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
@pytest.mark.parametrize("seed", range(2))
def test_tiresias_stops_released_and_kept_as_job_by_job(params, seed):
    """Random overloaded runs (rigid at their request, some CPU demands that bind, demotions after
    60 and 600 GPU-s): every plan that starts a job releases its stops to the same matrix and keeps
    the same ones as placement's calls job by job; some stops are kept, some stopped, and the rows
    kept on a job's record are reused."""
    pol = CheckedTiresias(thresholds=[60.0, 600.0], **params)
    rec = Engine(overloaded(seed), cluster(nodes=3, gpus=4, cpus=16), pol, progress=False).run()
    assert rec.summary()["jobs_finished"] == 80
    assert pol.kept > 20 and pol.stopped > 5 and pol.reused > 20


@pytest.mark.parametrize("stop_free", [False, True], ids=["stop-resume", "stop-free"])
@pytest.mark.parametrize("seed", range(2))
def test_elastic_tiresias_stops_released_and_kept_as_job_by_job(stop_free, seed):
    """The same under Elastic-Tiresias, whose stops are mostly the jobs R1 started below their
    request and whose allocations R1 and R2 change (the rows kept on a record are worked out again
    after such a change), two-role jobs among them."""
    pol = CheckedElasticTiresias(thresholds=[50.0, 400.0], compaction_threshold=2)
    rec = Engine(overloaded(seed, two_role=True), cluster(nodes=3, gpus=4, cpus=16), pol, speed=Curves(),
                 overhead=ConstantOverhead(start_s=5.0, resume_s=5.0, rescale_s=8.0, stop_free=stop_free,
                                           pause_s=2.0), progress=False).run()
    assert rec.summary()["jobs_finished"] == 80
    assert pol.kept > 20 and pol.stopped > 0 and pol.reused > 20 and pol.changed > 0


def test_stops_sharing_a_node_kept_in_priority_order():
    """Two 4-GPU nodes. Free: node 0 (1 GPU, 4 cores, 10 GB), node 1 (0, 2, 10). Stop a (first in
    priority) holds 1 GPU + 2 cores on node 0; stop b holds 2 GPUs + 2 cores on node 0 and 1 GPU +
    1 core on node 1. Released: node 0 = (1 + 1 + 2, 4 + 2 + 2, 10) = (4, 8, 10), node 1 = (1, 3, 10).
    A starting job then takes 2 GPUs on node 0: (2, 8, 10). a is kept (1 <= 2 GPUs), leaving
    (1, 6, 10); b wants 2 GPUs there, 1 is left: b stops."""
    free = np.array([[1.0, 4.0, 10.0], [0.0, 2.0, 10.0]])
    a = {0: [1.0, 2.0, 0.0]}
    b = {0: [2.0, 2.0, 0.0], 1: [1.0, 1.0, 0.0]}
    release_rows(free, [a, b])
    assert free.tolist() == [[4.0, 8.0, 10.0], [1.0, 3.0, 10.0]]
    free[0, 0] -= 2.0   # the starting job's placement
    started = free.copy()
    assert keep_rows(free, [a, b]) == [True, False]
    assert free.tolist() == [[1.0, 6.0, 10.0], [1.0, 3.0, 10.0]]   # a took its node-0 row back: (2 - 1, 8 - 2, 10)
    # in the other order b fits (2 <= 2 GPUs on node 0, 1 <= 1 on node 1), leaving node 0 no GPU for a
    assert keep_rows(started, [b, a]) == [True, False]
    assert started.tolist() == [[0.0, 6.0, 10.0], [0.0, 2.0, 10.0]]
