"""Gavel's max-min fairness (LAS) in rounds, Themis's finish-time fairness, and the Shockwave preset."""

from __future__ import annotations

import pytest

from clustersim.experiment import build_engine, compose
from clustersim.conformance import check_policy
from clustersim.policies.max_min_fairness import MaxMinFairness, time_fractions
from clustersim.simulator.engine import Engine
from tests.factories import cluster, gpu_job, jobs


def _jcts(engine) -> dict[str, float]:
    t = engine.run().jobs()
    return dict(zip(t.column("job_id").to_pylist(), t.column("jct").to_pylist()))


def test_water_filling_gives_small_jobs_their_size_and_splits_the_rest_by_weight():
    class J:
        def __init__(self, job_id, gpus, priority=None):
            self.job_id, self.num_gpus, self.priority = job_id, gpus, priority
    # 8 GPUs over a 1-GPU job and two 8-GPU jobs: lambda = 8/3 > 1 caps the small one at 1;
    # the 7 left split 3.5 / 3.5: fractions 1, 3.5/8, 3.5/8. With weight 3 on c: 7 = lambda x 4,
    # b 1.75 of 8, c 5.25 of 8.
    x = time_fractions([J("a", 1), J("b", 8), J("c", 8)], 8.0)
    assert x == pytest.approx({"a": 1.0, "b": 3.5 / 8, "c": 3.5 / 8})
    x = time_fractions([J("a", 1), J("b", 8), J("c", 8, priority=3)], 8.0)
    assert x == pytest.approx({"a": 1.0, "b": 1.75 / 8, "c": 5.25 / 8})


def test_two_whole_cluster_jobs_take_turns_round_by_round():
    # 4 GPUs, 100 s rounds; a and b each need all 4 GPUs for 200 s: each should run half the time.
    # Round 0: neither has run (first by arrival, then index): a runs 0..100. Round 100: a ran all
    # its time (priority 0.5 / 1), b never: b 100..200. Round 200: both ran half (priority 1):
    # a, by index, 200..300, done (JCT 300). Round 300: b 300..400 (JCT 400).
    specs = jobs(gpu_job("a", 0.0, 4, 200.0), gpu_job("b", 0.0, 4, 200.0))
    engine = Engine(specs, cluster(), MaxMinFairness(round_s=100), progress=False, decision_interval=100)
    assert _jcts(engine) == pytest.approx({"a": 300.0, "b": 400.0})


def test_max_min_fairness_conforms():
    check_policy(MaxMinFairness)


def test_the_shockwave_preset_runs_its_120_jobs_on_32_v100s_in_120_s_rounds():
    cfg = compose(["+experiment=peer_shockwave"])
    assert cfg.policy.round_s == 120 and cfg.policy.decision_interval == 120 and cfg.overhead.resume_s == 20
    engine = build_engine(cfg)
    assert len(engine.jobs) == 120 and engine.cluster.total_gpus == 32


def test_themis_equalises_finish_time_fairness():
    from clustersim.policies.themis import Themis, _min_max_rho

    class J:
        def __init__(self, job_id, gpus):
            self.job_id, self.num_gpus = job_id, gpus
    # 4 GPUs, two 4-GPU jobs at 1 it/s, just arrived (t = 0, C = 0), 100 and 300 iterations left.
    # Equal share: x_iso = min(1, 4 / (2 x 4)) = 0.5, so D = R / 0.5 = 200 and 600 s, and
    # rho = (R / x) / D = 1 / (2x) for both: the largest is least at x = 0.5 each (4 x 0.5 + 4 x 0.5
    # = 4 GPUs), rho = 1. Alone each could reach rho 0.5 (x = 1), but both at 1 need 8 GPUs.
    need = [(J("a", 4), 0.0, 100.0, 1.0, 200.0), (J("b", 4), 0.0, 300.0, 1.0, 600.0)]
    assert _min_max_rho(need, 4.0) == pytest.approx({"a": 0.5, "b": 0.5}, rel=1e-6)
    # on 8 GPUs both run all the time
    assert _min_max_rho(need, 8.0) == pytest.approx({"a": 1.0, "b": 1.0})
    check_policy(Themis)


# ---------------------------------------------------------------- batch-size adaptation (traces/gavel.py)
from clustersim import traces  # noqa: E402
from clustersim.simulator.errors import TraceError  # noqa: E402
from clustersim.traces.gavel import Throughputs, flag, gns_batch, isolated_seconds  # noqa: E402


def test_gns_follows_shockwaves_pattern_table_capped_at_the_models_limit():
    # utils.py get_gns_bs_pattern, LM at 10 on 1 GPU: x2 from epoch 11, x4 from 21, x8 from 41, capped at 80
    assert [gns_batch("LM", 10, 1, e) for e in (0, 10, 11, 20, 21, 40, 41, 500)] == [10, 10, 20, 20, 40, 40, 80, 80]
    # ResNet-18 at 16 on 1 GPU reaches x16 = 256 from epoch 71; ResNet-50 at 32 on 1 GPU has no pattern
    assert gns_batch("ResNet-18", 16, 1, 71) == 256 and gns_batch("ResNet-50", 32, 1, 300) == 32
    # a round's end flags a larger batch one epoch ahead (epoch 10: the pattern's epoch 11 is larger)
    assert flag("gns", "LM", 10, 1, 10, 9) is None and flag("gns", "LM", 10, 1, 10, 10) == "big"
    assert flag("gns", "LM", 10, 1, 80, 100) is None   # at the model's largest batch


