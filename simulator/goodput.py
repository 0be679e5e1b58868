"""Pollux's goodput model (Qiao et al., OSDI'21, §3): throughput x statistical efficiency.

Read from a Pollux application directory (petuum/adaptdl, osdi21-artifact,
``simulator/traces/<app>/``; bundled as ``traces/data/pollux/profiles_t4/<app>/``):

- ``placements.csv`` (``placement,local_bsz,step_time,sync_time``): measured T4 step times; a
  placement such as ``22`` is 2 replicas on each of 2 nodes.
- ``scalability.csv`` (``num_nodes,num_replicas,local_bsz,step_time,sync_time``): more nodes.
- ``validation-<B>.csv`` (``progress,iteration,metric,grad_sqr,grad_var``): one row per epoch of
  training at global batch B, with the gradient statistics.

**Throughput.** Pollux §3.1 Eq. 5-7 (adaptdl ``goodput.py``): ``T_grad = α_c + β_c·m`` for an
atomic (per-GPU) batch m, ``T_sync = α + β·max(K-2, 0)`` with (α, β) = (α_n, β_n) when the K
replicas span nodes, (α_r, β_r) on one node, none for one replica, and an iteration takes
``(T_grad^γ + T_sync^γ)^(1/γ)`` plus ``T_grad`` per extra accumulation step. The seven
parameters are fitted as adaptdl's ``fit_perf_params`` does (RMS log error of compute and step
time, its two regularisers and bounds). A measured placement is replayed exactly as the Pollux
simulator does (``Application.get_throughput``: interpolation in the local batch); others take
the fitted model (the simulator interpolates in (nodes, replicas, local batch) instead).

**Statistical efficiency.** Pollux §3.1 Eq. 2-3: with gradient noise scale from ``grad_sqr``
(|g|²) and ``grad_var`` (tr Σ) at the reference batch M0 (the smallest validated batch), one
iteration at batch M makes ``gain = (var + sqr) / (var/s + sqr)`` iterations of M0-progress,
s = M/M0; ``efficiency = gain / s``. The statistics change per epoch and are interpolated
linearly between validated batch sizes (``Application.get_grad_stats``). The Pollux simulator
runs each application for ``max_epochs`` epochs of progress (``get_progress``: the least
progress any validated batch reached at each epoch), so the iterations a job needs at batch M
are ``Σ_e Δprogress_e / gain_e(M)``: its work, measured in examples to a target.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class PerfParams:
    """Pollux's throughput parameters (adaptdl ``goodput.PerfParams``)."""

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def step_time(self, nodes, replicas, atomic_bsz, accum_steps=0):
        """Seconds per iteration (adaptdl ``GoodputFunction.throughput``'s total_time)."""
        p = np.array([self.alpha_c, self.beta_c, self.alpha_n, self.beta_n, self.alpha_r, self.beta_r, self.gamma])
        accum = _accum_time(p, np.asarray(atomic_bsz, dtype=float))
        optim = np.exp(_log_optim_time(p, accum, _network_time(p, np.asarray(nodes), np.asarray(replicas))))
        return accum_steps * accum + optim


def _accum_time(p, bsz):
    return p[0] + p[1] * bsz


def _network_time(p, nodes, replicas):
    conds = [nodes > 1, replicas > 1]
    bottleneck = np.select(conds, [p[2], p[4]], 1e-8)
    retrogress = np.select(conds, [p[3], p[5]], 1e-8) * np.maximum(replicas - 2, 1e-8)
    return bottleneck + retrogress


def _log_optim_time(p, accum, network):
    g = p[6]
    return np.log(accum ** g + network ** g) / g


def _objective(p, nodes, replicas, bsz, accum_time, step_time):
    accum = _accum_time(p, bsz)
    log_optim = _log_optim_time(p, accum, _network_time(p, nodes, replicas))
    err1 = np.sqrt(((np.log(accum) - np.log(accum_time)) ** 2).mean())
    err2 = np.sqrt(((log_optim - np.log(step_time)) ** 2).mean())
    reg1 = 1e-3 * (p[6] - 1) ** 2                                   # towards a smaller gamma
    reg2 = 1e-2 * ((p[3] / p[2]) ** 2 + (p[5] / p[4]) ** 2)         # optimistic: small retrogression
    return err1 + err2 + reg1 + reg2


