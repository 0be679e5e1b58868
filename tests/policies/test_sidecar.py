"""SideCar (seed 003): the §II-C case study replayed, Algorithm 1's choice on a hand-computed
state, and the baselines' rules."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim import policies
from clustersim.reproductions.sidecar import POD, CountSpeed, case_study_runs
from clustersim.simulator import overhead
from clustersim.simulator.engine import Engine, Observe

from tests.factories import cluster, gpu_job, jobs

DECLARED = Observe(declared_iterations=True)   # the jobs declare their iterations (§III-C)


def _overhead(kind: str, **kw):
    return overhead.make({"kind": kind, **kw})


def test_case_study_makespans_within_5_percent_of_the_paper():
    """§II-C, Fig. 3: default 1249 s, termination-based reshaping 1143 s, SideCar 845 s."""
    runs = case_study_runs()   # (a) default, (b) reshaping by restarting pods, (c) SideCar
    (default, default_jct), (term, _), (side, jct) = runs["default"], runs["termination"], runs["sidecar"]
    for got, paper in ((default, 1249), (term, 1143), (side, 845)):
        assert got == pytest.approx(paper, rel=0.05), (got, paper)
    assert side < term < default
    assert default_jct["j2"] == pytest.approx(1069, rel=0.05)     # Table I (a): J2 waits for J1
    assert jct["j2"] == pytest.approx(512, rel=0.10)              # (c): early initialisation, 110 s wait


def test_sidecar_reshaping_costs_match_the_case_study():
    """SideCar's in-container restart: 27 s down to 2 GPUs, 37 s up to 4; termination: 204 s, 242 s."""
    side = _overhead("sidecar", early_init=True, **POD)
    pod = _overhead("pod_restart", **POD)
    spec = gpu_job("j", 0, 4, 1.0, min_gpus=1, max_gpus=4)
    four, two = {"worker": {0: 4}}, {"worker": {0: 2}}
    assert side.transition(spec, overhead.Change.SCALE_IN, four, two).pause_s == 27.0
    assert side.transition(spec, overhead.Change.SCALE_OUT, two, four).pause_s == 37.0
    assert pod.transition(spec, overhead.Change.SCALE_IN, four, two).pause_s == 204.0
    assert pod.transition(spec, overhead.Change.SCALE_OUT, two, four).pause_s == 242.0


class Probe:
    """Runs ``inner``, first handing each view it decides on to ``look`` (what a test reads of it)."""

    def __init__(self, inner, look):
        self.inner, self.look, self.name, self.oracle = inner, look, inner.name, inner.oracle

    def reset(self, view):
        self.inner.reset(view)

    def decide(self, view):
        self.look(view)
        return self.inner.decide(view)


class Spy:
    def __init__(self, inner):
        self.inner, self.name, self.oracle = inner, inner.name, inner.oracle
        self.plans = {}

    def reset(self, view):
        self.inner.reset(view)

    def decide(self, view):
        d = self.inner.decide(view)
        for p in self.inner.plans.values():
            self.plans.setdefault(p.job, (view.now, p))
        return d


def test_algorithm1_picks_the_lowest_predicted_makespan():
    """One 8-GPU host, no overhead, container_init 10 s, process restart 0 s; speeds 1, 1.8, 3, 4 it/s
    on 1, 2, 4, 8 GPUs. A (600 it, options {2, 4}) starts on 4 GPUs at 10 s, B (900 it, {1, 2}) on
    2 at 60 s. At 100 s C (1200 it, {1, 2, 4}) arrives with 2 idle GPUs. A has done 270 it, B 72.
    By hand (finish times): C on 1 GPU: C 1310 -> makespan 1310; C on 2: C 776.7, B 560, A 210 ->
    776.7; C on 4 with 2 of A's GPUs: A trains 10 s more on 4 (30 it) then 300 it on 2 -> 276.7,
    C 110 + 1200/3 = 510, B 560 -> 560. SideCar takes 2 GPUs from A."""
    speed = CountSpeed({1: 1.0, 2: 1.8, 4: 3.0, 8: 4.0})
    specs = jobs(gpu_job("a", 0, 4, 1.0, work=600.0, min_gpus=2, max_gpus=4),
                 gpu_job("b", 50, 2, 1.0, work=900.0, min_gpus=1, max_gpus=2),
                 gpu_job("c", 100, 4, 1.0, work=1200.0, min_gpus=1, max_gpus=4))
    pol = Spy(policies.make("sidecar", container_init_s=10.0, process_restart_base_s=0.0,
                            process_restart_per_gpu_s=0.0))
    Engine(specs, cluster(nodes=1, gpus=8), pol, speed=speed, overhead=overhead.ConstantOverhead(), observe=DECLARED).run()
    t, plan = pol.plans["c"]
    assert t == 100 and (plan.gpus, plan.victim, plan.removed) == (4, "a", 2)
    assert pol.plans["a"][1].gpus == 4 and pol.plans["b"][1].gpus == 2


