"""A noisy host: outlying windows rejected, the held-out error's range, and the verdict that says
when the noise is as large as the error (no torch)."""

import pytest

from clustersim.simulator.calibration import fit


def test_an_outlying_window_is_rejected_hand_worked():
    # median 1.0; |deviations| 0, .1, .1, 0, 4 -> MAD 0.1; 5.0's modified z = 0.6745 * 4 / 0.1 = 27 > 3.5
    # kept 1.0, 1.1, 0.9, 1.0: median 1.0, spread mean(0, .1, .1, 0) / 1.0 = 0.05
    med, spread, rejected = fit.robust([1.0, 1.1, 0.9, 1.0, 5.0])
    assert (med, rejected) == (1.0, 1) and spread == pytest.approx(0.05)


def test_windows_within_the_cutoff_are_all_kept():
    # MAD 0.1: 1.3's z = 0.6745 * 0.3 / 0.1 = 2.0 <= 3.5
    assert fit.robust([1.0, 1.1, 0.9, 1.3])[2] == 0


@pytest.mark.parametrize("error, interval, spread, word", [
    (0.04, [0.02, 0.07], 0.05, "noise-limited"),
    (0.08, [0.03, 0.15], 0.05, "inconclusive"),
    (0.20, [0.12, 0.30], 0.05, "above the noise"),
    (0.20, [0.12, 0.30], None, "noise not measured"),
])
def test_verdict_compares_the_heldout_error_with_the_noise(error, interval, spread, word):
    assert word in fit.verdict({"error": error, "interval": interval}, spread)


def test_a_fit_uses_the_points_from_their_kept_windows():
    # one window of 10 s per iteration among 0.1 s ones must not move the point (0.1 s -> 10 it/s)
    recs = [{"n": n, "batch": b, "global_batch": n * b, "iters_per_s": 1.0, "iter_s": 1.0,
             "windows_iter_s": [0.1 * n + 0.001 * b] * 4 + [10.0]}
            for n in (1, 2, 3) for b in (8, 16, 32)]
    out = fit.fit_dp(recs, 0.3, 5)
    assert out["rejected_windows"] == 9
    assert [r["iter_s"] for r in out["_records"]] == pytest.approx([0.1 * r["n"] + 0.001 * r["batch"] for r in recs])
    assert out["heldout"]["interval"][0] <= out["heldout"]["error"] <= out["heldout"]["interval"][1]