def test_accordion_leaves_the_critical_regime_for_the_largest_batch_and_comes_back():
    # _simulate_accordion: ResNet-50's critical regime is epoch % 30 < 10; Transformer never adapts
    assert flag("accordion", "ResNet-50", 32, 1, 32, 9) is None
    assert flag("accordion", "ResNet-50", 32, 1, 32, 10) == "big"
    assert flag("accordion", "ResNet-50", 32, 1, 128, 31) == "small"
    assert flag("accordion", "ResNet-50", 32, 1, 128, 45) is None
    assert flag("accordion", "Transformer", 64, 1, 64, 50) is None
    assert flag("static", "LM", 10, 1, 10, 50) is None


def test_an_accordion_job_alone_runs_round_by_round_as_in_shockwaves_simulator():
    # LM (59,675 samples an epoch) at 10 (5,968 steps an epoch) at 500 steps/s, at 80 (746 steps an
    # epoch) at 100 steps/s; 300,000 steps = ceil(300000 / 5968) = 51 epochs; 120 s rounds.
    t = Throughputs({("LM (batch size 10)", 1): 500.0, ("LM (batch size 80)", 1): 100.0})
    # round 1: 60,000 steps less the 20 s charge: int(60000 x 100 / 120) = 50,000 in 100 s; epoch
    #   ceil(50000 / 5968) = 9 < 10, critical: no request.
    # round 2: 60,000 more (110,000) in 120 s; epoch 19: "big" requested.
    # round 3: 60,000 more (170,000) at 10 in 120 s, then the request applies: batch 80, total
    #   ceil(300000 / 8) = 37,500 (ceil(37500 / 746) = 51 epochs, kept), done ceil(170000 / 5968) = 29
    #   epochs x 746 = 21,634.
    # round 4: 12,000 at 100 steps/s in 120 s (33,634; epoch 46, not critical: no request);
    # round 5: the last 3,866 in 38.66 s. Total 100 + 120 + 120 + 120 + 38.66 = 498.66 s.
    seconds, phases, charged = isolated_seconds("LM", 10, 1, 300000, "accordion", 620.0, t)
    assert seconds == pytest.approx(498.66)
    assert [b for b, _ in phases] == [10, 80] and [s for _, s in phases] == pytest.approx([340.0, 158.66])
    assert charged == 1
    # resumed in round 4 (index 3) as well: 12,000 - 20 s x 100/s = 10,000 steps there (33,634 -> 31,634;
    # epoch ceil(31634 / 746) = 43, no request); round 5 (41,634) would pass 37,500: 5,866 in 58.66 s.
    # 100 + 120 + 120 + 100 + 58.66 = 498.66 s of training again, two charges: the same work, 20 s later.
    again = isolated_seconds("LM", 10, 1, 300000, "accordion", 620.0, t, resumed=lambda k: k in (0, 3))
    assert again.seconds == pytest.approx(498.66) and again.charged == 2
    # without a throughput at 80 the request is refused: 300,000 steps at 500/s, 20 s charged in round 1
    alone = Throughputs({("LM (batch size 10)", 1): 500.0})
    seconds, phases, _ = isolated_seconds("LM", 10, 1, 300000, "accordion", 620.0, alone)
    assert seconds == pytest.approx(600.0) and [b for b, _ in phases] == [10]
    # a job past 1.5 x its trace duration (is_over_deadline) ends at that round's end: 100 + 120 + 120 > 300
    assert isolated_seconds("LM", 10, 1, 300000, "static", 200.0, t)[0] == pytest.approx(340.0)


def test_the_shockwave_reader_sizes_jobs_by_their_adapted_time_alone():
    path = "bundled:shockwave/shockwave_120.trace"
    plain = traces.read("shockwave", path).column("duration").to_pylist()
    adapted = traces.read("shockwave", path, adaptation=True).column("duration").to_pylist()
    # job 25 is static (Recommendation at 512): its steps / V100 throughput, 720 s in the trace
    assert adapted[25] == pytest.approx(plain[25], abs=1.0)
    # job 0 (LM at 10, gns, 1,418 s at its initial batch) doubles to 20 after its 12th round
    assert adapted[0] == pytest.approx(1162.61, abs=0.01) and plain[0] == 1418.0
    # 120 jobs: Recommendation is slower per epoch at 8192 than at 2048 in the table, LM faster at 80
    assert sum(adapted) == pytest.approx(469316.0, abs=1.0) and sum(plain) == pytest.approx(496241.0)


def test_adaptation_needs_shockwaves_layout_and_a_throughput_for_each_job(tmp_path):
    with pytest.raises(TraceError, match="12-field layout"):
        traces.read("shockwave", "bundled:gavel/small_test.trace", adaptation=True)
    p = tmp_path / "t.trace"
    p.write_text("LM (batch size 7)\tpython3 main.py\tlm\t--steps\t1\t100\t1\tgns\t1\t-1.000000\t50\t0\n")
    with pytest.raises(TraceError, match=r"line 1: field 'job_type': no V100 throughput for LM \(batch size 7\)"):
        traces.read("shockwave", p, adaptation=True)
    with pytest.raises(TraceError, match="option round_s"):
        traces.read("shockwave", "bundled:shockwave/shockwave_120.trace", adaptation=True, round_s=0)
    # a round too short for one step of a job (LM at 10: 94.9 steps/s alone on a V100) would never end
    with pytest.raises(TraceError, match=r"line 1: a round of 0.001 s runs no step of LM at batch 10"):
        traces.read("shockwave", "bundled:shockwave/shockwave_120.trace", adaptation=True, round_s=0.001)