def test_termination_starts_small_and_adds_one_option_step_at_a_time():
    """An arriving job gets its smallest option; with nothing waiting it grows 1 -> 2 -> 4 -> 8,
    each step after the previous restart has finished."""
    pod = _overhead("pod_restart", **POD)
    specs = jobs(gpu_job("a", 0, 4, 1.0, work=1e5, min_gpus=1, max_gpus=8))
    rec = Engine(specs, cluster(nodes=1, gpus=8), policies.make("sidecar_termination"),
                 speed=CountSpeed({1: 1.0, 2: 1.8, 4: 3.0, 8: 4.0}), overhead=pod, observe=DECLARED).run()
    steps = [(e["kind"], e["gpus_after"]) for e in rec.events().to_pylist() if e["kind"] != "finish"]
    assert steps == [("start", 1), ("scale_out", 2), ("scale_out", 4), ("scale_out", 8)]


def test_termination_one_gpu_steps_read_one_by_one_literally():
    """gpu_steps: each restart adds one GPU (§V-B "one by one"), 1 -> 2 -> ... -> 8, speeds
    rising with every GPU (the largest option bounds the count)."""
    pod = _overhead("pod_restart", **POD)
    specs = jobs(gpu_job("a", 0, 4, 1.0, work=1e5, min_gpus=1, max_gpus=8))
    rec = Engine(specs, cluster(nodes=1, gpus=8), policies.make("sidecar_termination", gpu_steps=True),
                 speed=CountSpeed({n: n ** 0.7 for n in range(1, 9)}), overhead=pod, observe=DECLARED).run()
    steps = [e["gpus_after"] for e in rec.events().to_pylist() if e["kind"] in ("start", "scale_out")]
    assert steps == list(range(1, 9))


def test_default_runs_jobs_static_and_out_of_order():
    """A 4-GPU job that cannot fit waits while a later 2-GPU job that fits starts (§VI-A)."""
    specs = jobs(gpu_job("a", 0, 6, 1000.0, work=6000.0, min_gpus=1, max_gpus=8),
                 gpu_job("b", 1, 4, 100.0, work=100.0, min_gpus=1, max_gpus=8),
                 gpu_job("c", 2, 2, 100.0, work=100.0, min_gpus=1, max_gpus=8))
    rec = Engine(specs, cluster(nodes=1, gpus=8), policies.make("k8s_default"),
                 speed=CountSpeed({n: float(n) for n in range(1, 9)}), overhead=overhead.ConstantOverhead()).run()
    first = {s.spec.job_id: s.first_start for s in rec.states}
    assert first["c"] == 2 and first["b"] >= 1000
    assert rec.summary()["rescales"] == 0


def test_every_sidecar_job_type_has_its_profile():
    """The SideCar workloads name each job by its zoo profile (no random draw)."""
    import numpy as np
    from clustersim.simulator.profiles import load
    from clustersim.traces.synthetic import JOB_SET_ONE, JOB_SET_TWO, SIDECAR_PROFILES, sidecar_jobs

    zoo = load()
    for model, _, data in JOB_SET_ONE + JOB_SET_TWO:
        assert zoo.match(SIDECAR_PROFILES[model, data], "gpu").name == SIDECAR_PROFILES[model, data]
    cols = sidecar_jobs(np.random.default_rng(0), "W3")
    assert set(cols["model"]) <= set(SIDECAR_PROFILES.values()) and "sidecar_vgg16" in set(cols["model"])


def test_table4_gpu_types_are_the_profiles_speeds():
    """Table IV (job type 0, 1 GPU): P100 0.25/0.18 and 1080Ti 0.31/0.18 the V100's iteration time,
    K80 3.5x (a choice); every SideCar job type at every GPU count (speed_by_type, sidecar.yaml)."""
    from dataclasses import replace

    from clustersim.simulator.cluster import Cluster, NodeGroup
    from clustersim.simulator.profiles import load
    from clustersim.traces.synthetic import SIDECAR_PROFILES

    zoo = load()
    cl = Cluster([NodeGroup(1, 8, 64, 512, gpu_type=t) for t in ("V100", "P100", "1080Ti", "K80")])
    for profile in SIDECAR_PROFILES.values():
        spec = replace(gpu_job("j", 0, 1, 1.0, min_gpus=1, max_gpus=8), profile=profile, batch_size=128)
        for n in (1, 2, 4, 8):
            t = [1.0 / zoo.speed.rate(spec, {"worker": {h: n}}, cl) for h in range(4)]
            assert t[1] / t[0] == pytest.approx(0.25 / 0.18, rel=1e-4), (profile, n)
            assert t[2] / t[0] == pytest.approx(0.31 / 0.18, rel=1e-4), (profile, n)
            assert t[3] / t[0] == pytest.approx(3.5, rel=1e-4), (profile, n)


