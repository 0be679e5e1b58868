"""Fit the simulator's own models to measured points and report how well they predict.

No second fitter: speed uses ``OptimusSpeed`` (Eq. 3/4) and ``AllReduceSpeed`` with
``holdout_mape`` (simulator/speed.py), convergence ``LossFitter`` (simulator/convergence.py), the
overhead model is ``ModelCosts`` (simulator/overhead.py).

Held-out error: ``holdout_mape`` fits on a seeded random ``1 - test_fraction`` of the points and
reports the mean absolute percentage error on the rest; it is repeated for ``repeats`` seeds (a
different split each) and the mean, worst, each split's figure and the range the middle 95% of the
splits fall in (``interval``: the error's confidence) are reported, since one split of a dozen
points is noisy. Optimus §3.2 / Fig. 8 measure the same thing (<6% with 10 of 400 (p, w) pairs).

A noisy host: every point is measured in several windows (repeats). Windows that are outliers by
the modified z-score (|0.6745 (x - median) / MAD| > 3.5, Iglewicz and Hoaglin 1993, the usual
cut-off) are rejected (a burst of load from elsewhere) and the point is the median of the rest;
the spread of what is kept is the measurement noise. ``verdict`` compares the two: a held-out
error that does not exceed the noise says nothing about the model, and the report says so
instead of presenting the fit as validated.
"""

from __future__ import annotations

import math

import numpy as np

from clustersim.simulator.convergence import LossFitter
from clustersim.simulator.overhead import ModelCosts
from clustersim.simulator.speed import AllReduceSpeed, OptimusSpeed, holdout_mape


def heldout(make, samples: list, test_fraction: float, repeats: int) -> dict:
    """Held-out MAPE of a fresh ``make()`` model over ``repeats`` seeded splits (fractions)."""
    n = len(samples)
    n_test = max(1, int(round(test_fraction * n)))
    need = make().n_coef
    if n - n_test < need:
        return {"error": None, "reason": f"{n} points leave {n - n_test} to fit {need} coefficients; "
                                         f"measure more points or lower fit.test_fraction"}
    errs = [holdout_mape(make(), samples, test_fraction, seed) for seed in range(int(repeats))]
    return {"error": float(np.mean(errs)), "worst": float(np.max(errs)), "splits": [float(e) for e in errs],
            "interval": [float(np.percentile(errs, 2.5)), float(np.percentile(errs, 97.5))],
            "test_fraction": float(test_fraction), "train_points": n - n_test, "test_points": n_test}


OUTLIER_Z = 3.5          # modified z-score cut-off (Iglewicz and Hoaglin 1993)


def robust(windows) -> tuple[float, float | None, int]:
    """(median of the kept windows, their spread, windows rejected) of one point's repeats.

    Spread: mean absolute deviation of the kept windows from their median, relative to it. With a
    MAD of 0 (most windows equal) only the windows different from the median are outliers."""
    w = np.asarray(windows, dtype=np.float64)
    med = float(np.median(w))
    mad = float(np.median(np.abs(w - med)))
    keep = np.abs(0.6745 * (w - med) / mad) <= OUTLIER_Z if mad > 0 else np.abs(w - med) <= 1e-12 * abs(med)
    kept = w[keep] if keep.sum() >= 2 else w
    med = float(np.median(kept))
    spread = float(np.mean(np.abs(kept - med)) / med) if len(kept) > 1 else None
    return med, spread, int(len(w) - len(kept))


def verdict(heldout: dict, spread: float | None) -> str:
    """Whether the held-out error tells anything about the model, given the measurement noise."""
    err = heldout.get("error")
    if err is None:
        return "no held-out error"
    if spread is None:
        return "noise not measured (one window per point): the held-out error may be noise"
    if err <= spread:
        return (f"noise-limited: the measurements' own spread ({100 * spread:.1f}%) is at least the held-out "
                f"error ({100 * err:.1f}%), so this fit's accuracy cannot be judged on this host; measure on "
                "a quieter host or with more repeats")
    lo = heldout.get("interval", [err])[0]
    if lo <= spread:
        return (f"inconclusive: the held-out error ({100 * err:.1f}%) exceeds the noise ({100 * spread:.1f}%) on "
                f"average, but some splits do not ({100 * lo:.1f}%)")
    return f"model error above the noise ({100 * err:.1f}% > {100 * spread:.1f}%): the model misses something"


