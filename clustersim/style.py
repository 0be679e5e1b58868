"""The look every figure shares: a matplotlib style, one colour per policy in every figure,
readable metric names with their units, and time axes in a unit that suits the span."""

from __future__ import annotations

from contextlib import contextmanager

# choice: a plain style that prints well in a two-column paper (no grey background, light grid,
# no offset or scientific multiplier over an axis: values are shown in a unit that keeps them small)
RC = {
    "figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight",
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "figure.titlesize": 11,
    "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.6, "axes.axisbelow": True,
    "axes.formatter.useoffset": False, "axes.formatter.limits": (-6, 9),
    "legend.frameon": False,
}

# choice: the Okabe-Ito palette (readable by colour-blind readers), then tab20's and tab20b's; a
# policy keeps its colour in every figure and every sweep because it is given by its place in
# the policy registry (48 colours: one each for every registered policy, with room to spare)
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
           "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
           "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
           "#bcbd22", "#dbdb8d", "#17becf", "#9edae5", "#393b79", "#5254a3", "#6b6ecf", "#9c9ede",
           "#637939", "#8ca252", "#b5cf6b", "#cedb9c", "#8c6d31", "#bd9e39", "#e7ba52", "#e7cb94",
           "#843c39", "#ad494a", "#d6616b", "#e7969c", "#7b4173", "#a55194", "#ce6dbd", "#de9ed6"]


@contextmanager
def style():
    """``with style():`` draws in the shared style."""
    import matplotlib as mpl

    with mpl.rc_context(RC):
        yield


def color(name: str) -> str:
    """The colour of a configuration: a registered policy's own (its first word is the policy),
    else one drawn from the palette by a stable hash of its name."""
    import zlib

    from clustersim import policies

    known = policies.names()
    first = str(name).split(" ")[0]
    i = known.index(first) if first in known else len(known) + zlib.crc32(str(name).encode())
    return PALETTE[i % len(PALETTE)]


# metric -> (readable name, kind): "time" values are in seconds, shown in a unit that suits them
METRICS = {
    "jct_mean": ("mean JCT", "time"), "jct_median": ("median JCT", "time"), "jct_p95": ("p95 JCT", "time"),
    "jct_p99": ("p99 JCT", "time"), "makespan": ("makespan", "time"),
    "waiting_time_mean": ("mean waiting time", "time"), "waiting_time_p95": ("p95 waiting time", "time"),
    "queueing_delay_mean": ("mean queueing delay", "time"), "queueing_delay_p95": ("p95 queueing delay", "time"),
    "slowdown_mean": ("mean slowdown", "×"), "slowdown_p95": ("p95 slowdown", "×"),
    "gpu_util_mean": ("GPU utilisation", "%"), "gpu_util_busy": ("GPU utilisation, busy window", "%"),
    "ftf_rho_mean": ("mean finish-time fairness ρ", "ratio"), "ftf_rho_max": ("max finish-time fairness ρ", "ratio"),
    "deadline_ratio": ("jobs meeting their deadline", "%"), "completion_rate": ("jobs completed", "%"),
    "preemptions": ("preemptions", "count"), "rescales": ("rescales", "count"),
    "overhead_ratio": ("reconfiguration overhead", "%"), "gpu_hours": ("GPU-hours", "GPU·h"),
    "gpu_util": ("GPU utilisation", "%"), "pending": ("queue length", "jobs"), "running": ("running jobs", "jobs"),
}


def metric_name(metric: str) -> str:
    return METRICS.get(metric, (metric.replace("_", " "), ""))[0]


def time_unit(seconds_max: float) -> tuple[str, float]:
    """(unit, seconds per unit) that keeps times below a few hundred: s, min, h or days."""
    for unit, per in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds_max >= 3 * per:
            return unit, per
    return "s", 1.0


def scaled(metric: str, values) -> tuple[str, float]:
    """(axis label with unit, divisor) for ``metric``'s ``values``."""
    import numpy as np

    name, kind = METRICS.get(metric, (metric.replace("_", " "), ""))
    if kind == "time":
        v = np.asarray(values, dtype=float)
        unit, per = time_unit(float(np.nanmax(np.abs(v))) if v.size and np.isfinite(v).any() else 0.0)
        return f"{name} ({unit})", per
    if kind == "%":
        return f"{name} (%)", 0.01
    return (f"{name} ({kind})" if kind and kind not in ("count",) else name), 1.0
