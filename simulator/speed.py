"""Throughput models: iterations per second of a job on a given allocation.

The engine holds one ``SpeedModel`` and calls ``rate(spec, alloc, cluster)`` at every change.
``ProfileSpeed`` dispatches each job to its profile's model (cached per profile, task counts
and nodes spanned); ``LinearSpeed`` is the placement-blind model used without profiles.

The estimators follow scikit-learn's shape: ``fit(samples)`` with samples ``[(x, rate), ...]``,
``predict(X)`` and ``mape(samples)``; ``holdout_mape`` reports the error on held-out points.
- ``OptimusSpeed``: Optimus Eq. 3 (async) and Eq. 4 (sync) in PS count p and workers w.
- ``DLRoverSpeed``: DLRover-RM Eqs. 1-6 in workers, PS and CPU per task (the form DLRover fits).
- ``WorkerNeedSpeed``: the DLRover draft's §4.1 model (Eq. 1 with Eq. 4's PS bound): the DLRM
  profiles' ground truth, with the CPU each task then uses.
- ``AllReduceSpeed``: data-parallel ring all-reduce in GPUs and nodes spanned.
- ``TableSpeed``: interpolation of measured points.
All three parametric models are linear in their non-negative coefficients once written as
time per iteration, and are fitted with ``scipy.optimize.nnls`` on that form, rows weighted
by 1/time so that the fit minimises relative error (docs/models/speed.md).
"""

from __future__ import annotations

import heapq
from typing import Protocol, Sequence

import numpy as np

from clustersim.simulator.job import Allocation, JobSpec, task_counts

Sample = tuple[tuple, float]
PRIOR_WEIGHT = 1e-3   # a prior row's weight relative to a sample's (squared: 10^-6)


class SpeedModel(Protocol):
    def rate(self, spec: JobSpec, alloc: Allocation, cluster) -> float:
        """Iterations/s of ``spec`` on ``alloc`` (placed on ``cluster``)."""
        ...


def scaling_role(spec: JobSpec) -> str:
    """The role whose task count sets a job's speed: its workers, else its first role."""
    return scaling_role_of(spec.roles)


def scaling_role_of(roles) -> str:
    """``scaling_role`` of a job with these roles (RoleSpecs)."""
    names = [r.name for r in roles]
    return "worker" if "worker" in names else names[0]


class LinearSpeed:
    """Speed proportional to the scaling role's task count, placement-blind.

    At the requested allocation a job runs at ``total_work / duration``, so that a job run
    alone finishes in exactly the duration its trace records.
    """

    def rate(self, spec: JobSpec, alloc: Allocation, cluster=None) -> float:
        role = scaling_role(spec)
        n = task_counts(alloc).get(role, 0)
        if n == 0:
            return 0.0
        return spec.total_work / spec.duration * n / spec.role(role).count