def _robust_points(records: list[dict], key: str, value) -> tuple[list[dict], float | None, int]:
    """Records with each point re-derived from its kept windows (``value(record, median)``), the
    mean spread over points and the windows rejected."""
    out, spreads, rejected = [], [], 0
    for r in records:
        w = r.get(key) or []
        if len(w) > 1:
            med, spread, bad = robust(w)
            r = {**r, **value(r, med), "rejected_windows": bad}
            rejected += bad
            if spread is not None:
                spreads.append(spread)
        out.append(r)
    return out, (float(np.mean(spreads)) if spreads else None), rejected


def ps_samples(records: list[dict]) -> list[tuple[tuple, float]]:
    return [((r["p"], r["w"]), r["samples_per_s"]) for r in records]


def fit_ps(records: list[dict], mode: str, batch: float, test_fraction: float, repeats: int) -> dict:
    """Optimus Eq. 4 (sync, global batch ``batch``) or Eq. 3 (async) in samples/s over (p, w)."""
    records, spread, rejected = _robust_points(records, "windows_samples_per_s",
                                               lambda r, m: {"samples_per_s": m})
    samples = ps_samples(records)
    make = lambda: OptimusSpeed(mode, batch)  # noqa: E731
    model = make().fit(samples)
    held = heldout(make, samples, test_fraction, repeats)
    return {"model": f"optimus_eq{4 if mode == 'sync' else 3}", "mode": mode, "batch": float(batch),
            "theta": [float(t) for t in model.theta], "mape": model.mape(samples), "heldout": held,
            "window_spread": spread, "rejected_windows": rejected, "verdict": verdict(held, spread),
            "_model": model, "_records": records}


def dp_samples(records: list[dict]) -> list[tuple[tuple, float]]:
    """((workers, nodes spanned, global batch), iterations/s); one host, so one node."""
    return [((r["n"], 1, r["global_batch"]), r["iters_per_s"]) for r in records]


def fit_dp(records: list[dict], test_fraction: float, repeats: int) -> dict:
    records, spread, rejected = _robust_points(records, "windows_iter_s",
                                               lambda r, m: {"iter_s": m, "iters_per_s": 1.0 / m})
    samples = dp_samples(records)
    model = AllReduceSpeed().fit(samples)
    held = heldout(AllReduceSpeed, samples, test_fraction, repeats)
    return {"model": "allreduce", "theta": [float(t) for t in model.theta], "mape": model.mape(samples),
            "heldout": held, "window_spread": spread, "rejected_windows": rejected, "verdict": verdict(held, spread),
            "_model": model, "_records": records}


def fit_convergence(losses: list[float], train_fraction: float, threshold: float, patience: int) -> dict:
    """Optimus Eq. 1 (``LossFitter``); held out: fit the first epochs, predict the rest.

    Errors are in units of the first epoch's loss (the simulator's convergence rule normalises by
    it; a relative error per epoch explodes as the loss nears 0). Also reported: the epoch the
    rule (``threshold``, ``patience``) declares convergence at, measured and as the partial fit
    predicts it.
    """
    y = np.asarray(losses, dtype=np.float64)
    k_all = np.arange(1, len(y) + 1)
    full = LossFitter().fit(y)
    out = {"b": dict(zip(("b0", "b1", "b2"), full.b)), "scale": full.scale,
           "error": float(np.mean(np.abs(full.predict(k_all) - y)) / y[0])}
    k = max(3, int(math.floor(train_fraction * len(y))))
    if k < len(y):
        head = LossFitter().fit(y[:k])
        out["heldout"] = {"error": float(np.mean(np.abs(head.predict(k_all[k:]) - y[k:])) / y[0]),
                          "train_epochs": k, "test_epochs": len(y) - k,
                          "epochs_measured": len(y),
                          "epochs_predicted": head.total_epochs(threshold, patience=patience)}
    else:
        out["heldout"] = {"error": None, "reason": f"{len(y)} epochs: too few to hold any out"}
    out["_fitter"] = full
    return out


