"""The Optimus testbed comparison (seed 004 §6.2): mean JCT and makespan of optimus, drf and tetris
(and optimus_oracle) on configs/experiment/optimus_testbed.yaml, over seeds, with the ratios the
paper reports (DRF/Optimus: 2.39 for mean JCT, 1.63 for makespan).

    python benchmarks/optimus_testbed.py [--seeds 0 1 2] [--jobs 60] [--policies optimus drf tetris]
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
    out = {}
    for p in policies:
        t0 = time.perf_counter()
        s = [one(p, seed, overrides) for seed in seeds]
        out[p] = (float(np.mean([x["jct_mean"] for x in s])), float(np.mean([x["makespan"] for x in s])),
                  time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--policies", nargs="+", default=["optimus", "drf", "tetris", "optimus_oracle"])
    ap.add_argument("--sensitivity", type=float, nargs="*", help="prediction errors for optimus_oracle (§6.3.1)")
    a = ap.parse_args()
    over = [f"trace.options.jobs={a.jobs}"]
    if a.sensitivity is not None:
        base = None
        for on in ("convergence", "speed"):
            for e in a.sensitivity:
                r = compare(["optimus_oracle"], a.seeds, over + [f"policy.prediction_error={e}", f"policy.error_on={on}"])
                jct, mk, _ = r["optimus_oracle"]
                base = base or (jct, mk)
                print(f"error on {on:11s} e={e:4.2f}: mean JCT {jct:10.0f} s ({jct / base[0]:.3f}x)  "
                      f"makespan {mk:10.0f} s ({mk / base[1]:.3f}x)")
        return
    r = compare(a.policies, a.seeds, over)
    ref = r.get("optimus")
    for p, (jct, mk, wall) in r.items():
        ratio = f"  {p}/optimus: JCT {jct / ref[0]:.2f}x, makespan {mk / ref[1]:.2f}x" if ref else ""
        paper = f"  (paper: {PAPER[p][0]}x, {PAPER[p][1]}x)" if p in PAPER else ""
        print(f"{p:15s} mean JCT {jct:10.0f} s  makespan {mk:10.0f} s  [{wall:.0f} s wall]{ratio}{paper}")


if __name__ == "__main__":
    main()