# ---------------------------------------------------------------------------- fitted estimators
class _Linearised:
    """A model whose time per iteration is ``design(x) @ theta`` with ``theta >= 0``."""

    theta: np.ndarray | None = None
    n_coef: int = 0

    def design(self, x: tuple) -> np.ndarray:
        raise NotImplementedError

    def rate_from_time(self, x: tuple, t: float) -> float:
        return 1.0 / t

    def time_from_rate(self, x: tuple, rate: float) -> float:
        return 1.0 / rate

    def fit(self, samples: Sequence[Sample], min_samples: int | None = None,
            shares: Sequence[float] | None = None) -> "_Linearised":
        """NNLS fit; fewer samples than coefficients only when ``min_samples`` allows it.

        ``shares`` (one weight per term) is a weak prior for what the samples cannot separate:
        the split of the first sample's time per iteration among the terms. The fit stays on
        the samples (in squared error they weigh 10^6 times the prior) and, among the coefficients that
        reproduce them, takes the nearest to that split; without it NNLS's sparse solution drops
        terms the samples do not need.
        """
        from scipy.optimize import nnls   # here, not at start-up: scipy takes longer to import than a run

        samples = _checked(samples, self, min_samples)
        a = np.array([self.design(tuple(x)) for x, _ in samples], dtype=np.float64)
        y = np.array([self.time_from_rate(tuple(x), r) for x, r in samples], dtype=np.float64)
        w = 1.0 / y   # relative error in time per iteration
        a, y = a * w[:, None], y * w
        if shares is not None:
            d0 = a[0]                                  # first sample's terms, in units of its time
            prior = _coefficients(shares, self.n_coef, "term shares")
            with np.errstate(divide="ignore", invalid="ignore"):
                target = np.where(d0 > 0, prior / prior.sum() / d0, 0.0)
            a = np.vstack([a, PRIOR_WEIGHT * np.diag(d0)])
            y = np.concatenate([y, PRIOR_WEIGHT * d0 * target])
        self.theta, _ = nnls(a, y)
        return self

    def predict(self, xs) -> np.ndarray:
        if self.theta is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted")
        xs = _as_rows(xs)
        t = np.array([self.design(x) @ self.theta for x in xs])
        with np.errstate(divide="ignore"):
            return np.array([self.rate_from_time(x, ti) if ti > 0 else np.inf for x, ti in zip(xs, t)])

    def mape(self, samples: Sequence[Sample]) -> float:
        return mape(self, samples)


class OptimusSpeed(_Linearised):
    """Optimus §3.2 (seed 004). x = (p, w).

    async (Eq. 3): ``f = w / (θ0 + θ1·w/p + θ2·w + θ3·p)``  (steps of all workers per second)
    sync  (Eq. 4): ``f = 1 / (θ0·M/w + θ1 + θ2·w/p + θ3·w + θ4·p)``  (global batch M fixed)
    """

    def __init__(self, mode: str = "sync", batch: float = 1.0, theta: Sequence[float] | None = None):
        if mode not in ("sync", "async"):
            raise ValueError(f"Optimus speed mode must be 'sync' or 'async', got {mode!r}")
        self.mode, self.batch = mode, float(batch)
        self.n_coef = 5 if mode == "sync" else 4
        self.theta = None if theta is None else _coefficients(theta, self.n_coef, "Optimus theta")

    def design(self, x):
        p, w = float(x[0]), float(x[1])
        if self.mode == "sync":
            return np.array([self.batch / w, 1.0, w / p, w, p])
        return np.array([1.0, w / p, w, p])

    def rate_from_time(self, x, t):
        return (float(x[1]) if self.mode == "async" else 1.0) / t

    def time_from_rate(self, x, rate):
        return (float(x[1]) if self.mode == "async" else 1.0) / rate


