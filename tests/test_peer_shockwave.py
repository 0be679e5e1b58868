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