def fit_perf_params(nodes, replicas, bsz, accum_time, step_time) -> PerfParams:
    """adaptdl ``goodput.fit_perf_params``: bounded minimisation of ``_objective`` from the same
    start, bounds and fixed parameters (L-BFGS-B with numerical gradients instead of autograd)."""
    from scipy.optimize import Bounds, minimize   # here, not at start-up: scipy is slow to import

    nodes, replicas, bsz = np.asarray(nodes), np.asarray(replicas), np.asarray(bsz, dtype=float)
    accum_time, step_time = np.asarray(accum_time, dtype=float), np.asarray(step_time, dtype=float)
    params = [1e-1, 1e-2] * 3 + [1.0 + 1e-3]
    lower = [1e-8, 1e-8] * 3 + [1.0]
    upper = [np.inf, np.inf] * 3 + [10.0]
    fixed = set()
    if len(np.unique(bsz)) == 1:
        params[0] = lower[0] = upper[0] = float(np.mean(accum_time)) / 2
        fixed.add(0)
    if not np.any(nodes > 1):
        fixed |= {2, 3}
    if not np.any((nodes == 1) & (replicas > 1)):
        fixed |= {4, 5}
    if not np.any(replicas > 2):
        fixed |= {3, 5}
    for i in fixed - {0}:
        params[i] = upper[i] = lower[i]
    free = [i for i in range(7) if i not in fixed]
    base = np.array(params, dtype=float)

    def full(x):
        p = base.copy()
        p[free] = x
        return p

    res = minimize(lambda x: _objective(full(x), nodes, replicas, bsz, accum_time, step_time), base[free],
                   method="L-BFGS-B", bounds=Bounds(np.array(lower)[free], np.array(upper)[free]))
    p = full(res.x)
    if not np.any(nodes > 1):   # adaptdl's prior: inter-node links are no faster than intra-node ones
        p[2], p[3] = max(p[2], p[4] * 1.1), max(p[3], p[5] * 1.1)
    return PerfParams(*(float(v) for v in p))


def placement_id(per_node: list[int]) -> int | None:
    """Pollux's placement key: replicas per node, zeros dropped, the lexicographically smallest
    rotation, as digits (``Application.get_throughput``); None if a node holds more than 9."""
    p = tuple(c for c in per_node if c)
    if not p or max(p) > 9:
        return None
    p = min(p[i:] + p[:i] for i in range(len(p)))
    return int("".join(map(str, p)))


