"""Behaviour of the baseline policies on small traces whose right schedule is worked out by hand."""

from __future__ import annotations

import pytest

from clustersim import policies
from clustersim import traces
from clustersim.policies.tiresias import GittinsIndex
from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobSpec, RoleSpec, task_counts
from clustersim.simulator.overhead import ConstantOverhead
from clustersim.simulator.workload import build_jobs
from tests.factories import cluster, gpu_job, jobs


def run(specs, policy, cl, until=None, resume_s=0.0):
    engine = Engine(specs, cl, policy, overhead=ConstantOverhead(resume_s=resume_s), until=until, progress=False)
    rec = engine.run()
    return {s.spec.job_id: s for s in rec.states}, rec, engine


def task_job(job_id, submit, cpu, mem, duration, *, count=1, lo=None, hi=None, tenant=None, index=0):
    role = RoleSpec("worker", count, 0.0, cpu, mem, lo or count, hi or count)
    return JobSpec(index=index, job_id=job_id, submit_time=submit, roles=(role,), total_work=duration,
                   duration=duration, tenant=tenant)


# ---------------------------------------------------------------------------------------------- tiresias
def test_tiresias_keeps_fifo_inside_q0_before_the_threshold():
    # L (4 GPUs x 800 s) never reaches 3250 GPU-s: both stay in Q0, L ran first, S waits
    specs = jobs(gpu_job("L", 0.0, 4, 800.0), gpu_job("S", 500.0, 4, 100.0))
    st, rec, _ = run(specs, policies.make("tiresias"), cluster())
    assert st["S"].first_start == 800.0
    assert rec.summary()["preemptions"] == 0


def test_tiresias_demotes_after_the_threshold_and_preempts_for_a_new_job():
    # L crosses 3250 GPU-s at 812.5 s and drops to Q1; S arrives at 1000 in Q0 and preempts it;
    # L resumes when S is done and pays the 30 s stop-resume cost
    specs = jobs(gpu_job("L", 0.0, 4, 2000.0), gpu_job("S", 1000.0, 4, 100.0))
    policy = policies.make("tiresias")
    st, rec, _ = run(specs, policy, cluster(), resume_s=30.0)
    assert st["S"].first_start == 1000.0 and st["S"].end_time == 1100.0
    assert st["L"].preemptions == 1
    assert st["L"].end_time == pytest.approx(2000.0 + 100.0 + 30.0)


def test_tiresias_starvation_promotion_brings_a_demoted_job_back():
    # L (demoted at 812.5) is preempted at 1000 by a stream of Q0 jobs, one every 300 s. Without
    # promotion it waits for the whole stream (until 3400). With knob 1 it returns to Q0 at 2000,
    # having waited as long as it ran, and runs from 2200 (after s3, ahead of s4) until it
    # crosses 3250 GPU-s again at 3012.5
    stream = [gpu_job(f"s{i}", 1000.0 + 300.0 * i, 4, 300.0) for i in range(8)]
    specs = jobs(gpu_job("L", 0.0, 4, 3000.0), *stream)
    off, _, _ = run(specs, policies.make("tiresias"), cluster(), until=3400.0)
    on, _, _ = run(specs, policies.make("tiresias", starvation_knob=1.0), cluster(), until=3400.0)
    assert off["L"].progress == pytest.approx(1000.0)
    assert on["L"].progress == pytest.approx(1000.0 + 812.5)
    assert on["s4"].first_start == pytest.approx(3012.5)


def test_tiresias_consolidates_skewed_models_only():
    # two 4-GPU nodes; x and y (2 GPUs each) are spread one task per node, leaving 2 GPUs free
    # on each: a 4-GPU vgg16 job must wait for one whole node, a resnet50 job spreads over both
    busy = [gpu_job("x", 0.0, 2, 100.0), gpu_job("y", 0.0, 2, 100.0)]
    for model, start in (("vgg16", 100.0), ("resnet50", 1.0)):
        specs = jobs(*busy, gpu_job("j", 1.0, 4, 50.0, model=model))
        st, _, _ = run(specs, policies.make("tiresias", placement="spread"), cluster(nodes=2))
        assert st["j"].first_start == start, model


