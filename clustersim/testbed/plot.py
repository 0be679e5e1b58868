"""``testbed.png``: simulated against real JCT per job (each policy), and the errors with the
host's own noise beside them."""

from __future__ import annotations

from pathlib import Path


def plot(out: Path, result: dict) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clustersim.testbed.compare import jcts

    pols = list(result["policies"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.6))
    top = 0.0
    for p in pols:
        real, sim = jcts(out / p / "real"), jcts(out / p / "sim")
        xs = [real[j] for j in real if real[j] is not None and sim.get(j) is not None]
        ys = [sim[j] for j in real if real[j] is not None and sim.get(j) is not None]
        a.scatter(xs, ys, s=22, label=p)
        top = max(top, *xs, *ys)
    a.plot([0, top * 1.05], [0, top * 1.05], color="grey", lw=1, ls="--", label="simulated = real")
    a.set_xlabel("real JCT (s)")
    a.set_ylabel("simulated JCT (s)")
    a.set_title("per job")
    a.legend(fontsize=8)
    width = 0.38
    for k, (key, name) in enumerate((("jct_mean", "mean JCT"), ("makespan", "makespan"))):
        vals = [100 * result["policies"][p]["error"][key] for p in pols]
        bars = b.bar([i + (k - 0.5) * width for i in range(len(pols))], vals, width, label=f"{name} error")
        b.bar_label(bars, fmt="%+.1f%%", fontsize=8)
    noisy = [(p, result["policies"][p]["noise"]) for p in pols if "noise" in result["policies"][p]]
    for p, n in noisy:
        for key, ls in (("jct_mean", ":"), ("makespan", "-.")):
            v = 100 * abs(n[key])
            b.axhspan(-v, v, color="grey", alpha=0.12)
            b.axhline(v, color="grey", ls=ls, lw=1, label=f"host noise, {key.replace('_', ' ')} ({p} repeated): ±{v:.1f}%")
    b.axhline(0, color="black", lw=0.8)
    for g in (10, -10):
        b.axhline(g, color="tab:red", lw=0.8, ls="--")
    b.set_xticks(range(len(pols)), pols)
    b.set_ylabel("simulated vs real (%)")
    b.set_title("error (red: the ±10% goal)")
    b.legend(fontsize=7, loc="best")
    h = result["host"]
    fig.suptitle(f"clustersim-testbed: {len(result['cores'])} cores, {result['mechanism']}, "
                 f"load {h['load_1m']:.1f}/{h['load_5m']:.1f}/{h['load_15m']:.1f} at the end", fontsize=10)
    fig.tight_layout()
    path = Path(out) / "testbed.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