def fit_overhead(records: list[dict]) -> dict:
    """``ModelCosts`` from the measured rescales, each cost the median over sizes and repeats (EDL
    §6.1 finds the size's influence negligible; the median, because a start on a loaded host
    varies threefold and one slow start would move a mean). From the stop-resume runs, whose
    relaunch (``pause_s - save_s - exit_s``: the launch of the processes to their first
    iteration) is what a testbed start or resume costs, decision to first iteration:

    - ``resume_s``: the relaunch, restore included, of n' (scale-outs) and of n processes (scale-ins);
    - ``launch_s``: a fresh start, the same relaunch without the restore (``restore_s``);
    - ``stop_resume_s``: the stop-resume pause, scale-outs and scale-ins alike (any other change);
      ``stop_resume_out_s`` and ``stop_resume_in_s``: each direction's own;

    from the stop-free runs:

    - ``stop_free_prepare_s``, ``stop_free_pause_s``: the stop-free scale-outs;
    - ``scale_in_s``: the stop-free scale-ins, command to the new group trained (graceful exit).

    Held out: each size's (and direction's) pause predicted by the median of the others."""
    sr = [r for r in records if r["mechanism"] == "stop_resume"]
    sf = [r for r in records if r["mechanism"] == "stop_free" and r["n_new"] > r["n_old"]]
    sf_in = [r for r in records if r["mechanism"] == "stop_free" and r["n_new"] < r["n_old"]]
    med = lambda values: float(np.median(values))  # noqa: E731
    costs = {}
    if sr:
        relaunch = [r["pause_s"] - r["save_s"] - r["exit_s"] for r in sr]
        costs.update(launch_s=med([x - r["restore_s"] for x, r in zip(relaunch, sr)]), resume_s=med(relaunch),
                     stop_resume_s=med([r["pause_s"] for r in sr]), checkpoint_gb=med([r["checkpoint_gb"] for r in sr]))
        for name, keep in (("stop_resume_out_s", lambda r: r["n_new"] > r["n_old"]),
                           ("stop_resume_in_s", lambda r: r["n_new"] < r["n_old"])):
            pauses = [r["pause_s"] for r in sr if keep(r)]
            if pauses:
                costs[name] = med(pauses)
    if sf:
        costs.update(stop_free_prepare_s=med([r["prepare_s"] for r in sf]),
                     stop_free_pause_s=med([r["pause_s"] for r in sf]))
    if sf_in:
        costs["scale_in_s"] = med([r["scale_in_s"] for r in sf_in])
    ModelCosts.from_dict(costs, "calibrated overhead")          # the simulator's own validation
    out = {"costs": costs, "not_measured": [] if sf_in else ["scale_in_s"], "heldout": {}}
    for name, rs, k in (("stop_resume_s", sr, "pause_s"), ("stop_free_pause_s", sf, "pause_s"),
                        ("scale_in_s", sf_in, "scale_in_s")):
        sizes = sorted({(r["n_old"], r["n_new"]) for r in rs})
        if len(sizes) < 2:
            out["heldout"][name] = {"error": None, "reason": "one size measured: nothing to hold out"}
            continue
        errs = []
        for size in sizes:
            test = [r[k] for r in rs if (r["n_old"], r["n_new"]) == size]
            train = [r[k] for r in rs if (r["n_old"], r["n_new"]) != size]
            errs += [abs(med(train) - t) / t for t in test]
        out["heldout"][name] = {"error": float(np.mean(errs)), "sizes": [list(size) for size in sizes]}
    return out


def public(fit: dict) -> dict:
    """A fit result without its live model objects (for YAML/JSON)."""
    return {k: v for k, v in fit.items() if not k.startswith("_")}