def test_tiresias_beats_fifo_on_the_bundled_60_job_trace():
    specs = build_jobs(traces.read("tiresias", "bundled:tiresias/60_job.csv"))
    for nodes in (2, 3):
        fifo = run(specs, policies.make("fifo"), cluster(nodes=nodes), resume_s=30.0)[1].summary()
        tir = run(specs, policies.make("tiresias"), cluster(nodes=nodes), resume_s=30.0)[1].summary()
        assert tir["jct_mean"] < fifo["jct_mean"], nodes


def test_gittins_index_by_hand():
    g = GittinsIndex([100.0, 200.0, 300.0], delta=150.0)
    # a = 0: P(S <= 150) = 1/3; E[min(S, 150)] = (100 + 150 + 150) / 3
    assert g.index(0.0) == pytest.approx((1 / 3) / (400 / 3))
    # a = 100 (passed the first sample): P(S - 100 <= 150 | S > 100) = 1/2; E = (100 + 150) / 2
    assert g.index(100.0) == pytest.approx(0.5 / 125.0)
    assert g.index(150.0) == g.index(100.0)  # constant until the next sample
    assert g.index(300.0) == 0.0              # past every sample


def test_gittins_orders_a_queue_by_index_not_arrival():
    # samples: most jobs are 400 GPU-s, a few are huge. A job that has attained 200 GPU-s is
    # likely to finish soon, so it outranks a fresh one that arrived earlier.
    g = GittinsIndex([100.0] + [400.0] * 8 + [100000.0], delta=3250.0)
    # a = 0: P = 9/10, E = (100 + 8 * 400 + 3250) / 10; a = 100: P = 8/9, E = (8 * 300 + 3250) / 9
    assert g.index(0.0) == pytest.approx(0.9 / 655.0)
    assert g.index(150.0) == pytest.approx((8 / 9) / (5650 / 9))
    assert g.index(150.0) > g.index(0.0)


def test_gittins_preempts_a_job_past_the_likely_sizes_for_a_fresh_one(tmp_path):
    # samples: 100, eight of 400 and one huge. At t = 200, A (4 GPUs) has attained 800 GPU-s, past
    # every likely size: its index is 0 and a fresh job B outranks it and preempts it. Plain 2D-LAS
    # keeps both in Q0 in FIFO order, so B waits until A is demoted at 812.5 s
    sizes = tmp_path / "gput.csv"
    sizes.write_text("duration\n" + "\n".join(["100"] + ["400"] * 8 + ["100000"]) + "\n")
    specs = jobs(gpu_job("A", 0.0, 4, 1000.0), gpu_job("B", 200.0, 4, 100.0))
    gittins = policies.make("tiresias", gittins=True, gittins_distribution=str(sizes))
    st, _, _ = run(specs, gittins, cluster(), resume_s=30.0)
    assert st["B"].first_start == 200.0 and st["A"].preemptions == 1
    assert st["A"].end_time == pytest.approx(1000.0 + 100.0 + 30.0)
    st, _, _ = run(specs, policies.make("tiresias"), cluster())
    assert st["B"].first_start == pytest.approx(812.5)


def test_gittins_distribution_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "gput.csv"
    bad.write_text("duration\n100\nlots\n")
    with pytest.raises(traces.TraceError, match=r"gput\.csv.*3.*duration"):
        policies.make("tiresias", gittins=True, gittins_distribution=str(bad))


def test_gittins_variant_runs_the_bundled_distribution():
    specs = build_jobs(traces.read("tiresias", "bundled:tiresias/60_job.csv"))
    st, rec, _ = run(specs, policies.make("tiresias", gittins=True), cluster(nodes=3))
    assert rec.summary()["jobs_finished"] == 60


