"""FIFO: arrival order, gang placement, no preemption, head-of-line blocking."""

import pytest

from clustersim.policies.fifo import Fifo
from clustersim.simulator.engine import Engine
from tests.factories import cluster, gpu_job, jobs


def run(specs, policy=None, **cl):
    rec = Engine(specs, cluster(**cl), policy or Fifo(), progress=False).run()
    return {s.spec.job_id: s for s in rec.states}, rec


def test_head_of_line_blocks_smaller_jobs_behind_it():
    # one 4-GPU node: a holds 2 GPUs until 100; b (4 GPUs) must wait for it; c (1 GPU) waits behind b
    specs = jobs(gpu_job("a", 0.0, 2, 100.0), gpu_job("b", 1.0, 4, 50.0), gpu_job("c", 2.0, 1, 10.0))
    st, _ = run(specs)
    assert [st[k].first_start for k in "abc"] == [0.0, 100.0, 150.0]
    assert [st[k].end_time for k in "abc"] == [100.0, 150.0, 160.0]


def test_backfill_lets_small_jobs_pass_a_blocked_head():
    specs = jobs(gpu_job("a", 0.0, 2, 100.0), gpu_job("b", 1.0, 4, 50.0), gpu_job("c", 2.0, 1, 10.0))
    st, _ = run(specs, Fifo(backfill=True))
    assert [st[k].first_start for k in "abc"] == [0.0, 100.0, 2.0]


def test_jobs_start_in_arrival_order_when_several_free_up_at_once():
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 5.0, 2, 10.0), gpu_job("c", 6.0, 3, 10.0),
                 gpu_job("d", 7.0, 2, 10.0))
    st, _ = run(specs)
    assert st["b"].first_start == 100.0          # b and d fit together, but c comes before d
    assert st["c"].first_start == 110.0
    assert st["d"].first_start == 120.0


def test_gang_job_spans_nodes_with_all_its_tasks_and_never_preempts():
    specs = jobs(gpu_job("big", 0.0, 8, 30.0), gpu_job("small", 0.0, 2, 30.0))
    engine = Engine(specs, cluster(nodes=3, gpus=4), Fifo(), progress=False)
    first = {}
    engine.policy.decide = _spy(engine.policy.decide, first)
    rec = engine.run()
    assert first["big"] == {"worker": {0: 4, 1: 4}}
    assert first["small"] == {"worker": {2: 2}}
    assert rec.summary()["preemptions"] == 0


def _spy(decide, into):
    def wrapped(view):
        d = decide(view)
        for k, v in d.allocations.items():
            into.setdefault(k, v)
        return d
    return wrapped


def test_every_job_of_the_tiresias_trace_run_alone_takes_its_recorded_duration():
    from clustersim import traces
    from clustersim.simulator.workload import build_jobs
    specs = build_jobs(traces.read("tiresias", "bundled:tiresias/60_job.csv"))
    rec = Engine(specs, cluster(nodes=64, gpus=8), Fifo(), progress=False).run()  # room for all at once
    for st in rec.states:
        assert st.first_start == st.spec.submit_time
        assert st.end_time - st.spec.submit_time == pytest.approx(st.spec.duration, rel=1e-12)
