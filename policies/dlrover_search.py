"""DLRover Stage 2: online model fit, per-job NSGA-II candidates, cross-job weighted greedy.

- Fit (DLRover-RM §4.3 "Online Model Fitting"): the job's measured throughput samples, each
  at the configuration ``(w, p, λw, λp)`` it was measured at, fitted with NNLS to Eqs. 1-6 in
  the linear form of ``simulator/speed.py DLRoverSpeed`` (rows weighted by 1/time: relative
  error, notes/dlrover.md A2). With fewer samples than terms the fit takes, among the
  coefficients that reproduce them, the nearest to the split of DLRover-RM Fig. 11 (A1).
  A worker's CPU beyond what it is seen to use is idle ([D] §4.1 ŵ).
- Candidates (§4.3 step 2, Eq. 9): pymoo's NSGA-II over integer ``(w, p, λw, λp)`` minimising
  ``RC(A)`` (Eq. 7: cost of the added CPU and memory) and ``1/TG(A)`` (Eq. 8: throughput gain
  net of the scaling overhead, amortised over the remaining steps, A6), with the job's CPU
  cap as a constraint and ``TG > 0`` required.
- Selection (Eqs. 11-14): every candidate scored ``RE·WG`` (``RE = TG/RC``; ``WG =
  1/(Φ/Ψ + ε)^ρ``), taken greedily in that order, one per job, while it fits the free
  capacity. A candidate that frees resources and still gains (RC ≤ 0 < TG) goes first (A7).
- Sanity bound (a choice; the papers trust the fit): a plan's predicted throughput is capped at
  ``rate_per_core`` × its cores (the policy's ``max_speedup`` × the steps/s per used core the job
  measures now), so a fit that extrapolates far from its samples cannot promise a small plan a
  large speed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from clustersim.policies.dlrover_history import Config
from clustersim.simulator.speed import DLRoverSpeed

FIG11_SHARES = (3.48, 2.36, 0.68, 2.45, 2.45)   # DLRover-RM Fig. 11: grad, update, sync, lookup, beta
EPS_WG = 1e-6                                    # Eq. 14's ε (notes/dlrover.md A9)


@dataclass(frozen=True)
class Costs:
    """What a change costs the job, as the policy estimates it (DLRover-RM Eq. 8's Overhead(A),
    "estimated through statistical analysis ... e.g. the time required to start a worker/PS")."""

    worker_launch_s: float = 120.0   # [D] §6.3: 20 s pod launch + 100 s training init
    prepare_s: float = 300.0         # [RM] Fig. 12: seamless migration, overlapped with training
    pause_s: float = 180.0           # [RM] Fig. 12: flash checkpoint save + load
    price_cpu: float = 1.0           # Eq. 7's Money(): per core (notes/dlrover.md A7)
    price_mem: float = 0.125         # per GB (1 core : 8 GB, A7)


@dataclass(frozen=True)
class JobState:
    """What Stage 2 knows of one job when it plans."""

    key: int                  # order of the job (deterministic tie-break, NSGA-II seed)
    model: DLRoverSpeed       # fitted
    current: Config
    remaining: float          # steps left (Φ_sp)
    bounds: tuple             # (w_min, w_max, p_min, p_max, worker_cpu_min, ps_cpu_min, pod_cpu)
    job_cpu_cap: float
    ps_mem_total: float       # GB all PSes need together (the PS memory rule)
    worker_mem: float         # GB per worker: what workers are seen to use plus the margin ([D] §4.2)
    rate_per_core: float = float("inf")   # the sanity bound: steps/s a plan may be believed to get per core


@dataclass(frozen=True)
class Candidate:
    key: int
    config: Config
    rc: float
    tg: float
    rate: float               # predicted steps/s at ``config``
    d_cpu: float              # cores added (negative: freed)
    d_mem: float              # GB added
    score: float = 0.0


def fit(samples, worker_cap: float) -> DLRoverSpeed:
    """NNLS fit of Eqs. 1-6 to ``samples`` [((w, p, λw, λp), steps/s)], Fig. 11's split as prior."""
    model = DLRoverSpeed(worker_cpu_cap=worker_cap)
    return model.fit(samples, min_samples=1, shares=FIG11_SHARES)