# ---------------------------------------------------------------------------------------------- oracles
def test_srtf_preempts_for_a_shorter_job_and_sjf_does_not():
    specs = jobs(gpu_job("long", 0.0, 4, 1000.0), gpu_job("short", 100.0, 4, 50.0))
    st, _, _ = run(specs, policies.make("srtf"), cluster(), resume_s=10.0)
    assert st["short"].first_start == 100.0 and st["short"].end_time == 150.0
    assert st["long"].end_time == pytest.approx(1000.0 + 50.0 + 10.0)
    st, _, _ = run(specs, policies.make("sjf"), cluster())
    assert st["short"].first_start == 1000.0


def test_sjf_starts_the_shortest_waiting_job_first():
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 1.0, 4, 300.0), gpu_job("c", 2.0, 4, 50.0))
    st, _, _ = run(specs, policies.make("sjf"), cluster())
    assert [st[k].first_start for k in "acb"] == [0.0, 100.0, 150.0]


# ---------------------------------------------------------------------------------------------- drf
def test_drf_equalises_dominant_shares_between_two_tenants():
    # Ghodsi et al. §4's example: 9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB>, B's <3 CPU, 1 GB>.
    # Progressive filling gives A 3 tasks and B 2: both dominant shares are 2/3.
    specs = jobs(task_job("a", 0.0, 1.0, 4.0, 1e6, lo=1, hi=20, tenant="A"),
                 task_job("b", 0.0, 3.0, 1.0, 1e6, lo=1, hi=20, tenant="B"))
    for fair_share in ("job", "tenant"):
        cl = Cluster([NodeGroup(1, 0.0, 9.0, 18.0)])
        _, _, engine = run(specs, policies.make("drf", fair_share=fair_share), cl, until=1.0)
        counts = {k: task_counts(s.allocation)["worker"] for k, s in engine.states.items()}
        assert counts == {"a": 3, "b": 2}


def test_drf_by_tenant_shares_between_tenants_not_jobs():
    # tenant A has three jobs, B one; by job each gets 2 of 8 GPU-tasks, by tenant A's jobs share half
    specs = jobs(*(gpu_job(f"a{i}", 0.0, 1, 1e6, min_gpus=1, max_gpus=8, tenant="A") for i in range(3)),
                 gpu_job("b", 0.0, 1, 1e6, min_gpus=1, max_gpus=8, tenant="B"))
    _, _, by_job = run(specs, policies.make("drf"), cluster(nodes=2), until=1.0)
    _, _, by_tenant = run(specs, policies.make("drf", fair_share="tenant"), cluster(nodes=2), until=1.0)
    gpus = lambda e, k: e.states[k].gpus  # noqa: E731
    assert [gpus(by_job, k) for k in ("a0", "a1", "a2", "b")] == [2, 2, 2, 2]
    assert gpus(by_tenant, "b") == 4 and sum(gpus(by_tenant, f"a{i}") for i in range(3)) == 4


def test_drf_grows_ps_worker_jobs_in_one_to_one_bundles_and_reallocates_each_interval():
    cl = lambda: cluster(nodes=2, gpus=4, cpus=32, mem=256)  # noqa: E731
    ps_worker = (RoleSpec("ps", 1, 0.0, 4.0, 10.0, 1, 8), RoleSpec("worker", 1, 1.0, 2.0, 8.0, 1, 8))
    a = JobSpec(0, "a", 0.0, ps_worker, total_work=1e6, duration=1e6)
    b = JobSpec(1, "b", 100.0, ps_worker, total_work=1e6, duration=1e6)
    _, _, engine = run([a, b], policies.make("drf", interval=1200.0), cl(), until=1199.0)
    assert task_counts(engine.states["a"].allocation) == {"ps": 8, "worker": 8}  # work-conserving
    assert engine.states["b"].first_start is None                                # waits for the interval
    _, _, engine = run([a, b], policies.make("drf", interval=1200.0), cl(), until=1201.0)
    assert task_counts(engine.states["a"].allocation) == {"ps": 4, "worker": 4}
    assert task_counts(engine.states["b"].allocation) == {"ps": 4, "worker": 4}


