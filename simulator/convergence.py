"""Loss curves: the ground truth the simulator decides convergence from, the noisy per-epoch
observations policies see, and the online fitter Optimus describes (seed 004 §3.1, §4.1).

Ground truth is Optimus's Eq. 1 in epochs, ``l(k) = 1/(b0·k + b1) + b2``. A job has converged
at the end of epoch E when the loss decrease of each of its last ``patience`` epochs was below
the threshold: absolute (the drop, normalised by the first epoch's loss) or relative (drop / loss).
The drop shrinks monotonically, so E is found by bisection. A job's ``total_work`` is E epochs.
docs/models/convergence.md has the details and choices.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from clustersim.simulator.errors import TraceError


def loss(b: tuple[float, float, float], k) -> np.ndarray:
    b0, b1, b2 = b
    return 1.0 / (b0 * np.asarray(k, dtype=np.float64) + b1) + b2


def _drop(b, k: int, relative: bool) -> float:
    """Decrease of the loss over epoch k (from k-1 to k), normalised by the first epoch's loss
    (Optimus §3.1 normalises by the largest loss seen, typically the first) or by l(k)."""
    prev, cur = loss(b, [k - 1, k])
    return (prev - cur) / (cur if relative else float(loss(b, 1)))


def epochs_to_converge(b, threshold: float, relative: bool = False, patience: int = 1,
                       max_epochs: int = 10**7) -> int:
    """First epoch E whose last ``patience`` epochs each decreased the loss by less than ``threshold``."""
    if not threshold > 0:
        raise ValueError(f"convergence threshold must be > 0, got {threshold!r}")
    lo, hi = 2, max_epochs
    if _drop(b, hi, relative) >= threshold:
        return max_epochs
    while lo < hi:                       # smallest k with drop(k) < threshold
        mid = (lo + hi) // 2
        if _drop(b, mid, relative) < threshold:
            hi = mid
        else:
            lo = mid + 1
    return lo + max(patience, 1) - 1


@dataclass(frozen=True, slots=True)
class LossCurve:
    """One job's true curve; ``observations`` draws the same noise for the same epochs every time."""

    b: tuple[float, float, float]
    iters_per_epoch: float
    epochs: int                  # ground truth: epochs to convergence
    noise: float = 0.0           # relative standard deviation of an observed epoch loss
    seed: int = 0
    threshold: float = 0.01      # the owner's convergence threshold (Optimus §3.1), known to policies

    def observations(self, iterations_done: float) -> np.ndarray:
        """Observed loss at the end of each epoch completed within ``iterations_done``."""
        n = min(int(iterations_done / self.iters_per_epoch + 1e-9), self.epochs)
        if n <= 0:
            return np.empty(0)
        eps = np.random.default_rng(self.seed).standard_normal(n)
        return loss(self.b, np.arange(1, n + 1)) * (1.0 + self.noise * eps)


def assign_curves(jobs: list, assignment, rng: np.random.Generator, source: str = "trace",
                  sized_too: bool = True) -> list:
    """Give jobs a true curve; a sized job's convergence point is its ``total_work``.

    Coefficients: the profile's (else the config's default curve), each scaled by a lognormal
    factor of spread ``jitter`` per job. A sized job (``total_work > 0``; only with
    ``sized_too``) gets the epoch length total_work / E, so that its duration-preserving work is
    exactly its convergence point. A job without a size (no duration, no iterations) is
    convergence-driven: an epoch is its profile's ``dataset_size`` x ``dataset_fraction`` samples
    (``dataset_fractions[profile]`` where given) at its batch, and its work is E such epochs.
    """
    c = assignment.convergence or {}
    default = tuple(float(c.get("default_curve", {}).get(k, v)) for k, v in (("b0", 0.21), ("b1", 1.07), ("b2", 0.07)))
    threshold, relative = float(c.get("threshold", 0.01)), bool(c.get("relative", False))
    top = c.get("threshold_max")   # Optimus §6.1: "we vary the convergence threshold of jobs between 1% and 2%"
    top = threshold if top is None else float(top)
    if top < threshold:
        raise ValueError(f"profile.convergence.threshold_max ({top!r}) must be >= threshold ({threshold!r})")
    patience, noise, jitter = int(c.get("patience", 5)), float(c.get("noise", 0.02)), float(c.get("jitter", 0.2))
    fraction = float(c.get("dataset_fraction", 1.0))
    if not 0 < fraction <= 1:
        raise ValueError(f"profile.convergence.dataset_fraction must be in (0, 1], got {fraction!r}")
    fractions = dict(c.get("dataset_fractions") or {})   # profile -> its own (Optimus §6.1; checked in Assignment)
    out = []
    for spec in jobs:
        if spec.total_work > 0 and not sized_too:
            out.append(spec)
            continue
        prof = assignment.zoo.profiles.get(spec.profile)
        base = tuple(prof.convergence[k] for k in ("b0", "b1", "b2")) if prof and prof.convergence else default
        b = tuple(float(x) for x in np.asarray(base) * np.exp(jitter * rng.standard_normal(3)))
        delta = threshold if top == threshold else float(rng.uniform(threshold, top))
        epochs = epochs_to_converge(b, delta, relative, patience)
        if spec.total_work > 0:
            per_epoch = spec.total_work / epochs
        elif prof is not None and prof.dataset_size:
            per_epoch = prof.dataset_size * fractions.get(prof.name, fraction) / prof.batch(spec)
            spec = replace(spec, total_work=epochs * per_epoch)
        else:
            raise TraceError(f"{source}: row {spec.index} (job {spec.job_id!r}): no duration or iterations, and "
                             f"profile {spec.profile!r} has no dataset_size to size it by its loss curve")
        out.append(replace(spec, curve=LossCurve(b, per_epoch, epochs, noise, int(rng.integers(2**62)), delta)))
    return out


