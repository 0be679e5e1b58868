"""The Pollux preset against the Pollux simulator's own per-job results (job by job), and the
mechanisms that make it agree: the batch actually run, whole-second epochs, the simulator's
interpolation of unmeasured placements, and the elastic bounds its Optimus uses."""

from __future__ import annotations

import pytest

from clustersim import traces
from clustersim.experiment import build_engine
from clustersim.simulator.errors import ConfigError
from clustersim.simulator.goodput import Application, application
from clustersim.traces import resolve
from tools.peer_agreement import agreement, peer_jcts, simulated_jcts


def test_bert_at_384_runs_at_360_on_6_and_12_gpus():
    bert = application(str(resolve("bundled:pollux/profiles_t4/bert")), 2)
    # max local batch 12 (placements.csv); on 6 GPUs: local ceil(384/6) = 64, accumulation
    # ceil(64/12) - 1 = 5 steps, atomic ceil(64/6) = 11, capped at int(384 / (6 x 6)) = 10:
    # 6 x 10 x 6 = 360. On 12: local 32, accum 2, atomic 11, cap int(384/36) = 10: 12 x 10 x 3 = 360
    assert bert.run_batch(384, 6) == 360 and bert.run_batch(384, 12) == 360
    assert bert.run_batch(384, 4) == 384 and bert.run_batch(384, 8) == 384


def _app_dir(tmp_path):
    """A two-epoch application whose step time is linear: 0.1 + 0.05 nodes + 0.02 replicas +
    0.01 local batch (sync 0.01 x replicas), measured on placements 1 and 2 (one node) and on
    2 nodes x 2 and 2 x 4 replicas (scalability)."""
    def step(n, r, b):
        return 0.1 + 0.05 * n + 0.02 * r + 0.01 * b
    rows = ["placement,local_bsz,step_time,sync_time"]
    for p, n, r in (("1", 1, 1), ("2", 1, 2)):
        rows += [f"{p},{b},{step(n, r, b)},{0.01 * r}" for b in (10, 20)]
    (tmp_path / "placements.csv").write_text("\n".join(rows) + "\n")
    rows = ["num_nodes,num_replicas,local_bsz,step_time,sync_time"]
    rows += [f"2,{r},{b},{step(2, r, b)},{0.01 * r}" for r in (2, 4) for b in (10, 20)]
    (tmp_path / "scalability.csv").write_text("\n".join(rows) + "\n")
    # batch 100 is the reference batch: gain 1, so epoch e needs its progress step in iterations
    (tmp_path / "validation-100.csv").write_text("progress,iteration,grad_sqr,grad_var\n10,10,1,1\n25,25,1,1\n")
    return tmp_path


def test_each_epoch_lasts_whole_seconds_as_the_pollux_simulator_rounds_it(tmp_path):
    app = Application(_app_dir(tmp_path), 2, perf=None)
    # epochs of 10 and 15 iterations; at 4 it/s 2.5 s and 3.75 s, rounded (Python's round, as
    # Job.step): 2 s and 4 s, so 6 s = 24 iterations instead of 25
    assert app.iterations_to_target(100) == pytest.approx(25)
    assert app.iterations_to_target(100, whole_seconds_at=4.0) == pytest.approx(24)


def test_an_unmeasured_placement_is_interpolated_as_the_pollux_simulator_does(tmp_path):
    d = str(_app_dir(tmp_path))
    interp = application(d, 2, None, (0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.5), "interpolated")
    fitted = application(d, 2, None, (0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.5), "fitted")
    # 2 + 1 replicas on 2 nodes at local batch 15, inside the measured points' hull: the linear
    # step time exactly, 0.1 + 0.05 x 2 + 0.02 x 3 + 0.01 x 15 = 0.41 s; sync 0.01 x 3 = 0.03 s
    step, sync = interp.step_time([2, 1], 15)
    assert step == pytest.approx(0.41) and sync == pytest.approx(0.03)
    assert fitted.step_time([2, 1], 15)[0] != pytest.approx(0.41)
    # a measured placement is the measurement under either rule: placement 2 at 15 (interp1d)
    assert interp.step_time([2], 15) == fitted.step_time([2], 15) == pytest.approx((0.1 + 0.05 + 0.04 + 0.15, 0.02))


def test_elastic_pollux_jobs_get_the_bounds_of_the_pollux_simulators_optimus():
    t = traces.read("pollux", "bundled:pollux/workloads/workload-1.csv", elastic=True).to_pydict()
    by = {j: r[0] for j, r in zip(t["job_id"], t["roles"])}
    # cifar10-0: 6 GPUs, batch 2048, least per-GPU batch 32: 1..64; ncf: 1..1; bert-27 (384 / 4): 1..96
    assert (by["cifar10-0"]["count"], by["cifar10-0"]["min_count"], by["cifar10-0"]["max_count"]) == (6, 1, 64)
    assert (by["ncf-2"]["min_count"], by["ncf-2"]["max_count"]) == (1, 1)
    assert by["bert-27"]["max_count"] == 96
    fixed = traces.read("pollux", "bundled:pollux/workloads/workload-1.csv").to_pydict()
    assert fixed["roles"][0][0]["max_count"] == fixed["roles"][0][0]["count"] == 6


@pytest.mark.parametrize("workload", ["workload-2", "workload-8"])
def test_the_pollux_preset_agrees_with_the_pollux_simulators_tiresias_job_by_job(workload):
    peer = peer_jcts()[workload]
    within_1, _ = agreement(simulated_jcts(workload, []), peer)
    assert within_1 == 1.0        # every one of the 160 jobs within 1 % of the peer's JCT
    # the same run at the nominal batch's sizing, the fitted model and exact epochs agrees less
    old = simulated_jcts(workload, ["profile.goodput_unmeasured=fitted", "profile.goodput_whole_seconds=false"])
    assert agreement(old, peer)[0] < 0.8


def test_an_unknown_unmeasured_rule_is_a_config_error():
    from clustersim.experiment import build_engine, compose
    with pytest.raises(ConfigError, match="goodput_unmeasured"):
        build_engine(compose(["+experiment=peer_pollux", "profile.goodput_unmeasured=nearest"]))


def test_queue_order_is_settable_on_policy_tiresias():
    from clustersim.experiment import compose
    cfg = compose(["policy=tiresias", "policy.queue_order=pollux"])
    engine = build_engine(cfg)
    assert engine.policy.queue_order == "pollux"