def test_job_type_0_trains_at_table_iv():
    """Table IV is the ground truth of SideCar's job types: ResNet-18 at batch 64 takes 0.18 s per
    iteration on one V100 and 0.14 s on two (P100 0.25 / 0.19, 1080Ti 0.31 / 0.23: the 2-GPU
    column within 5% through the 1-GPU factor). By hand, from the zoo's resnet18 terms
    (c, f, s, a) = (9.2264e-4, 8.0723e-3, 1.6458e-4, 4.9154e-3): A = 0.18 / (64c + f) = 0.18 /
    0.067121 = 2.6817; B = (0.14 - A(32c + f)) / (s + a) = (0.14 - 0.100821) / 0.0050800 = 7.7118.
    Every other type is its zoo profile with the same two factors."""
    from dataclasses import replace

    from clustersim.simulator.cluster import Cluster, NodeGroup
    from clustersim.simulator.profiles import load

    zoo = load()
    cl = Cluster([NodeGroup(1, 8, 64, 512, gpu_type=t) for t in ("V100", "P100", "1080Ti")])
    spec = replace(gpu_job("j", 0, 1, 1.0, min_gpus=1, max_gpus=8), profile="sidecar_resnet18", batch_size=64)
    t = {(h, n): 1.0 / zoo.speed.rate(spec, {"worker": {h: n}}, cl) for h in range(3) for n in (1, 2)}
    assert t[0, 1] == pytest.approx(0.18, rel=1e-4) and t[0, 2] == pytest.approx(0.14, rel=1e-4)
    assert t[1, 1] == pytest.approx(0.25, rel=1e-4) and t[2, 1] == pytest.approx(0.31, rel=1e-4)
    assert t[1, 2] == pytest.approx(0.19, rel=0.05) and t[2, 2] == pytest.approx(0.23, rel=0.05)
    base = [float(x) for x in zoo.profiles["resnet18"].model.theta]
    a = 0.18 / (64 * base[0] + base[1])
    b = (0.14 - a * (32 * base[0] + base[1])) / (base[2] + base[3])
    assert (a, b) == pytest.approx((2.6817, 7.7118), rel=1e-4)
    for name in ("resnet34", "resnet8_cifar10", "lenet_mnist"):   # the same testbed factors on every type
        th = [float(x) for x in zoo.profiles[name].model.theta]
        want = [th[0] * a, th[1] * a, th[2] * b, th[3] * b, th[4] * b]
        assert [float(x) for x in zoo.profiles[f"sidecar_{name}"].model.theta] == pytest.approx(want, rel=1e-5)


def test_predictions_use_the_speed_the_engine_trains_at():
    """On a V100 + P100 cluster SideCar predicts each host's iteration time from the job's profile
    on that host's GPU type: the engine's own speed, so a P100 host predicts 1.389x V100's."""
    from dataclasses import replace

    from clustersim.simulator.cluster import Cluster, NodeGroup
    from clustersim.simulator.profiles import load

    zoo = load()
    cl = Cluster([NodeGroup(1, 8, 64, 512, gpu_type="V100"), NodeGroup(1, 8, 64, 512, gpu_type="P100")])
    spec = replace(gpu_job("j", 0, 2, 1.0, work=5000.0, min_gpus=1, max_gpus=8), profile="sidecar_resnet18", batch_size=64)
    pol = policies.make("sidecar")
    seen = []

    def look(view):
        for jv in [*view.pending.values(), *view.running.values()]:
            seen.append([pol.t_iter(jv, n, h, view) for h in (0, 1) for n in (1, 4)])

    Engine(jobs(spec), cl, Probe(pol, look), speed=zoo.speed, overhead=overhead.ConstantOverhead()).run()
    truth = [1.0 / zoo.speed.rate(spec, {"worker": {h: n}}, cl) for h in (0, 1) for n in (1, 4)]
    assert seen and seen[0] == pytest.approx(truth, rel=1e-12)
    assert seen[0][2] / seen[0][0] == pytest.approx(0.25 / 0.18, rel=1e-4)


