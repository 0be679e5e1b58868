"""Calibration pieces that need no torch: the point store, the fits, the written profile's loader
path, and the command's message when torch is absent. These run in CI without the extra."""

import json
import subprocess
import sys

import numpy as np
import pytest

from clustersim.simulator import profiles
from clustersim.simulator.calibration import fit
from clustersim.simulator.calibration.store import PointStore, point_key
from clustersim.simulator.convergence import loss
from clustersim.simulator.speed import OptimusSpeed

THETA = [1.02, 2.78, 4.92, 0.0, 0.02]   # Optimus Table 2, ResNet-50 sync: shape only (docs/models/speed.md)


def grid(noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    truth = OptimusSpeed("sync", 8.0, THETA)
    return [{"p": p, "w": w, "samples_per_s": float(truth.predict((p, w))[0]) * (1 + noise * rng.standard_normal())}
            for p in (1, 2, 3) for w in (1, 2, 3, 4)]


def test_store_keeps_points_across_reopen_and_skips_a_line_cut_short(tmp_path):
    path = tmp_path / "points.jsonl"
    s = PointStore(path)
    k1, k2 = point_key("ps", p=1, w=2), point_key("ps", p=2, w=2)
    s.add(k1, {"kind": "ps", "v": 1.0})
    with open(path, "a") as f:
        f.write('{"key": "torn", "kind": "ps", "v"')          # a kill mid-write
    again = PointStore(path)
    assert k1 in again and "torn" not in again and again.torn == 1
    again.add(k2, {"kind": "ps", "v": 2.0})
    third = PointStore(path)
    assert [r["v"] for r in third.of_kind("ps")] == [1.0, 2.0]
    assert point_key("ps", w=2, p=1) == k1                     # field order does not matter


def test_ps_fit_reports_a_finite_heldout_error_close_to_the_noise():
    out = fit.fit_ps(grid(), "sync", 8.0, test_fraction=0.3, repeats=10)
    h = out["heldout"]
    assert np.isfinite(h["error"]) and 0 < h["error"] < 0.05
    assert h["train_points"] == 8 and h["test_points"] == 4 and len(h["splits"]) == 10
    assert len(out["theta"]) == 5 and out["mape"] < 0.05


def test_heldout_error_is_refused_with_a_reason_when_too_few_points_remain():
    h = fit.fit_ps(grid()[:6], "sync", 8.0, test_fraction=0.3, repeats=3)["heldout"]
    assert h["error"] is None and "coefficients" in h["reason"]


def test_convergence_fit_predicts_held_out_epochs_of_an_eq1_curve():
    b = (0.3, 1.0, 0.05)
    y = list(loss(b, np.arange(1, 31)))
    out = fit.fit_convergence(y, 0.7, threshold=0.01, patience=3)
    assert out["heldout"]["error"] < 0.01 and out["error"] < 0.01
    assert out["heldout"]["train_epochs"] == 21


def test_overhead_fit_gives_model_costs_and_leave_one_size_out_error():
    # stop-resume (n_old, n_new): pause, save, exit, restore -> a resume (relaunch to first
    # iteration) is pause - save - exit: 5 - 0.5 - 0.5 = 4, 6 - 1 - 0 = 5, 4 - 0.5 - 0.5 = 3; median 4;
    # a start is that without the restore: 4 - 0.2 = 3.8, 5 - 0.4 = 4.6, 3 - 0.1 = 2.9; median 3.8
    recs = [{"mechanism": "stop_resume", "n_old": a, "n_new": b, "pause_s": p, "save_s": sv, "exit_s": ex,
             "restore_s": rs, "checkpoint_gb": 0.01}
            for (a, b), p, sv, ex, rs in (((1, 2), 5.0, 0.5, 0.5, 0.2), ((2, 3), 6.0, 1.0, 0.0, 0.4),
                                          ((2, 1), 4.0, 0.5, 0.5, 0.1))]
    recs += [{"mechanism": "stop_free", "n_old": a, "n_new": b, "pause_s": p, "prepare_s": 4.0}
             for (a, b), p in (((1, 2), 0.5), ((2, 3), 0.5))]
    recs += [{"mechanism": "stop_free", "n_old": a, "n_new": b, "pause_s": 0.2, "scale_in_s": s}
             for (a, b), s in (((2, 1), 1.0), ((3, 2), 1.4))]
    out = fit.fit_overhead(recs)
    # stop_resume_s: median(5, 6, 4) = 5; scale-outs median(5, 6) = 5.5, the scale-in 4;
    # scale_in_s: median(1.0, 1.4) = 1.2
    assert out["costs"] == pytest.approx({"launch_s": 3.8, "resume_s": 4.0, "stop_resume_s": 5.0, "checkpoint_gb": 0.01,
                                          "stop_resume_out_s": 5.5, "stop_resume_in_s": 4.0,
                                          "stop_free_prepare_s": 4.0, "stop_free_pause_s": 0.5, "scale_in_s": 1.2})
    assert out["not_measured"] == []
    # leave one size out: 5 from median(4, 6) = 5 -> 0; 6 from median(5, 4) = 4.5 -> 1.5/6;
    # 4 from median(5, 6) = 5.5 -> 1.5/4; mean (0 + 0.25 + 0.375) / 3
    assert out["heldout"]["stop_resume_s"]["error"] == pytest.approx((0 + 0.25 + 0.375) / 3)
    assert out["heldout"]["stop_free_pause_s"]["error"] == 0.0
    # 1.0 from 1.4 -> 0.4; 1.4 from 1.0 -> 0.4/1.4
    assert out["heldout"]["scale_in_s"]["error"] == pytest.approx((0.4 + 0.4 / 1.4) / 2)


def test_an_optimus_profile_fits_its_points_at_load_and_rates_jobs_by_them(tmp_path):
    pts = grid(noise=0.0)
    (tmp_path / "p.yaml").write_text(json.dumps({"m_ps": {
        "family": "ps", "batch_size": 8, "speed": {"kind": "optimus", "mode": "sync",
                                                   "points": [[r["p"], r["w"], r["samples_per_s"]] for r in pts]}}}))
    prof = profiles.load([tmp_path / "p.yaml"]).profile("m_ps")
    want = OptimusSpeed("sync", 8.0).fit(fit.ps_samples(pts)).predict((2, 3))[0]
    assert prof.model.predict((2, 3))[0] == pytest.approx(want)
    (tmp_path / "bad.yaml").write_text(json.dumps({"m": {"family": "gpu", "batch_size": 8,
                                                         "speed": {"kind": "optimus", "points": []}}}))
    with pytest.raises(profiles.ProfileError, match="family ps"):
        profiles.load([tmp_path / "bad.yaml"])


def test_the_command_without_torch_says_how_to_install_it(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "from clustersim.simulator.calibration import cli, fit, write, store\n"
            "cli.main()")
    # in a scratch folder: Hydra makes the run's output folder (calibration/<name>) where it starts
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode != 0 and "clustersim[calibrate]" in p.stderr and "torch==2.13.0" in p.stderr


def test_a_sweep_too_small_for_its_model_is_refused_before_measuring():
    from clustersim.simulator.calibration.cli import _check_sweeps
    cfg = {"ps": {"enabled": True, "mode": "sync", "p": [1, 2], "w": [1, 2]},
           "dataparallel": {"enabled": False, "workers": [1], "batch": [8]}}
    with pytest.raises(ValueError, match="ps: 4 points cannot fit 5 coefficients"):
        _check_sweeps(cfg)
    cfg["ps"]["mode"] = "async"
    _check_sweeps(cfg)                       # Eq. 3 has 4


def test_help_lists_the_models_and_every_key_without_hydras_page():
    p = subprocess.run([sys.executable, "-m", "clustersim.simulator.calibration.cli", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == ""
    for want in ("usage: clustersim-calibrate", "model=   cnn, custom, mlp, recommendation", "dataparallel:",
                 "overhead:", "test_fraction: 0.3", "torch==2.13.0"):
        assert want in p.stdout, want
    assert "powered by Hydra" not in p.stdout and "hydra:" not in p.stdout