class PSTestbed:
    """A PS job's true speed on Optimus's testbed (seed 004 §6.1): Eq. 3 (async) / Eq. 4 (sync)
    with the transfer term worked out from the model size and the 1GbE links instead of fitted,
    so that where the tasks land costs what §3.2 and §4.2 say it costs.

    One step takes compute + transfer. Compute is Eq. 4's other terms, ``θ0·b + θ1 + θ3·w + θ4·p``
    with ``b`` the samples one worker computes a step (sync: M/w of the global batch M; async: its
    own batch m), θ fitted to a measured grid. Transfer is Eq. 2's push and pull of each PS's S/p
    slice, ``2·(S/p)/(B/w')``, with only the traffic that leaves a server counted (§4.2, the
    Appendix's proof of Theorem 1): a PS on server k exchanges with the ``w − w_k`` workers
    elsewhere, a worker on server k with the ``p − p_k`` PS elsewhere, each task at its own
    bandwidth B (the Appendix's B_j = b_j, here the 1GbE link), and the slowest task sets the
    step: ``2·(S/p)·max_k max(w − w_k [k holds a PS], p − p_k [k holds a worker])/B``. Transfers
    within a server cost nothing (choice: memory copies next to a 1GbE link). ``balance``
    scales S/p to the most loaded PS's share (1: an even split, as PAA gives, §5.3). Async
    throughput is w/T steps/s (Eq. 3, every worker's step counted), sync 1/T (Eq. 4).
    """

    __slots__ = ("theta", "size_mb", "link_mb_s", "mode", "batch", "balance")

    def __init__(self, theta: Sequence[float], size_mb: float, link_mb_s: float, mode: str = "sync",
                 batch: float = 1.0, balance: float = 1.0):
        if mode not in ("sync", "async"):
            raise ValueError(f"testbed speed mode must be 'sync' or 'async', got {mode!r}")
        if not (size_mb > 0 and link_mb_s > 0 and batch > 0 and balance >= 1):
            raise ValueError(f"testbed speed needs size_mb, link_mb_s, batch > 0 and balance >= 1, "
                             f"got {size_mb!r}, {link_mb_s!r}, {batch!r}, {balance!r}")
        self.theta = _coefficients(theta, 5, "testbed theta (Eq. 4)")
        self.size_mb, self.link_mb_s, self.mode = float(size_mb), float(link_mb_s), mode
        self.batch, self.balance = float(batch), float(balance)

    def transfer_s(self, p: int, w: int, per_node: Sequence[tuple[int, int]]) -> float:
        """Seconds a step spends moving parameters for its slowest task; ``per_node`` lists
        (PS, workers) on each server the job spans."""
        worst = 0
        for pk, wk in per_node:
            if pk:
                worst = max(worst, w - wk)
            if wk:
                worst = max(worst, p - pk)
        return 2.0 * self.balance * self.size_mb / p * worst / self.link_mb_s

    def rate(self, p: int, w: int, per_node: Sequence[tuple[int, int]] = ()) -> float:
        """Iterations/s (sync: global steps; async: per-worker steps) with ``p`` PS and ``w``
        workers laid out as ``per_node`` (default: each task on a server of its own)."""
        if p <= 0 or w <= 0:
            return 0.0
        if not per_node:
            per_node = spread_evenly(p, w, p + w)
        t0, t1, _, t3, t4 = self.theta
        b = self.batch / w if self.mode == "sync" else self.batch
        step = t0 * b + t1 + t3 * w + t4 * p + self.transfer_s(p, w, per_node)
        return (w if self.mode == "async" else 1.0) / step