class Application:
    """One Pollux application: measured step times, fitted throughput, gradient statistics."""

    def __init__(self, directory: Path, max_epochs: int, max_local_bsz: int | None = None,
                 perf: PerfParams | None = None, unmeasured: str = "fitted"):
        if unmeasured not in UNMEASURED:
            raise ValueError(f"unmeasured must be one of {', '.join(UNMEASURED)}, got {unmeasured!r}")
        self.unmeasured = unmeasured
        self._interpolator = None
        self.directory = Path(directory)
        self.placements = _read(self.directory / "placements.csv",
                                ("placement", "local_bsz", "step_time", "sync_time"))
        scal = _read(self.directory / "scalability.csv",
                     ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"))
        self.validation = {}
        for path in self.directory.glob("validation-*.csv"):
            b = re.fullmatch(r"validation-(\d+)\.csv", path.name)
            if b:
                self.validation[int(b.group(1))] = _read(path, ("progress", "iteration", "grad_sqr", "grad_var"))
        if not self.validation:
            raise ValueError(f"{self.directory}: no validation-<batch>.csv files")
        self.validation = dict(sorted(self.validation.items()))
        self.init_batch = min(self.validation)              # Application: init_batch_size default
        self.max_epochs = int(max_epochs)
        shortest = min(len(v["progress"]) for v in self.validation.values())
        if not 0 < self.max_epochs <= shortest:
            raise ValueError(f"{self.directory}: max_epochs {max_epochs} outside the validated 1..{shortest}")
        self.min_local_bsz = int(self.placements["local_bsz"].min())
        self.max_local_bsz = int(max_local_bsz or self.placements["local_bsz"].max())
        self.max_batch = max(self.validation)
        # measured step times per placement, by local batch
        self.measured: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for pid in sorted(set(self.placements["placement"].tolist())):   # not np.unique: it imports numpy.ma
            rows = self.placements["placement"] == pid
            order = np.argsort(self.placements["local_bsz"][rows], kind="stable")
            self.measured[int(pid)] = tuple(self.placements[k][rows][order]
                                            for k in ("local_bsz", "step_time", "sync_time"))
        self.perf = perf or self.fit(scal)
        self.scalability = scal

    def fit(self, scal: dict | None = None) -> PerfParams:
        """Fit the throughput parameters to every measured point (placements and scalability)."""
        if scal is None:
            scal = _read(self.directory / "scalability.csv",
                         ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"))
        digits = [str(int(p)) for p in self.placements["placement"]]
        nodes = np.array([len(d) for d in digits] + list(scal["num_nodes"]))
        replicas = np.array([sum(map(int, d)) for d in digits] + list(scal["num_replicas"]))
        bsz = np.concatenate([self.placements["local_bsz"], scal["local_bsz"]])
        step = np.concatenate([self.placements["step_time"], scal["step_time"]])
        sync = np.concatenate([self.placements["sync_time"], scal["sync_time"]])
        return fit_perf_params(nodes, replicas, bsz, step - sync, step)

    # ------------------------------------------------------------------ throughput
    def batch_split(self, batch: float, replicas: int) -> tuple[int, int]:
        """(atomic batch, accumulation steps) at a global batch over ``replicas`` GPUs, as the
        Pollux simulator sets them for a fixed batch (``Job.update_local_bsz``)."""
        local = math.ceil(batch / replicas - 1e-8)
        accum = math.ceil(local / self.max_local_bsz - 1e-8) - 1
        if replicas == 1 and batch > self.init_batch:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        return min(atomic, int(self.max_batch / (replicas * (accum + 1)))) or 1, accum

    def run_batch(self, batch: float, replicas: int) -> int:
        """The global batch a job asking for ``batch`` actually runs on ``replicas`` GPUs:
        replicas x atomic batch x (accumulation steps + 1), which the Pollux simulator's
        ``Job.step`` uses for the statistical efficiency (BERT at 384 on 6 GPUs runs at 360)."""
        atomic, accum = self.batch_split(batch, replicas)
        return replicas * atomic * (accum + 1)

    def step_time(self, per_node: list[int], atomic: int) -> tuple[float, float]:
        """(step time, sync time) of one atomic step: measured where Pollux measured the
        placement and batch, else (``unmeasured``) the fitted model (sync time then the network
        share) or the Pollux simulator's interpolation over the measured points."""
        pid = placement_id(per_node)
        m = self.measured.get(pid) if pid is not None else None
        if m is not None and m[0][0] <= atomic <= m[0][-1]:
            return float(np.interp(atomic, m[0], m[1])), float(np.interp(atomic, m[0], m[2]))
        nodes, replicas = sum(1 for c in per_node if c), sum(per_node)
        if self.unmeasured == "interpolated":
            got = self.interpolated(nodes, replicas, atomic)
            if got is not None:
                return got
        step = float(self.perf.step_time(nodes, replicas, atomic))
        return step, max(step - float(_accum_time(np.array(_as_list(self.perf)), atomic)), 0.0)

    def interpolated(self, nodes: int, replicas: int, atomic: int) -> tuple[float, float] | None:
        """(step time, sync time) interpolated linearly in (nodes, replicas, local batch) over
        the mean of each measured placement shape and the scalability rows, as the Pollux
        simulator does for a placement it never measured (``Application.get_throughput``, nodes
        capped at 16); None outside the measured points' convex hull (where the Pollux
        simulator stops with an assertion, this falls back to the fitted model)."""
        if self._interpolator is None:
            from scipy.interpolate import LinearNDInterpolator   # here: scipy is slow to import
            digits = [str(int(p)) for p in self.placements["placement"]]
            shapes: dict[tuple, list] = {}
            for d, b, st, sy in zip(digits, self.placements["local_bsz"], self.placements["step_time"],
                                    self.placements["sync_time"]):
                shapes.setdefault((len(d), sum(map(int, d)), float(b)), []).append((st, sy))
            keys = sorted(shapes)   # pandas groupby's order: sorted keys
            x = [k for k in keys] + list(zip(self.scalability["num_nodes"], self.scalability["num_replicas"],
                                              self.scalability["local_bsz"]))
            y = [tuple(np.mean(shapes[k], axis=0)) for k in keys] + list(zip(self.scalability["step_time"],
                                                                           self.scalability["sync_time"]))
            self._interpolator = LinearNDInterpolator(np.array(x, dtype=float), np.array(y, dtype=float))
        step, sync = self._interpolator([[min(nodes, 16), replicas, atomic]])[0]
        return (float(step), float(sync)) if np.isfinite(step) and np.isfinite(sync) else None

    def iteration_time(self, per_node: list[int], batch: float) -> float:
        """Seconds per iteration at a global batch: one step plus the accumulation steps
        (the Pollux simulator's ``total_time = step_time + accum_time * accum_steps``)."""
        atomic, accum = self.batch_split(batch, sum(per_node))
        step, sync = self.step_time(per_node, atomic)
        return step + (step - sync) * accum

    # ------------------------------------------------------------------ statistical efficiency
    def grad_stats(self, batch: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) at ``batch`` in ``epoch``, interpolated between validated batches."""
        sizes = list(self.validation)
        if not sizes[0] <= batch <= sizes[-1]:
            raise ValueError(f"{self.directory}: batch {batch:g} outside the validated {sizes[0]}..{sizes[-1]}")
        lo = max(b for b in sizes if b <= batch)
        hi = min(b for b in sizes if b >= batch)
        v_lo, v_hi = self.validation[lo], self.validation[hi]
        if lo == hi:
            return float(v_lo["grad_sqr"][epoch]), float(v_lo["grad_var"][epoch])
        w = (batch - lo) / (hi - lo)
        return tuple(float((1 - w) * v_lo[k][epoch] + w * v_hi[k][epoch]) for k in ("grad_sqr", "grad_var"))

    def progress(self, epoch: int) -> float:
        """Progress (iterations at the reference batch) after ``epoch`` epochs: ``get_progress``."""
        return 0.0 if epoch == 0 else float(min(v["progress"][epoch - 1] for v in self.validation.values()))

    def gain(self, batch: float, epoch: int) -> float:
        sqr, var = self.grad_stats(batch, epoch)
        s = batch / self.init_batch
        denom = var / s + sqr
        return (var + sqr) / denom if denom > 0 else 1.0

    def iterations_to_target(self, batch: float, whole_seconds_at: float | None = None) -> float:
        """Iterations at ``batch`` to reach ``max_epochs`` epochs of progress. With
        ``whole_seconds_at`` (iterations/s), each epoch takes a whole number of seconds at that
        rate, as in the Pollux simulator, whose ``Job.step`` rounds the time to each epoch's end
        (``delta = round(...)``, from a whole second): e.g. CIFAR-10 at 2052 on 4+2 T4s, 897.3 s
        of epochs exactly, 910 s rounded."""
        per_epoch = [(self.progress(e + 1) - self.progress(e)) / self.gain(batch, e) for e in range(self.max_epochs)]
        if whole_seconds_at is None:
            return sum(per_epoch)
        whole = sum(round(n / whole_seconds_at) for n in per_epoch) * whole_seconds_at
        return whole if whole > 0 else sum(per_epoch)   # epochs all under half a second: no job of 0 s

    def target_examples(self) -> float:
        """Examples the application needs at its reference batch (progress x reference batch)."""
        return self.progress(self.max_epochs) * self.init_batch

    def efficiency(self, batch: float) -> float:
        """Examples at the reference batch / examples at ``batch`` to the same target: 1 at the
        reference batch, below 1 where a larger batch needs more examples."""
        return self.target_examples() / (batch * self.iterations_to_target(batch))


def _as_list(p: PerfParams) -> list[float]:
    return [p.alpha_c, p.beta_c, p.alpha_n, p.beta_n, p.alpha_r, p.beta_r, p.gamma]


def _read(path: Path, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or ())]
            if missing:
                raise ValueError(f"{path}: missing column {missing[0]!r}")
            rows = list(reader)
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e}") from None
    out = {}
    for c in columns:
        try:
            out[c] = np.array([float(r[c]) for r in rows])
        except ValueError:
            raise ValueError(f"{path}: column {c!r} has a value that is not a number") from None
    return out


# Throughput at a placement Pollux never measured: the fitted model (Pollux §3.1) or the Pollux
# simulator's interpolation (Application.get_throughput); profile.goodput_unmeasured picks.
UNMEASURED = ("fitted", "interpolated")


@lru_cache(maxsize=None)
def application(directory: str, max_epochs: int, max_local_bsz: int | None = None,
                perf: tuple[float, ...] | None = None, unmeasured: str = "fitted") -> Application:
    """One loaded application per directory and settings (fitted unless ``perf`` is given)."""
    return Application(Path(directory), max_epochs, max_local_bsz, PerfParams(*perf) if perf else None, unmeasured)


def with_unmeasured(app: Application, unmeasured: str) -> Application:
    """The same application with another rule for unmeasured placements (cached)."""
    if app.unmeasured == unmeasured:
        return app
    perf = tuple(_as_list(app.perf))
    mlb = app.max_local_bsz if app.max_local_bsz != int(app.placements["local_bsz"].max()) else None
    return application(str(app.directory), app.max_epochs, mlb, perf, unmeasured)


if __name__ == "__main__":   # print the fitted parameters of the bundled applications, as YAML
    import sys
    from clustersim.traces import resolve
    for app, epochs, mlb in [a.split(":") for a in sys.argv[1:]]:
        a = Application(resolve(f"bundled:pollux/profiles_t4/{app}"), int(epochs), int(mlb) if mlb else None)
        print(f"{app}: perf: [{', '.join(f'{v:.6g}' for v in _as_list(a.perf))}]")