def predict(model: DLRoverSpeed, w, p, lw, lp) -> np.ndarray:
    """Steps/s of the fitted model, vectorised over configurations."""
    w, p, lw, lp = (np.asarray(v, dtype=np.float64) for v in (w, p, lw, lp))
    a1, a2, a3, a4, b0 = model.theta
    t = a1 / np.minimum(lw, model.worker_cpu_cap) + a2 * w / (p * lp) + a3 * w / p + a4 / p + b0
    with np.errstate(divide="ignore"):
        return np.where(t > 0, w / t, np.inf)


def evaluate(job: JobState, x: np.ndarray, costs: Costs, mem_per_worker: float):
    """(RC, TG, rate, total CPU, total GB) of configurations ``x`` (rows ``w, p, λw, λp``)."""
    w, p, lw, lp = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
    cur = job.current
    cpu = w * lw + p * lp
    # a fit on a few samples can promise anything far from them: no plan is believed beyond the bound
    rate = np.minimum(predict(job.model, w, p, lw, lp), job.rate_per_core * cpu)
    now = float(predict(job.model, cur.workers, cur.ps, cur.worker_cpu, cur.ps_cpu))
    mem = w * mem_per_worker + job.ps_mem_total
    rc = (cpu - cur.cpu) * costs.price_cpu + (mem - cur.mem) * costs.price_mem
    # the overhead model's mechanisms: adding/removing workers only costs the new workers'
    # launch (trained at the old rate meanwhile); any PS or per-task change migrates seamlessly
    # (prepared alongside training) then pauses for the flash checkpoint (DLRover-RM §5.2)
    workers_only = (p == cur.ps) & (lw == cur.worker_cpu) & (lp == cur.ps_cpu)
    prepare = np.where(workers_only, np.where(w > cur.workers, costs.worker_launch_s, 0.0), costs.prepare_s)
    pause = np.where(workers_only, 0.0, costs.pause_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        lost = prepare * (1.0 - np.minimum(now, rate) / rate) + pause   # seconds at the new rate
    tg = rate - now - rate * rate * lost / max(job.remaining, 1.0)     # Eq. 8, amortised (A6)
    return rc, tg, rate, cpu, mem


def candidates(job: JobState, costs: Costs, pop_size: int, generations: int, seed: int,
               free_cpu: float, seeds: tuple = ()) -> list[Candidate]:
    """The Pareto set NSGA-II finds for one job, gains only (TG > 0), cheapest first. The first
    population holds the current configuration, ``seeds`` (the job's previous Pareto set: the
    search goes on from round to round) and random integer points."""
    from pymoo.algorithms.moo.nsga2 import NSGA2
    from pymoo.core.problem import Problem
    from pymoo.operators.crossover.sbx import SBX
    from pymoo.operators.mutation.pm import PM
    from pymoo.operators.repair.rounding import RoundingRepair
    from pymoo.optimize import minimize

    w_min, w_max, p_min, p_max, wc_min, pc_min, pod = job.bounds
    cur = job.current
    mem_w = job.worker_mem
    cap = min(job.job_cpu_cap, cur.cpu + free_cpu)

    class Plan(Problem):
        def __init__(self):
            super().__init__(n_var=4, n_obj=2, n_ieq_constr=2, xl=np.array([w_min, p_min, wc_min, pc_min]),
                             xu=np.array([w_max, p_max, pod, pod]), vtype=int)

        def _evaluate(self, x, out, *args, **kwargs):
            rc, tg, _, cpu, _ = evaluate(job, x, costs, mem_w)
            out["F"] = np.column_stack([rc, np.where(tg > 0, 1.0 / np.maximum(tg, 1e-12), 1e12)])
            out["G"] = np.column_stack([cpu - cap, 1e-9 - tg])

    rng = np.random.default_rng(seed)
    lo, hi = np.array([w_min, p_min, wc_min, pc_min]), np.array([w_max, p_max, pod, pod])
    start = rng.integers(lo, hi + 1, size=(pop_size, 4))
    known = [(cur.workers, cur.ps, cur.worker_cpu, cur.ps_cpu)]
    known += [(c.workers, c.ps, c.worker_cpu, c.ps_cpu) for c in seeds][: pop_size - 1]
    start[: len(known)] = np.clip(np.round(np.array(known, dtype=np.float64)), lo, hi)
    algo = NSGA2(pop_size=pop_size, sampling=start.astype(float),
                 crossover=SBX(prob=0.9, eta=15, vtype=float, repair=RoundingRepair()),
                 mutation=PM(eta=20, vtype=float, repair=RoundingRepair()), eliminate_duplicates=False)
    res = minimize(Plan(), algo, ("n_gen", generations), seed=seed, verbose=False)
    if res.X is None:
        return []
    xs = np.atleast_2d(np.asarray(res.X, dtype=np.float64)).round()
    xs = np.unique(xs, axis=0)
    rc, tg, rate, cpu, mem = evaluate(job, xs, costs, mem_w)
    out = []
    for i in np.lexsort((xs[:, 3], xs[:, 2], xs[:, 1], xs[:, 0], rc)):
        if tg[i] > 0 and cpu[i] <= cap + 1e-9:
            w, p = int(xs[i, 0]), int(xs[i, 1])
            cfg = Config(w, p, float(xs[i, 2]), float(xs[i, 3]), mem_w, job.ps_mem_total / p)
            out.append(Candidate(job.key, cfg, float(rc[i]), float(tg[i]), float(rate[i]),
                                 float(cpu[i] - cur.cpu), float(mem[i] - cur.mem)))
    return out


def candidate(job: JobState, costs: Costs, cfg: Config) -> Candidate:
    """``cfg`` as a candidate of ``job``, with the model's RC, TG and rate."""
    x = np.array([[cfg.workers, cfg.ps, cfg.worker_cpu, cfg.ps_cpu]], dtype=np.float64)
    rc, tg, rate, cpu, mem = evaluate(job, x, costs, job.worker_mem)
    cfg = replace(cfg, worker_mem=job.worker_mem, ps_mem=job.ps_mem_total / cfg.ps)
    return Candidate(job.key, cfg, float(rc[0]), float(tg[0]), float(rate[0]),
                     float(cpu[0] - job.current.cpu), float(mem[0] - job.current.mem))


def score(c: Candidate, remaining: float, rho: float) -> float:
    """RE·WG (Eqs. 11, 14); a candidate that frees resources and gains ranks first (A7)."""
    re = c.tg / c.rc if c.rc > 0 else float("inf")
    wg = 1.0 / (remaining / c.rate + EPS_WG) ** rho
    return re * wg if re != float("inf") else float("inf")


def greedy(cands: list[Candidate], free: np.ndarray, take) -> dict[int, Candidate]:
    """Eqs. 12-13: candidates by score, highest first (ties: job order, then cheaper); one per
    job; each must fit what is left of ``free`` (CPU, GB) and be placed by ``take(candidate)``
    (which returns False when the cluster's nodes cannot hold it)."""
    left = np.array(free, dtype=np.float64)
    chosen: dict[int, Candidate] = {}
    for c in sorted(cands, key=lambda c: (-c.score, c.key, c.rc)):
        if c.key in chosen:
            continue
        need = np.array([max(c.d_cpu, 0.0), max(c.d_mem, 0.0)])
        if (need > left + 1e-9).any():
            continue
        if take(c):
            chosen[c.key] = c
            left -= need
    return chosen
