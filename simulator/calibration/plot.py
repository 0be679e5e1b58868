"""Measured vs fitted, one PNG: PS speed over (p, w), data-parallel speed over N, the loss curve
and the rescale pauses. matplotlib is imported here only (lazily), with the Agg backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot(path: Path, ps: tuple | None, dp: tuple | None, conv: tuple | None, rescales: list | None) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in (("ps", ps), ("dp", dp), ("conv", conv), ("rescale", rescales)) if p[1]]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.8 * max(len(panels), 1), 4), squeeze=False)
    for ax, (what, data) in zip(axes[0], panels):
        {"ps": _ps, "dp": _dp, "conv": _conv, "rescale": _rescale}[what](ax, data)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ps(ax, data):
    records, fit = data
    model = fit["_model"]
    for p in sorted({r["p"] for r in records}):
        rs = sorted((r for r in records if r["p"] == p), key=lambda r: r["w"])
        ws = [r["w"] for r in rs]
        line, = ax.plot(ws, [r["samples_per_s"] for r in rs], "o", label=f"p={p} measured")
        grid = np.linspace(min(ws), max(ws), 50)
        ax.plot(grid, model.predict([(p, w) for w in grid]), "-", color=line.get_color(), alpha=0.7)
    err = fit["heldout"].get("error")
    ax.set(xlabel="workers w", ylabel="samples/s",
           title=f"PS {fit['mode']} (Eq. {4 if fit['mode'] == 'sync' else 3}); held-out "
                 + (f"{100 * err:.1f}%" if err is not None else "n/a"))
    ax.legend(fontsize=7)


def _dp(ax, data):
    records, fit = data
    model = fit["_model"]
    for b in sorted({r["batch"] for r in records}):
        rs = sorted((r for r in records if r["batch"] == b), key=lambda r: r["n"])
        ns = [r["n"] for r in rs]
        line, = ax.plot(ns, [r["iters_per_s"] for r in rs], "o", label=f"{b}/worker measured")
        ax.plot(ns, model.predict([(n, 1, n * b) for n in ns]), "-", color=line.get_color(), alpha=0.7)
    err = fit["heldout"].get("error")
    ax.set(xlabel="workers N", ylabel="iterations/s",
           title="data-parallel all-reduce; held-out " + (f"{100 * err:.1f}%" if err is not None else "n/a"))
    ax.legend(fontsize=7)


def _conv(ax, data):
    losses, fit = data
    k = np.arange(1, len(losses) + 1)
    ax.plot(k, losses, "o", label="measured")
    ax.plot(k, fit["_fitter"].predict(k), "-", label="Eq. 1 fit")
    ax.set(xlabel="epoch", ylabel="training loss", title="convergence")
    ax.legend(fontsize=7)


def _rescale(ax, records):
    sizes = sorted({(r["n_old"], r["n_new"]) for r in records})
    x = np.arange(len(sizes))
    for i, mech in enumerate(("stop_resume", "stop_free")):
        vals = [np.mean([r["pause_s"] for r in records if r["mechanism"] == mech
                         and (r["n_old"], r["n_new"]) == s] or [np.nan]) for s in sizes]
        bars = ax.bar(x + (i - 0.5) * 0.4, vals, 0.4, label=f"{mech} pause")
        # each bar says its value: a stop-free pause is orders of magnitude below a stop-resume one
        ax.bar_label(bars, labels=["" if np.isnan(v) else f"{v:.3g} s" for v in vals], fontsize=7)
    # log scale: on a linear one the stop-free bars are too short to see beside stop-resume's
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{a}->{b}" for a, b in sizes])
    ax.set(xlabel="workers", ylabel="pause (s, log scale)", title="rescale pause seen by running workers")
    ax.legend(fontsize=7)