def spread_evenly(p: int, w: int, nodes: int) -> tuple[tuple[int, int], ...]:
    """(PS, workers) per server with ``p`` PS and ``w`` workers spread evenly over ``nodes``
    servers (Theorem 1's layout), the extra tasks of each role on different servers."""
    n = max(1, min(nodes, p + w))
    ps = [p // n + (1 if i < p % n else 0) for i in range(n)]
    wk = [w // n + (1 if i >= n - w % n else 0) for i in range(n)]   # extra workers where extra PS are not
    return tuple((a, b) for a, b in zip(ps, wk))


def paa_assign(blocks: Sequence[float], num_ps: int, tiny: float = 0.01) -> list[list[tuple[int, float]]]:
    """Optimus §5.3, Algorithm 2 (PAA): parameter blocks (sizes) to ``num_ps`` parameter servers.

    Blocks are taken largest first (a queue ordered by size; equal sizes in the order given), with
    ``avg`` the total size over ``num_ps``. A block under ``tiny`` x avg (§6.1: 1%) goes to the PS
    with the fewest update requests; one under avg to the PS whose room left (avg minus what it
    holds) is the smallest that holds it (best fit); a larger one is cut: a partition of avg goes
    to the PS holding the least, and the rest goes back into the queue. Each block or partition
    assigned is one more update request on its PS. Where no PS has room for a block under avg
    (the algorithm does not say), it goes to the PS holding the least (choice). Ties: the lowest
    PS index. Returns, per block, its partitions as (PS, size).
    """
    if num_ps < 1:
        raise ValueError(f"PAA needs at least one parameter server, got {num_ps}")
    sizes, transfers = [0.0] * num_ps, [0] * num_ps
    out: list[list[tuple[int, float]]] = [[] for _ in blocks]
    avg = float(sum(blocks)) / num_ps
    queue = [(-float(b), i) for i, b in enumerate(blocks)]
    heapq.heapify(queue)
    while queue:
        neg, key = heapq.heappop(queue)
        size = -neg
        if size < avg:
            if size < avg * tiny:
                ps = min(range(num_ps), key=lambda i: (transfers[i], i))
            else:
                room = [(avg - sizes[i], i) for i in range(num_ps) if avg - sizes[i] >= size]
                ps = min(room)[1] if room else min(range(num_ps), key=lambda i: (sizes[i], i))
            part = size
        else:
            ps = min(range(num_ps), key=lambda i: (sizes[i], i))
            part = avg
            if size - avg > 0:
                heapq.heappush(queue, (-(size - avg), key))
        sizes[ps] += part
        transfers[ps] += 1
        out[key].append((ps, part))
    return out


def mxnet_assign(blocks: Sequence[float], num_ps: int, rng: np.random.Generator,
                 bound: float = 1e6) -> list[list[tuple[int, float]]]:
    """MXNet's default (Optimus §5.3): a block under ``bound`` (10^6 parameters) goes to one PS
    drawn at random; a larger one is sliced evenly over every PS (one request per PS)."""
    out = []
    for b in blocks:
        if b < bound:
            out.append([(int(rng.integers(num_ps)), float(b))])
        else:
            out.append([(i, float(b) / num_ps) for i in range(num_ps)])
    return out


def ps_load(assignment: list[list[tuple[int, float]]], num_ps: int) -> dict:
    """Table 3's three factors of an assignment (largest minus smallest parameter size on a PS,
    the same for update requests, and the total requests), and ``balance``: the most loaded PS's
    size over an even share, by which it slows every transfer (``PSTestbed.balance``)."""
    sizes, requests = [0.0] * num_ps, [0] * num_ps
    for parts in assignment:
        for ps, size in parts:
            sizes[ps] += size
            requests[ps] += 1
    total = sum(sizes)
    return {"size_diff": max(sizes) - min(sizes), "request_diff": max(requests) - min(requests),
            "requests": sum(requests), "balance": max(sizes) * num_ps / total if total > 0 else 1.0}


class DLRoverSpeed(_Linearised):
    """DLRover-RM §4.1 (seed 002), Eqs. 1-6, with m, D, M and B fixed for a job. x = (w, p, λw, λp).

    ``T_iter = a1/λw + a2·w/(p·λp) + a3·w/p + a4/p + b0`` and throughput ``w / T_iter`` steps/s,
    where a1 = α_grad·m (Eq. 2), a2 = α_upd (Eq. 3), a3 = α_sync·M/B (Eq. 4), a4 = α_emb·m·D
    (Eq. 5) and b0 the sum of the β (not separately identifiable). A worker uses at most
    ``worker_cpu_cap`` cores (DLRover §4.1's ŵ: CPU beyond what a worker needs is idle).
    ``fit(samples, shares=...)`` takes DLRover-RM Fig. 11's coefficients as the terms' relative
    weights where a few published points cannot separate them (notes/dlrover.md A1).
    """

    n_coef = 5

    def __init__(self, theta: Sequence[float] | None = None, worker_cpu_cap: float = float("inf")):
        self.worker_cpu_cap = float(worker_cpu_cap)
        self.theta = None if theta is None else _coefficients(theta, 5, "DLRover-RM coefficients")

    def design(self, x):
        w, p, lw, lp = (float(v) for v in x)
        lw = min(lw, self.worker_cpu_cap)
        return np.array([1.0 / lw, w / (p * lp), w / p, 1.0 / p, 1.0])

    def rate_from_time(self, x, t):
        return float(x[0]) / t

    def time_from_rate(self, x, rate):
        return float(x[0]) / rate


class WorkerNeedSpeed:
    """The DLRover draft's §4.1 model (seed 000, Eqs. 1 and 4) of an asynchronous PS job. x = (w, p, λw, λp).

    A worker needs ``w_hat`` cores (ŵ): with λw of them it runs ``sample_rate``·min(λw, ŵ)/ŵ
    steps/s (Eq. 1's W_compute/(r·min(w, ŵ)); cores beyond ŵ stay idle, §2.3 / Fig. 1: W&D gains
    nothing past a few cores per worker). Every worker puts ``s_hat`` cores (ŝ) of load on the PS
    (Eq. 4: the PS needs N_w·ŝ cores, else "parameter servers are overloaded and the throughput R
    can not be further improved with more workers"), so with P = p·λp PS cores the job runs
    ``w·x(λw)·min(1, P/(w·ŝ))`` steps/s. ŵ, ŝ and the one-worker rate are Table 1's sampling rows.

    That per-worker PS load is the cost that makes many small workers worse than a few of ŵ
    cores: a worker of λw ≤ ŵ cores costs λw + ŝ cores for x(λw) steps/s, best at λw = ŵ, so the
    optimum within C cores is Eqs. 10–11's N_w = C/(ŵ + ŝ) workers of ŵ cores, the draft's
    Table 1 "optimize" rows and its well-tuned Table 2 (tests/simulator/test_speed.py searches
    it). The model does not tell how the PS cores are split (the draft picks 16-core PSes for
    their pending time, Fig. 3, not their speed). ``busy`` gives the cores each task uses at a
    throughput: a worker min(λw, ŵ) while the PS keeps up, the PS the load of its workers.
    """

    def __init__(self, w_hat: float, s_hat: float, sample_rate: float):
        if not (w_hat > 0 and s_hat > 0 and sample_rate > 0):
            raise ValueError(f"WorkerNeedSpeed needs w_hat, s_hat and sample_rate > 0, got {w_hat}, {s_hat}, {sample_rate}")
        self.w_hat, self.s_hat, self.sample_rate = float(w_hat), float(s_hat), float(sample_rate)

    def worker_rate(self, lw) -> np.ndarray:
        """Steps/s of one worker with ``lw`` cores and the PS keeping up."""
        return self.sample_rate * np.minimum(np.asarray(lw, dtype=np.float64), self.w_hat) / self.w_hat

    def predict(self, xs) -> np.ndarray:
        x = np.array([[float(v) for v in row] for row in _as_rows(xs)], dtype=np.float64)
        return self.grid(x[:, 0], x[:, 1], x[:, 2], x[:, 3])

    def grid(self, w, p, lw, lp) -> np.ndarray:
        """Steps/s over arrays of (w, p, λw, λp), broadcast (the configuration search's form)."""
        w, p, lw, lp = (np.asarray(v, dtype=np.float64) for v in (w, p, lw, lp))
        load = w * self.s_hat
        keeps_up = np.minimum(1.0, np.divide(p * lp, load, out=np.ones(np.broadcast(w, p, lp).shape), where=load > 0))
        return w * self.worker_rate(lw) * keeps_up

    def busy(self, x, rate: float) -> tuple[float, float]:
        """(cores one worker uses, cores one PS uses) while the job runs ``rate`` steps/s at x: the
        workers' CPU follows their steps (ŵ cores at the one-worker rate), the PS carries ŝ per
        worker in proportion to how fast the workers go against their unhindered pace."""
        w, p, lw, lp = (float(v) for v in x)
        full = w * float(self.worker_rate(lw))
        if not (w > 0 and p > 0 and full > 0):
            return 0.0, 0.0
        pace = min(max(rate / full, 0.0), 1.0)
        return min(lw, self.w_hat) * pace, min(lp, w * self.s_hat * pace / p)


class AllReduceSpeed(_Linearised):
    """Synchronous data parallelism with ring all-reduce, global batch fixed. x = (n, nodes, batch).

    ``t = c·B/n + f + s·(n-1) + 2(n-1)/n · (a_intra + [nodes > 1]·a_extra)``: compute on
    the per-GPU share of the batch, a fixed per-iteration cost, a latency per ring step and the
    gradient exchange, bounded by the slowest link the ring crosses: inter-node links cost
    ``a_extra`` more (EDL §6: spreading a job over machines slows it, VGG 0.83x, ResNet152
    0.97x). θ = (c, f, s, a_intra, a_extra), all >= 0, so a spread job is never faster.
    """

    n_coef = 5

    def __init__(self, theta: Sequence[float] | None = None):
        self.theta = None if theta is None else _coefficients(theta, 5, "all-reduce coefficients")

    def design(self, x):
        n, nodes, batch = float(x[0]), int(x[1]), float(x[2])
        ring = 2.0 * (n - 1.0) / n
        return np.array([batch / n, 1.0, n - 1.0, ring, ring if nodes > 1 else 0.0])

    def spread_ratio(self, n: int, nodes: int, batch: float) -> float:
        """Speed spread over ``nodes`` nodes relative to all ``n`` GPUs on one node."""
        packed, spread = self.predict([(n, 1, batch), (n, nodes, batch)])
        return float(spread / packed)


class TableSpeed:
    """Measured throughput points, interpolated. x is a tuple of numbers (e.g. (gpus,) or (p, w)).

    One dimension: piecewise-linear in x, held flat beyond the measured range. More: linear
    inside the convex hull of the points, nearest point outside it (extrapolating a measured
    grid is not trusted; Optimus notes §6 #14).
    """

    def __init__(self, points: dict | None = None):
        self._interp = None
        if points:
            self.fit(list(points.items()))

    def fit(self, samples: Sequence[Sample]) -> "TableSpeed":
        samples = _checked(samples, self)
        acc: dict[tuple, list[float]] = {}
        for x, r in samples:
            acc.setdefault(tuple(float(v) for v in _as_tuple(x)), []).append(r)
        keys = sorted(acc)
        self.keys = np.array(keys, dtype=np.float64)
        self.values = np.array([np.mean(acc[k]) for k in keys])
        self._interp = None   # built at the first prediction: scipy loads only for the grids a run uses
        return self

    def _interpolators(self) -> tuple:
        if len(self.keys) > self.keys.shape[1]:
            from scipy.interpolate import LinearNDInterpolator, NearestNDInterpolator   # not at start-up

            return LinearNDInterpolator(self.keys, self.values), NearestNDInterpolator(self.keys, self.values)
        from scipy.interpolate import NearestNDInterpolator

        return None, NearestNDInterpolator(self.keys, self.values)

    def predict(self, xs) -> np.ndarray:
        if not hasattr(self, "keys"):
            raise RuntimeError("TableSpeed has no points")
        pts = np.array([[float(v) for v in x] for x in _as_rows(xs)])
        if self.keys.shape[1] == 1:
            return np.interp(pts[:, 0], self.keys[:, 0], self.values)
        if self._interp is None:
            self._interp = self._interpolators()
        lin, near = self._interp
        out = lin(pts) if lin is not None else np.full(len(pts), np.nan)
        miss = np.isnan(out)
        if miss.any():
            out[miss] = near(pts[miss])
        return out

    def mape(self, samples: Sequence[Sample]) -> float:
        return mape(self, samples)


# ---------------------------------------------------------------------------- fit error
def mape(model, samples: Sequence[Sample]) -> float:
    """Mean absolute percentage error of ``model`` on ``samples``, as a fraction."""
    xs = [tuple(_as_tuple(x)) for x, _ in samples]
    y = np.array([r for _, r in samples], dtype=np.float64)
    return float(np.mean(np.abs(model.predict(xs) - y) / y))


def holdout_mape(model, samples: Sequence[Sample], test_fraction: float = 0.3, seed: int = 0) -> float:
    """Fit ``model`` on a seeded random part of ``samples``, return its MAPE on the rest."""
    samples = list(samples)
    idx = np.random.default_rng(seed).permutation(len(samples))
    n_test = max(1, int(round(test_fraction * len(samples))))
    test = [samples[i] for i in idx[:n_test]]
    model.fit([samples[i] for i in idx[n_test:]])
    return mape(model, test)


def _checked(samples, model, min_samples: int | None = None) -> list[Sample]:
    samples = [(tuple(_as_tuple(x)), float(r)) for x, r in samples]
    bad = [s for s in samples if not (np.isfinite(s[1]) and s[1] > 0)]
    if bad:
        raise ValueError(f"{type(model).__name__}.fit: rates must be finite and > 0, got {bad[0]}")
    n = getattr(model, "n_coef", 0) if min_samples is None else min_samples
    if len(samples) < max(n, 1):
        raise ValueError(f"{type(model).__name__}.fit needs at least {max(n, 1)} samples, got {len(samples)}")
    return samples


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list, np.ndarray)) else (x,)