# ---------------------------------------------------------------------------------------------- tetris
def test_tetris_packs_complementary_jobs_together():
    # one node, 10 CPUs and 10 GB: x and y are CPU-heavy <6, 1>, z memory-heavy <1, 6>.
    # Tetris takes x, then z (aligned with the memory left), so x and z run together.
    cl = lambda: Cluster([NodeGroup(1, 0.0, 10.0, 10.0)])  # noqa: E731
    specs = jobs(task_job("x", 0.0, 6.0, 1.0, 100.0), task_job("y", 0.0, 6.0, 1.0, 100.0),
                 task_job("z", 0.0, 1.0, 6.0, 100.0))
    st, _, _ = run(specs, policies.make("tetris", event_driven=True), cl())
    assert st["x"].first_start == 0.0 and st["z"].first_start == 0.0
    assert st["y"].first_start == 100.0
    fifo, _, _ = run(specs, policies.make("fifo"), cl())
    assert fifo["z"].first_start == 100.0  # FIFO leaves z behind y


def test_tetris_weighs_remaining_time():
    # y is much shorter: with the remaining-time term it goes first; without it, alignment ties
    # and arrival order decide
    cl = lambda: Cluster([NodeGroup(1, 0.0, 10.0, 10.0)])  # noqa: E731
    specs = jobs(task_job("x", 0.0, 6.0, 1.0, 1000.0), task_job("y", 0.0, 6.0, 1.0, 10.0))
    st, _, _ = run(specs, policies.make("tetris", event_driven=True), cl())
    assert st["y"].first_start == 0.0 and st["x"].first_start == 10.0
    st, _, _ = run(specs, policies.make("tetris", event_driven=True, srtf_weight=0.0), cl())
    assert st["x"].first_start == 0.0


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name,params", [("tiresias", {"thresholds": [7200, 3250]}), ("drf", {"interval": 0}),
                                         ("drf", {"fair_share": "team"}), ("tetris", {"srtf_weight": -1}),
                                         ("sjf", {"placement": "nowhere"})])
def test_bad_parameters_are_clear_errors(name, params):
    with pytest.raises((ValueError, KeyError)):
        policies.make(name, **params)


def test_tetris_shares_the_cluster_when_bundles_stop_paying():
    """Two ResNext-110 PS jobs on the testbed speed (1GbE, simulator/profiles/optimus.yaml), b ten
    times shorter. Remaining time alone would hand b bundle after bundle up to the 8 GPUs and leave
    a waiting; remaining work (time x resources held) grows once a bundle barely speeds b up, so a
    runs beside it (Optimus §6.1's Tetris packs jobs; Grandl §3.3)."""
    from clustersim.simulator import profiles
    zoo = profiles.load()
    cl = Cluster([NodeGroup(2, 4.0, 32.0, 256.0)])
    roles = (RoleSpec("ps", 1, 0.0, 3.0, 10.0, 1, 8), RoleSpec("worker", 1, 1.0, 2.0, 10.0, 1, 8))
    a = JobSpec(0, "a", 0.0, roles, total_work=1e6, duration=1e6, profile="resnext110")
    b = JobSpec(1, "b", 0.0, roles, total_work=1e5, duration=1e5, profile="resnext110")
    engine = Engine([a, b], cl, policies.make("tetris"), speed=zoo.speed, until=1.0, progress=False)
    engine.run()
    ca, cb = task_counts(engine.states["a"].allocation), task_counts(engine.states["b"].allocation)
    assert ca and cb                                   # both run
    assert cb["worker"] >= ca["worker"]                # the shorter job still comes first
