"""Fit errors of the workload models on the data the profiles cite (MAPE, as a fraction).

1. All-reduce model on ElasticFlow's measured A100 tables: in-sample and held-out (30%) MAPE,
   and the spread ratio (8 GPUs on 2 nodes vs 1) next to EDL's measurements.
2. Optimus Eq. 4 on the measured PS grids (DL2): fitted to all points, held out, and fitted
   to 5 (p, w) pre-runs as Optimus §6.1 does, scored on the rest.
3. DLRover-RM model on DLRover Table 1 points, and its response to CPU per task.
4. The Optimus loss-curve fitter: error of the predicted total epochs vs the fraction of epochs
   observed, over synthetic curves around Optimus's Seq2Seq fit.

    python benchmarks/model_fit.py [--curves 200]
"""

from __future__ import annotations

import argparse

import numpy as np
import yaml

from clustersim.simulator import profiles
from clustersim.simulator.convergence import LossCurve, LossFitter, epochs_to_converge
from clustersim.simulator.speed import AllReduceSpeed, OptimusSpeed, holdout_mape, mape

EDL_SPREAD = {"vgg16": 0.83, "vgg19": 0.83, "resnet152": 0.97}   # seed 001 §6.2 Fig. 10a
FIVE = [(1, 1), (3, 5), (5, 3), (9, 9), (13, 5)]                  # 5 pre-run settings on the measured grid


def of_kind(zoo, family: str, kind: str) -> list:
    """(name, profile) of the zoo's profiles of one family and speed kind."""
    return [(n, zoo.profile(n)) for n in zoo.names(family) if zoo.profile(n).speed_kind == kind]


def allreduce_report(zoo) -> None:
    print("1. all-reduce model vs measured A100 tables (iterations/s)")
    print(f"{'profile':<12} {'points':>6} {'MAPE':>7} {'held-out':>9} {'spread 8 GPUs/2 nodes':>22} {'EDL':>5}")
    for name, p in of_kind(zoo, "gpu", "allreduce"):
        spread = p.model.spread_ratio(8, 2, p.batch_size)
        if p.tables:
            s = p.table_samples()
            fit, held = f"{mape(p.model, s):7.1%}", f"{holdout_mape(AllReduceSpeed(), s, 0.3, 0):9.1%}"
            n = len(s)
        else:
            fit, held, n = f"{'derived':>7}", f"{'-':>9}", 0
        edl = f"{EDL_SPREAD[name]:5.2f}" if name in EDL_SPREAD else f"{'-':>5}"
        print(f"{name:<12} {n:>6} {fit} {held} {spread:>22.3f} {edl}")


def optimus_report(zoo) -> None:
    print("\n2. Optimus Eq. 4 vs measured synchronous PS grids (steps/s)")
    print(f"{'profile':<14} {'points':>6} {'MAPE all':>9} {'held-out':>9} {'5 pre-runs -> rest':>19}")
    for name, p in of_kind(zoo, "ps", "table"):
        s = [((k[0], k[1]), v / p.batch_size) for k, v in zip(p.model.keys, p.model.values)]
        full = OptimusSpeed("sync", p.batch_size).fit(s)
        five = [x for x in s if x[0] in FIVE]
        rest = [x for x in s if x[0] not in FIVE]
        pre = OptimusSpeed("sync", p.batch_size).fit(five) if len(five) == 5 else None
        pre_err = f"{mape(pre, rest):19.1%}" if pre is not None else f"{'-':>19}"
        print(f"{name:<14} {len(s):>6} {mape(full, s):9.1%} "
              f"{holdout_mape(OptimusSpeed('sync', p.batch_size), s, 0.3, 0):9.1%} {pre_err}")


def dlrover_report(zoo) -> None:
    print("\n3. DLRover-RM model vs DLRover Table 1 (steps/s), and what CPU per task does")
    raw = yaml.safe_load((profiles.HERE / "recommendation.yaml").read_text())
    print(f"{'profile':<10} {'points':>6} {'MAPE':>8} {'2x PS CPU':>10} {'1/2 worker CPU':>15}  theta")
    for name, p in of_kind(zoo, "ps", "dlrover"):
        pts = [(tuple(r[:4]), r[4]) for r in raw[name]["speed"]["points"]]
        w, ps, lw, lp = pts[-1][0]
        base, more_ps, less_w = p.model.predict([(w, ps, lw, lp), (w, ps, lw, 2 * lp), (w, ps, lw / 2, lp)])
        print(f"{name:<10} {len(pts):>6} {mape(p.model, pts):>8.1e} {more_ps / base:>10.2f} {less_w / base:>15.2f}  "
              f"{np.round(p.model.theta, 5).tolist()}")


def convergence_report(curves: int) -> None:
    print(f"\n4. loss-curve fitter: |predicted - true total epochs| / true, {curves} synthetic curves "
          "(Seq2Seq x lognormal 0.3, 2% noise, 1% threshold, patience 5)")
    rng = np.random.default_rng(0)
    fractions = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
    errors = {f: [] for f in fractions}
    for _ in range(curves):
        b = tuple(np.array([0.21, 1.07, 0.07]) * np.exp(0.3 * rng.standard_normal(3)))
        true_e = epochs_to_converge(b, 0.01, False, 5)
        obs = LossCurve(b, 1.0, true_e, 0.02, int(rng.integers(2**31))).observations(true_e)
        for f in fractions:
            fit = LossFitter().fit(obs[:max(3, int(f * true_e))])
            errors[f].append(abs(fit.total_epochs(0.01, False, 5) - true_e) / true_e)
    print("observed  " + "  ".join(f"{f:>6.0%}" for f in fractions))
    print("mean err  " + "  ".join(f"{np.mean(errors[f]):>6.1%}" for f in fractions))
    print("median    " + "  ".join(f"{np.median(errors[f]):>6.1%}" for f in fractions))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curves", type=int, default=200)
    args = ap.parse_args()
    zoo = profiles.load()
    allreduce_report(zoo)
    optimus_report(zoo)
    dlrover_report(zoo)
    convergence_report(args.curves)


if __name__ == "__main__":
    main()