def _as_rows(xs) -> list[tuple]:
    if isinstance(xs, tuple) or (isinstance(xs, (list, np.ndarray)) and len(xs) and np.isscalar(xs[0])):
        return [_as_tuple(xs)]
    return [_as_tuple(x) for x in xs]


def _coefficients(theta, n: int, what: str) -> np.ndarray:
    t = np.asarray(theta, dtype=np.float64)
    if t.shape != (n,) or (t < 0).any() or not np.isfinite(t).all():
        raise ValueError(f"{what}: need {n} finite numbers >= 0, got {list(theta)!r}")
    return t


# ---------------------------------------------------------------------------- the engine's model
class ProfileSpeed:
    """The engine's speed model: each job runs at its profile's rate (``spec.profile``).

    A GPU profile sees (worker tasks, nodes spanned, batch); a PS profile sees (PS tasks,
    worker tasks) and, for DLRover-RM models, the CPU granted to each task. The GPU type of the
    nodes chooses the profile's speed for that type (``speed_by_type``); a job spanning types
    runs at its slowest type's rate (synchronous training waits for the slowest worker). A
    placement-aware speed (Pollux's goodput kind) also sees the tasks per node. Rates are cached
    per (profile, batch, roles, task counts, nodes spanned, CPU grants, GPU types, tasks per
    node where they matter), so the hot path is one dict lookup.
    """

    def __init__(self, zoo):
        self.zoo = zoo
        self._cache: dict = {}
        self._kinds: dict = {}   # profile name -> (profile, by GPU type, a PS testbed, placement-aware)

    def rate(self, spec: JobSpec, alloc: Allocation, cluster=None) -> float:
        counts, cpus, nodes = [], [], set()   # one pass: tasks per role, CPU grants, nodes spanned
        for r, t in alloc.items():
            if t:
                n = 0
                for node, c in t.items():
                    if c:
                        nodes.add(node)
                    n += c
                counts.append((r, n))
            cpu = getattr(t, "cpu", None)
            if cpu is not None:
                cpus.append((r, cpu))
        kind = self._kinds.get(spec.profile)
        if kind is None:   # what the key needs of a profile, looked up once per profile
            p = self.zoo.profile(spec.profile)
            kind = self._kinds[spec.profile] = (p, bool(p.by_type), p.testbed is not None, p.placement_aware)
        prof, by_type, testbed, aware = kind
        types = gpu_types(nodes, cluster) if by_type else ()
        shape = ()
        if testbed:   # (PS, workers) on each server: the links they cross (PSTestbed)
            ps, wk = alloc.get("ps", {}), alloc.get("worker", {})
            shape = tuple((ps.get(n, 0), wk.get(n, 0)) for n in sorted(nodes))
        elif aware:
            placed = alloc.get(scaling_role(spec), {})
            shape = tuple(placed[n] for n in sorted(placed) if placed[n])
        # one role (the common case) needs no sort
        key = (spec.profile, spec.batch_size, spec.roles, tuple(counts) if len(counts) < 2 else tuple(sorted(counts)),
               len(nodes), tuple(sorted(cpus)) if cpus else (), types, shape)
        r = self._cache.get(key)
        if r is None:
            r = self._cache[key] = min(prof.rate(spec, dict(counts), key[4], dict(cpus), t, shape)
                                       for t in types or (None,))
        return r


def gpu_types(nodes, cluster) -> tuple[str, ...]:
    """The GPU types of ``nodes`` (sorted, distinct); notional nodes beyond the cluster add none."""
    if cluster is None:
        return ()
    kinds = cluster.gpu_type
    return tuple(sorted({kinds[n] for n in nodes if n < len(kinds)}))
