"""EDL's speed curves: jobs that train at a per-GPU batch on the GPUs they request and keep that
global batch as they scale (EDL §3.1; `profile.batch: per_gpu`, Profile.per_gpu_batch)."""

import pytest

from clustersim import edl_transient
from clustersim.reproductions.edl import straggler_rates
from clustersim.simulator.errors import ConfigError, TraceError
from clustersim.simulator.profiles import load
from clustersim.simulator.workload import Assignment, build_jobs
from clustersim.traces.schema import Role, build_table

ZOO = load()


def _rate(model: str, gpus: int, nodes: int, batch: float) -> float:
    """Iterations/s by the all-reduce formula written out (simulator/speed.py AllReduceSpeed):
    t = c·B/n + f + s·(n-1) + 2(n-1)/n·(a_intra + [nodes > 1]·a_extra)."""
    c, f, s, a_intra, a_extra = ZOO.profile(model).model.theta
    ring = 2 * (gpus - 1) / gpus
    return 1.0 / (c * batch / gpus + f + s * (gpus - 1) + ring * (a_intra + (a_extra if nodes > 1 else 0.0)))


def test_the_global_batch_is_the_tf_benchmarks_per_gpu_batch_times_the_requested_gpus():
    # tf_cnn_benchmarks' per-device defaults: resnet50 64, resnet101 32, alexnet 512
    assert ZOO.profile("resnet50").per_gpu_batch(4) == 256        # 64 x 4
    assert ZOO.profile("resnet50").per_gpu_batch(16) == 1024      # 64 x 16
    assert ZOO.profile("resnet101").per_gpu_batch(8) == 256       # 32 x 8
    assert ZOO.profile("alexnet").per_gpu_batch(2) == 1024        # 512 x 2


def test_a_trace_job_sized_per_gpu_trains_at_that_batch_and_keeps_its_duration():
    """A ResNet-50 job on 4 GPUs: batch 64 x 4 = 256, so its work is 600 s x the rate at
    (4 GPUs, 1 node, 256); a job whose trace gives a batch keeps the trace's."""
    table = build_table({"job_id": ["a", "b"], "submit_time": [0.0, 0.0], "duration": [600.0, 600.0],
                         "model": ["resnet50", "resnet50"], "batch_size": [None, 128],
                         "roles": [[Role("worker", 4, 1.0)], [Role("worker", 4, 1.0)]]})
    a, b = build_jobs(table, "t", Assignment.from_config({"zoo": True, "batch": "per_gpu"}))
    assert a.batch_size == 256 and b.batch_size == 128
    assert a.total_work == pytest.approx(600.0 * _rate("resnet50", 4, 1, 256), rel=1e-12)
    assert b.total_work == pytest.approx(600.0 * _rate("resnet50", 4, 1, 128), rel=1e-12)
    (default,) = build_jobs(table.slice(0, 1), "t", Assignment.from_config({"zoo": True}))
    assert default.batch_size is None            # profile.batch: profile, the zoo's global 64
    assert default.total_work == pytest.approx(600.0 * _rate("resnet50", 4, 1, 64), rel=1e-12)


def test_per_gpu_sizing_of_a_profile_without_a_per_gpu_batch_is_one_line_naming_the_row():
    table = build_table({"job_id": ["x"], "submit_time": [0.0], "duration": [60.0], "model": ["bert"],
                         "roles": [[Role("worker", 2, 1.0)]]})
    with pytest.raises(TraceError, match=r"row 0 \(job 'x'\).*'bert' has no local_batch"):
        build_jobs(table, "t", Assignment.from_config({"zoo": True, "batch": "per_gpu"}))


def test_per_gpu_without_the_zoo_is_a_config_error_not_ignored():
    with pytest.raises(ConfigError, match="profile.batch: per_gpu needs the profile zoo"):
        Assignment.from_config({"name": "linear", "zoo": False, "batch": "per_gpu"})
    with pytest.raises(ConfigError, match="profile.batch"):
        Assignment.from_config({"zoo": True, "batch": "local"})


def test_straggler_removal_keeps_near_15_of_16_at_edl_s_per_gpu_batch():
    """EDL §6.2 Fig. 9b: 16 ResNet-50 GPUs on two 8-GPU machines, one worker at 75%, removed by
    scale-in: EDL measured about 94% of normal (15/16 = 93.75%). At the per-GPU batch (global
    1024, kept on 15 GPUs) the rate ratio is the formula's rate(15, 2 nodes, 1024) / rate(16, 2
    nodes, 1024) = 0.952; at the zoo's global 64 it was 0.994 (one worker fewer cost almost nothing)."""
    r = straggler_rates()
    expected = _rate("resnet50", 15, 2, 1024) / _rate("resnet50", 16, 2, 1024)
    assert r["removed"] / r["normal"] == pytest.approx(expected, rel=1e-9)
    assert 0.9375 < expected < 0.96
    assert r["straggler"] / r["normal"] == pytest.approx(0.75, rel=1e-9)   # the slowest worker sets the pace
    assert _rate("resnet50", 15, 2, 64) / _rate("resnet50", 16, 2, 64) > 0.99


def test_stop_resume_break_even_over_six_cycles_is_the_hand_worked_interval():
    """EDL §5.2 Fig. 10b, 1 idle GPU: per busy-idle cycle of 2L, stop-resume pauses 44 s (Table 2)
    on the scale-out and 44 s on the scale-in; the first cycle starts busy (no scale-in) and the
    window ends at the sixth revocation (its scale-in outside). Over 6 cycles scaling trains
    6(L-44)·S5 + (6L - 5·44)·S4 against 12L·S4 for Tiresias, so it gains from
    L* = 44·(6r + 5) / (6(r - 1)),   r = S5/S4.
    At EDL's per-GPU batch (global 4 x 64 = 256 on one machine) r = 1.1918, L* = 44·12.151/1.1506
    = 464.7 s; at the zoo's global 64, r = 1.1028 and L* = 827 s."""
    r = _rate("resnet50", 5, 1, 256) / _rate("resnet50", 4, 1, 256)
    assert r == pytest.approx(1.1918, abs=1e-4)
    hand = 44.0 * (6 * r + 5) / (6 * (r - 1))
    found = edl_transient.break_even("stop_resume", 60.0, 3600.0, tol=1.0)
    assert found == pytest.approx(hand, abs=2.5)    # 466.2 s: the bisection's 1 s and the instants of decisions
    old = edl_transient.break_even("stop_resume", 60.0, 3600.0, tol=5.0, batch="profile")
    r64 = _rate("resnet50", 5, 1, 64) / _rate("resnet50", 4, 1, 64)
    assert old == pytest.approx(44.0 * (6 * r64 + 5) / (6 * (r64 - 1)), abs=5.0)