def test_sidecar_reads_declared_iterations_not_ground_truth():
    """Not an oracle: the remaining iterations are the declared ones less those done; without a
    declaration, the mean of the finished jobs of the model (else undeclared_iterations)."""
    from clustersim.simulator.job import JobState
    from clustersim.simulator.view import JobView, Observer

    pol = policies.make("sidecar", undeclared_iterations=500.0)
    assert not pol.oracle and "oracle" not in pol.tags
    obs = Observer()
    spec = gpu_job("a", 0, 2, 1.0, work=1200.0, model="resnet18")
    assert pol.remaining(JobView(JobState(spec), obs, False, 1200.0)) == 1200.0
    undeclared = JobView(JobState(spec), obs, False)
    with pytest.raises(Exception):
        undeclared.total_work            # ground truth stays hidden
    pol.sizes = {}
    assert pol.remaining(undeclared) == 500.0
    pol.sizes = {"resnet18": [3000.0, 2], None: [4000.0, 4]}
    assert pol.remaining(undeclared) == 1500.0
    pol.sizes = {"vgg16": [3000.0, 1], None: [3000.0, 1]}
    assert pol.remaining(undeclared) == 3000.0


@pytest.mark.parametrize("policy, pending", [({"name": "k8s_default"}, 4), ({"name": "sidecar", "container_init_s": 83}, 2)])
def test_fig8_counts_a_job_pending_until_its_container_is_launched(tmp_path, policy, pending):
    """Fig. 8's case at the last submission (1000 s). A: arrived 900, first start 1050; B: arrived
    1000, first start 1083; C: arrived 950, first start 1100; D: never started. Under the default
    the first start is the launch: all four are pending after 1000 s. Under SideCar the container
    launched K_c = 83 s before the first start: A at 967 and B at 1000 are launched by 1000 s, C at
    1017 is not, nor is D: 2 pending."""
    import json

    import pandas as pd

    from clustersim.reproduction import Run
    from clustersim.reproductions.sidecar import _pending_at_last_arrival

    (tmp_path / "run.json").write_text(json.dumps({"config": {"policy": policy}}))
    run = Run(tmp_path, {})
    run.__dict__["jobs"] = pd.DataFrame({"submit_time": [900.0, 1000.0, 950.0, 990.0],
                                         "first_start": [1050.0, 1083.0, 1100.0, float("nan")]})
    assert _pending_at_last_arrival("x")({"x": run}) == pending


def _curve_job(done: float, **kw):
    """A job of 1,800 iterations that reports a noise-free curve l(k) = 1/(k + 1) every 100
    iterations (Eq. 1 with b = (1, 1, 0)), declares none, with ``done`` iterations done."""
    from clustersim.simulator.convergence import LossCurve
    from clustersim.simulator.job import JobState
    from clustersim.simulator.view import JobView, Observer

    curve = LossCurve((1.0, 1.0, 0.0), iters_per_epoch=100.0, epochs=18, noise=0.0, threshold=0.01)
    spec = gpu_job("a", 0, 2, 1.0, work=1800.0, model="resnet18", curve=curve, **kw)
    state = JobState(spec)
    state.progress = done
    return JobView(state, Observer(), False)


@pytest.mark.parametrize("name", ["sidecar", "sidecar_termination"])
def test_e7_predicts_the_iterations_from_the_fitted_curve_by_hand(name):
    """E7 (§III-C-1) on four reported points. At 430 iterations the job has reported the losses at
    100, 200, 300, 400: 1/2, 1/3, 1/4, 1/5. The fit divides by the largest, 1/2: y = 2/(k + 1) =
    1/(0.5 k + 0.5), which b2 = 0 (the first of the grid) fits exactly: b = (0.5, 0.5, 0), error 0.
    The owner's rule: the drop of the curve over a point, over the first point's loss l(1) = 1,
    below 1% for 5 points in a row. drop(k) = 2/k - 2/(k + 1) = 2/(k (k + 1)) < 0.01 first at
    k = 14 (14 x 15 = 210 > 200; 13 x 14 = 182 is not); 5 points below: k = 14 + 5 - 1 = 18.
    Predicted 18 x 100 = 1,800 iterations, 1,800 - 430 = 1,370 left (the truth: the curve's own)."""
    pol = policies.make(name, undeclared_iterations=500.0)
    pol.sizes = {}
    jv = _curve_job(430.0)
    assert len(jv.loss_observations) == 4
    assert pol.fitted_total(jv) == pytest.approx(1800.0, rel=1e-9)
    assert pol.remaining(jv) == pytest.approx(1370.0, rel=1e-9)


