"""The Optimus testbed experiment (configs/experiment/optimus_testbed.yaml), reduced for CI: one seed
of the 60-job workload with optimus and drf; Optimus must beat DRF on mean JCT (seed 004 §6.2)."""

from __future__ import annotations

import pytest

from clustersim.experiment import check, compose, run


def summary(policy: str, tmp_path, *extra) -> dict:
    cfg = compose(["+experiment=optimus_testbed", f"policy={policy}", "seed=0", "progress=false", *extra])
    s, _ = run(cfg, tmp_path / policy)
    return s


def test_the_experiment_config_is_the_testbed():
    c = check(compose(["+experiment=optimus_testbed", "policy=optimus"]))
    assert c["cluster"]["name"] == "optimus_testbed" and c["overhead"]["kind"] == "stop_resume"
    assert c["trace"]["options"]["generator"] == "optimus" and c["trace"]["options"]["async_share"] == 0.5
    assert c["policy"]["interval"] == 1200 and c["policy"]["overestimate"] == 1.05
    assert c["policy"]["threshold"] is None                           # each job owner's threshold, drawn in 1-2%
    assert (c["profile"]["convergence"]["threshold"], c["profile"]["convergence"]["threshold_max"]) == (0.01, 0.02)


def test_optimus_beats_drf_on_mean_jct(tmp_path):
    opt, drf = summary("optimus", tmp_path), summary("drf", tmp_path)
    assert opt["jobs_finished"] == drf["jobs_finished"] == 60
    assert opt["jct_mean"] < drf["jct_mean"]