# ---------------------------------------------------------------------------- online fitter
class LossFitter:
    """Optimus §3.1: fit Eq. 1 online to the epoch losses observed so far.

    ``fit`` replaces outliers (a point outside [min of the next ``window``, max of the
    previous ``window``] becomes the mean of its two neighbours), normalises by the largest
    loss seen, and fits non-negative (b0, b1, b2): NNLS on the linearised form
    ``1/(l - b2) = b0·k + b1`` for each b2 on a grid below the smallest loss, keeping the b2
    with the least squared error in loss space (notes/optimus.md §1.3).
    """

    def __init__(self, window: int = 5, grid: int = 60):
        self.window, self.grid = window, grid
        self.b: tuple[float, float, float] | None = None
        self.scale = 1.0
        self.n = 0

    def fit(self, losses) -> "LossFitter":
        from scipy.optimize import nnls   # here, not at start-up: scipy is slow to import

        y = np.asarray(losses, dtype=np.float64)
        if len(y) < 3:
            raise ValueError(f"the loss fit needs at least 3 epochs, got {len(y)}")
        if not (np.isfinite(y).all() and (y > 0).all()):
            raise ValueError("the loss fit needs finite losses > 0 (Eq. 1 is positive)")
        y = smooth_outliers(y, self.window)
        self.scale = float(y.max())
        y = y / self.scale
        k = np.arange(1, len(y) + 1, dtype=np.float64)
        a = np.column_stack([k, np.ones_like(k)])
        best = None
        for b2 in np.linspace(0.0, y.min(), self.grid, endpoint=False):
            (b0, b1), _ = nnls(a, 1.0 / (y - b2))
            if b0 <= 0 and b1 <= 0:
                continue
            err = float(np.sum((loss((b0, b1, b2), k) - y) ** 2))
            if best is None or err < best[0]:
                best = (err, (float(b0), float(b1), float(b2)))
        self.b = best[1]
        self.n = len(y)
        return self

    def predict(self, epochs) -> np.ndarray:
        """Fitted loss (in the observations' units) at the given epochs."""
        return loss(self.b, epochs) * self.scale

    def total_epochs(self, threshold: float, relative: bool = False, patience: int = 1) -> int:
        """Epochs to convergence according to the fitted curve."""
        return epochs_to_converge(self.b, threshold, relative, patience)

    def remaining_epochs(self, threshold: float, loose_threshold: float | None = None, relative: bool = False,
                         patience: int = 1) -> int:
        """Epochs left after the ``n`` observed. With ``loose_threshold`` (Optimus §4.1, e.g. 3% for a
        1% target) the estimate aims at the looser threshold until the job has reached it."""
        if loose_threshold is not None and loose_threshold > threshold:
            loose = self.total_epochs(loose_threshold, relative, patience)
            if self.n < loose:
                return loose - self.n
        return max(self.total_epochs(threshold, relative, patience) - self.n, 0)


def smooth_outliers(y: np.ndarray, window: int = 5) -> np.ndarray:
    """Replace each point outside [min(next window), max(previous window)] by its neighbours' mean."""
    out = y.copy()
    for i in range(1, len(y) - 1):
        lo = y[i + 1:i + 1 + window].min()
        hi = y[max(0, i - window):i].max()
        if not lo <= y[i] <= hi:
            out[i] = 0.5 * (y[i - 1] + y[i + 1])
    return out