def test_e7_falls_back_before_three_points_and_never_predicts_past_the_last_point():
    """Two points (250 iterations): no fit (three coefficients need three points): the mean of the
    model's finished jobs, 1,500 - 250 = 1,250, else undeclared_iterations, 500 - 250 = 250. At
    1,850 iterations (18 points, the fit's 18 reached but the job still runs: its rule did not fire)
    the job needs at least the next point: 19 x 100 - 1,850 = 50. Off (accuracy_fit false): the mean."""
    pol = policies.make("sidecar", undeclared_iterations=500.0)
    pol.sizes = {}
    assert pol.fitted_total(_curve_job(250.0)) is None
    assert pol.remaining(_curve_job(250.0)) == 250.0
    pol.sizes = {"resnet18": [3000.0, 2], None: [3000.0, 2]}
    assert pol.remaining(_curve_job(250.0)) == 1250.0
    late = _curve_job(1850.0)
    late._state.spec = replace(late._state.spec, total_work=4000.0)   # still running past the fit's end
    assert len(late.loss_observations) == 18
    assert pol.remaining(late) == pytest.approx(50.0, rel=1e-9)
    off = policies.make("sidecar", accuracy_fit=False)
    off.sizes = {"resnet18": [3000.0, 2], None: [3000.0, 2]}
    assert off.remaining(_curve_job(430.0)) == 1500.0 - 430.0


@pytest.mark.parametrize("cross_host", [True, False])
def test_termination_restarts_a_job_on_another_host(cross_host):
    """Two 4-GPU hosts, eight jobs at 0 s placed on the host with the most idle GPUs: the rigid
    1-GPU r0, r2, r4, r6 on host 0, r1, r3, r5 and the elastic a (1-4 GPUs) on host 1, which is
    then full. r0, r2, r4, r6 end first and leave host 0 idle. A termination step restarts a as a
    new pod (§III-A), which may land on host 0 with its next option, 2 GPUs, and then grow there to 4;
    kept on its own host, a stays at 1 GPU until r1, r3, r5 end."""
    pod = _overhead("pod_restart", **POD)
    rigid = [gpu_job(f"r{i}", 0, 1, 100.0 if i % 2 == 0 else 5e4) for i in range(7)]
    specs = jobs(*rigid, gpu_job("a", 0, 1, 1.0, work=1e5, min_gpus=1, max_gpus=4))
    rec = Engine(specs, cluster(nodes=2, gpus=4), policies.make("sidecar_termination", cross_host=cross_host),
                 speed=CountSpeed({1: 1.0, 2: 1.8, 4: 3.0}), overhead=pod, observe=DECLARED).run()
    steps = [(e["kind"], e["gpus_after"], e["time"]) for e in rec.events().to_pylist()
             if e["job_id"] == "a" and e["kind"] != "finish"]
    long_end = max(s.end_time for s in rec.states if s.spec.job_id in ("r1", "r3", "r5"))
    if cross_host:
        assert [k for k, n, _ in steps] == ["start", "scale_out", "scale_out"]
        assert [n for _, n, _ in steps] == [1, 2, 4] and steps[1][2] < 1000 < long_end
    else:
        assert steps[0][:2] == ("start", 1) and all(t >= long_end for _, _, t in steps[1:])


@pytest.mark.parametrize("name", ["sidecar", "sidecar_termination"])
def test_the_scheduler_predicts_the_checkpoint_the_overhead_charges(name):
    """A restart's checkpoint, written and read back (C(τ), notes/sidecar.md §3.6): VGG16's profiled
    1.104 GB at 0.25 GB/s is 4.416 s each way, read by the policy through ``JobView.profiled.costs``,
    the per-model costs the engine's overhead model charges; nothing when the policy does not charge it."""
    from clustersim.simulator.profiles import load

    zoo = load()
    spec = replace(gpu_job("j", 0, 2, 1.0, work=5000.0, min_gpus=1, max_gpus=8), profile="sidecar_vgg16", batch_size=64)
    on, off = policies.make(name, checkpoint_gb_per_s=0.25), policies.make(name)
    seen = []

    def look(view):
        seen.extend((on.checkpoint_s(jv), off.checkpoint_s(jv)) for jv in view.pending.values())

    ov = overhead.PodRestart(costs_of=zoo.costs_of, checkpoint_gb_per_s=0.25)
    Engine(jobs(spec), cluster(nodes=1, gpus=8), Probe(on, look), speed=zoo.speed, overhead=ov).run()
    assert seen[0] == (pytest.approx(1.104 / 0.25), 0.0)
