"""The Optimus testbed comparison (seed 004 §6.2): mean JCT and makespan of optimus, drf and tetris
(and optimus_oracle) on configs/experiment/optimus_testbed.yaml, over seeds, with the ratios the
paper reports (DRF/Optimus: 2.39 for mean JCT, 1.63 for makespan) as the ratio of the means over
seeds and the range of the per-seed ratios.

    python benchmarks/optimus_testbed.py [--seeds 0 1 2 3 4] [--policies optimus drf tetris] [--set KEY=VALUE ...]
    python benchmarks/optimus_testbed.py --sensitivity 0 0.05 0.1 0.2   # §6.3.1 on optimus_oracle
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from clustersim.experiment import compose, run

PAPER = {"drf": (2.39, 1.63)}   # §6.2: DRF / Optimus, mean JCT and makespan


def one(policy: str, seed: int, overrides: list[str] = ()) -> dict:
    cfg = compose(["+experiment=optimus_testbed", f"policy={policy}", f"seed={seed}", "progress=false", *overrides])
    with tempfile.TemporaryDirectory() as d:
        summary, _ = run(cfg, d)
    return summary


def compare(policies: list[str], seeds: list[int], overrides: list[str] = ()) -> dict:
    """policy -> (mean JCT per seed, makespan per seed, wall seconds)."""
    out = {}
    for p in policies:
        t0 = time.perf_counter()
        s = [one(p, seed, overrides) for seed in seeds]
        out[p] = (np.array([x["jct_mean"] for x in s]), np.array([x["makespan"] for x in s]), time.perf_counter() - t0)
    return out


def ratio(a: np.ndarray, b: np.ndarray) -> str:
    """a/b as the ratio of the means, with the per-seed range."""
    r = a / b
    return f"{a.mean() / b.mean():.2f}x [{r.min():.2f}-{r.max():.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--policies", nargs="+", default=["optimus", "drf", "tetris", "optimus_oracle"])
    ap.add_argument("--set", nargs="*", default=[], help="extra Hydra overrides for every run")
    ap.add_argument("--sensitivity", type=float, nargs="*", help="prediction errors for optimus_oracle (§6.3.1)")
    a = ap.parse_args()
    if a.sensitivity is not None:
        base = None
        for on in ("convergence", "speed"):
            for e in a.sensitivity:
                r = compare(["optimus_oracle"], a.seeds, a.set + [f"policy.prediction_error={e}", f"policy.error_on={on}"])
                jct, mk, _ = r["optimus_oracle"]
                base = base or (jct, mk)
                print(f"error on {on:11s} e={e:4.2f}: mean JCT {jct.mean():9.0f} s ({ratio(jct, base[0])})  "
                      f"makespan {mk.mean():9.0f} s ({ratio(mk, base[1])})")
        return
    r = compare(a.policies, a.seeds, a.set)
    ref = r.get("optimus")
    for p, (jct, mk, wall) in r.items():
        vs = f"  {p}/optimus: JCT {ratio(jct, ref[0])}, makespan {ratio(mk, ref[1])}" if ref else ""
        paper = f"  (paper: {PAPER[p][0]}x, {PAPER[p][1]}x)" if p in PAPER else ""
        print(f"{p:15s} mean JCT {jct.mean():8.0f} s [{jct.min():.0f}-{jct.max():.0f}]  makespan {mk.mean():8.0f} s "
              f"[{mk.min():.0f}-{mk.max():.0f}]  [{wall:.0f} s wall]{vs}{paper}")


if __name__ == "__main__":
    main()
