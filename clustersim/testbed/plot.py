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
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 5.4))
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
    series = (("jct_mean", "mean JCT"), ("makespan", "makespan"), ("job_abs_mean", "per job |error|, mean"))
    width = 0.27
    for k, (key, name) in enumerate(series):
        vals = [100 * result["policies"][p]["error"][key] for p in pols]
        bars = b.bar([i + (k - 1) * width for i in range(len(pols))], vals, width, label=f"{name}")
        b.bar_label(bars, fmt="%+.0f%%" if key != "job_abs_mean" else "%.0f%%", fontsize=7)
    for p in pols:
        n = result["policies"][p].get("noise")
        if n:
            v = 100 * max(abs(n["jct_mean"]), abs(n["makespan"]))
            b.axhspan(-v, v, color="grey", alpha=0.25,
                      label=f"host noise ({p} repeated): mean JCT {100 * n['jct_mean']:+.1f}%, makespan "
                            f"{100 * n['makespan']:+.1f}%, per job {100 * n['job_abs_mean']:.0f}%")
    b.axhline(0, color="black", lw=0.8)
    for g in (10, -10):
        b.axhline(g, color="tab:red", lw=0.8, ls="--")
    b.set_xticks(range(len(pols)), pols)
    b.set_ylabel("error (%)")
    b.set_title("simulated vs real (red: the ±10% goal)")
    b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    b.margins(y=0.12)
    h = result["host"]
    fig.suptitle(f"clustersim-testbed: {len(result['cores'])} cores, {result['mechanism']}, "
                 f"load {h['load_1m']:.1f}/{h['load_5m']:.1f}/{h['load_15m']:.1f} (1/5/15 min) before the runs", fontsize=10)
    fig.tight_layout()
    path = Path(out) / "testbed.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")   # the legend below the bars stays whole
    plt.close(fig)
    return path
