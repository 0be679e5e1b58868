"""Peers' policy and placement semantics: Tiresias queue orders, whole-node placement, EDF and
deadline metrics, on hand-made cases whose schedules are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim import policies
from clustersim.policies.placement import strategy
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import RoleSpec
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster, gpu_job, jobs


def run(specs, policy, cl):
    rec = Engine(specs, cl, policy, overhead=ConstantOverhead(), progress=False).run()
    return {s.spec.job_id: s for s in rec.states}, rec


# ------------------------------------------------------------------ Tiresias queue orders
def demote_and_preempt(order):
    """One 4-GPU node, threshold 1000 GPU-s. D (4 GPUs, t=0) crosses it at 250 and is demoted;
    B (2 GPUs, Q0, waiting since 10) takes over and D, demoted and preempted at once, waits in Q1.
    E (4 GPUs, t=300) waits in Q0. B crosses 1000 GPU-s at 750: demoted to Q1 behind D, and E
    preempts it. E ends at 850: Q1 holds D (waiting since 250) and B (demoted and preempted at
    750), and only one of them fits."""
    specs = jobs(gpu_job("D", 0.0, 4, 2000.0), gpu_job("B", 10.0, 2, 2000.0), gpu_job("E", 300.0, 4, 100.0))
    st, _ = run(specs, policies.make("tiresias", thresholds=[1000.0], queue_order=order), cluster())
    assert st["E"].first_start == 750.0 and st["E"].end_time == 850.0
    return st


def test_clustersim_order_puts_a_demoted_and_preempted_job_first_among_the_waiting():
    st = demote_and_preempt("clustersim")
    assert st["B"].preemptions == 1 and st["B"].end_time < st["D"].end_time   # B resumed at 850


def test_tiresias_simulator_order_leaves_a_demoted_and_preempted_job_at_the_back():
    st = demote_and_preempt("tiresias")
    assert st["D"].end_time == pytest.approx(850.0 + 2000.0 - 250.0)        # D resumed at 850
    assert st["B"].end_time > st["D"].end_time


def waited_longer(order):
    """One 4-GPU node, one queue. A (2 GPUs) runs from 0 to 100; B (4 GPUs, t=10) does not fit;
    C (2 GPUs, t=20) runs past it. At 100 B, which entered Q0 before C, fits if C stops."""
    specs = jobs(gpu_job("A", 0.0, 2, 100.0), gpu_job("B", 10.0, 4, 500.0), gpu_job("C", 20.0, 2, 1000.0))
    st, _ = run(specs, policies.make("tiresias", thresholds=[1e9], queue_order=order), cluster())
    return st


def test_pollux_order_lets_a_job_that_waited_longer_preempt_a_later_started_one():
    st = waited_longer("pollux")
    assert st["B"].first_start == 100.0 and st["C"].preemptions == 1
    assert st["C"].end_time == pytest.approx(600.0 + 1000.0 - 80.0)


def test_other_orders_keep_the_running_job_ahead():
    for order in ("clustersim", "tiresias"):
        st = waited_longer(order)
        assert st["C"].preemptions == 0 and st["B"].first_start == pytest.approx(1020.0)


# ------------------------------------------------------------------ whole-node placement
W = RoleSpec("worker", 1, 1.0, 0.0, 0.0, 1, 1)


def free(*gpus):
    return np.array([[g, 32.0, 256.0] for g in gpus], dtype=float)


def test_whole_node_never_splits_a_job_that_fits_on_one_free_node():
    cap = free(4, 4, 4, 4)
    place = strategy("whole_node", cap)
    for f_gpus, n in (((1, 2, 4, 3), 3), ((2, 2, 2, 3), 3), ((4, 1, 1, 1), 2), ((1, 1, 3, 4), 4)):
        f = free(*f_gpus)
        alloc = place(f, (W,), {"worker": n})
        assert len(alloc["worker"]) == 1 and sum(alloc["worker"].values()) == n
        first = strategy("first_fit")(free(*f_gpus), (W,), {"worker": n})
        assert len(first["worker"]) >= 1
    # first-fit splits where whole-node does not
    assert strategy("first_fit")(free(1, 2, 4), (W,), {"worker": 3}) == {"worker": {0: 1, 1: 2}}
    assert place(free(1, 2, 4), (W,), {"worker": 3}) == {"worker": {2: 3}}


def test_whole_node_takes_whole_free_nodes_for_a_larger_job_or_waits():
    place = strategy("whole_node", free(4, 4, 4, 4))
    # nodes 1 and 2 are whole: node 1 takes 4, the remaining 2 go on the first node that holds 2
    assert place(free(3, 4, 4, 2), (W,), {"worker": 6}) == {"worker": {0: 2, 1: 4}}
    f = free(3, 3, 3, 3)   # 12 GPUs free but no node whole
    assert place(f, (W,), {"worker": 6}) is None and (f == free(3, 3, 3, 3)).all()


# ------------------------------------------------------------------ EDF and deadlines
def test_edf_runs_the_earliest_deadline_first_and_preempts_for_it():
    specs = jobs(gpu_job("late", 0.0, 4, 500.0, deadline=5000.0),
                 gpu_job("soon", 100.0, 4, 200.0, deadline=400.0),
                 gpu_job("none", 50.0, 4, 100.0))
    st, rec = run(specs, policies.make("edf"), cluster())
    assert st["soon"].first_start == 100.0 and st["soon"].end_time == 300.0
    assert st["late"].preemptions == 1 and st["late"].end_time == 700.0
    assert st["none"].first_start == 700.0
    t = rec.jobs().to_pydict()
    met = dict(zip(t["job_id"], t["deadline_met"]))
    slack = dict(zip(t["job_id"], t["deadline_slack"]))
    assert met == {"late": True, "soon": True, "none": None}
    assert slack["soon"] == 100.0 and slack["late"] == 4300.0
    assert rec.summary()["deadline_ratio"] == 1.0 and rec.summary()["jobs_with_deadline"] == 2


def test_deadline_ratio_counts_missed_and_fifo_misses_what_edf_meets():
    specs = jobs(gpu_job("late", 0.0, 4, 500.0, deadline=5000.0),
                 gpu_job("soon", 100.0, 4, 200.0, deadline=400.0))
    _, rec = run(specs, policies.make("fifo"), cluster())
    assert rec.summary()["deadline_ratio"] == 0.5
    assert rec.jobs().to_pydict()["deadline_met"] == [True, False]


def test_gpu_use_is_reported_per_gpu_type():
    from clustersim.simulator.cluster import Cluster, NodeGroup
    cl = Cluster([NodeGroup(1, 4, 32, 256, gpu_type="t4"), NodeGroup(1, 4, 32, 256, gpu_type="v100")])
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 0.0, 4, 50.0))
    st, rec = run(specs, policies.make("fifo"), cl)
    s = rec.summary()
    assert s["gpu_seconds_by_type"] == {"t4": 400.0, "v100": 200.0}
    assert s["gpu_util_by_type"] == {"t4": 1.0, "v100": 0.5}
    assert rec.jobs().to_pydict()["gpu_types"] == ["t4", "v100"]
