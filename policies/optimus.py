"""Optimus (Peng et al., EuroSys'18; seed 004): model-driven elastic scheduling of PS/worker jobs.

Every ``interval`` (20 min, §6.1) the policy, per active job,
1. estimates the remaining work Q_j: Eq. 1 fitted online to the job's noisy epoch losses
   (``LossFitter``, §3.1), the epochs left to the looser threshold δ' until the job reaches
   it, then to δ (§4.1), times ``overestimate`` (1.05, §4.1/§6.1) while aiming at δ';
2. estimates its speed f_j(p, w): Eq. 3 (async) or Eq. 4 (sync) fitted by NNLS
   (``OptimusSpeed``, §3.2) to the pre-run samples (a few (p, w) settings profiled before the
   job starts, §3.2/§6.1, whose time delays its first start) and the throughput it was
   measured at since;
3. allocates by Algorithm 1 (§4.1): every job starts at its gang minimum (1 PS + 1 worker),
   then the task with the largest Eq. 9 gain, the drop of remaining time Q/f per unit of the
   task's dominant share, is added, until the cluster's totals (Eq. 7) run out or no gain is
   positive;
4. places by Theorem 1 (§4.2): smallest job first, each on the fewest servers that hold it,
   its workers and its PS spread evenly over them. A job that cannot be placed waits for the
   next interval ("temporarily paused").

``optimus_oracle`` reads the true remaining work and speed instead of estimating them; with
``prediction_error`` e both read each job's values times (1 ± e), the sign drawn per job and
quantity (§6.3.1); ``speed_error`` gives the speed an error of its own. Choices the paper leaves
open are parameters: docs/policies/optimus.md.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from types import SimpleNamespace
from typing import Annotated, Literal

import numpy as np

from clustersim.policies.base import Decision, JobView, Observer, Policy, Profiled, View, register
from clustersim.policies.placement import keep_in_place, release, strategy
from clustersim.simulator.cluster import EPS
from clustersim.simulator.convergence import LossFitter, epochs_to_converge
from clustersim.simulator.errors import PolicyError
from clustersim.simulator.job import task_counts
from clustersim.simulator.params import Count, Fraction, Length, NonNegative, Positive, Range
from clustersim.simulator.rng import component_rng
from clustersim.simulator.speed import OptimusSpeed

# Pre-run (p, w) settings: five, as §6.1 ("5 different combinations of (p, w)"); which five the
# paper does not say. These span the grids measured (p, w up to 10) so that the fit does not
# extrapolate far: mean error 4-28% over the Table 1 grids (docs/policies/optimus.md).
PRERUN = ((1, 1), (1, 4), (4, 4), (4, 10), (10, 10))
# one pre-run configuration: [PS, workers], each 1 to 1,024 tasks (choice: a bound on what a pre-run launches)
PrerunPair = Annotated[list[Annotated[int, Range(ge=1, le=1024)]], Length(2, 2)]
# one model's growth step: [PS, workers] added at once, 1 to 1,024 each (the same bound)
StepPair = PrerunPair
# Placement gives a job up once its candidate servers hold this many times what it needs in
# every resource and still cannot host it evenly (fragmentation): it bounds a round's cost.
GIVE_UP = 8.0


# ---------------------------------------------------------------------------- estimates
class Estimate:
    """A job's remaining work Q (iterations) and speed f(p, w) (iterations/s), as the policy sees them."""

    __slots__ = ("q", "rate")

    def __init__(self, q: float, rate):
        self.q, self.rate = q, rate

    def time(self, p: int, w: int) -> float:
        """Remaining time Q / f(p, w) (Eq. 6)."""
        f = self.rate(p, w)
        return self.q / f if f > 0 else math.inf


def optimus_rate(mode: str, theta, batch: float):
    """f(p, w) of Eq. 3 (async) or Eq. 4 (sync) as a plain function (the hot path of Algorithm 1)."""
    if mode == "async":
        a0, a1, a2, a3 = (float(t) for t in theta)

        def f(p, w):
            t = a0 + a1 * w / p + a2 * w + a3 * p
            return w / t if t > 0 else math.inf
    else:
        a0, a1, a2, a3, a4 = (float(t) for t in theta)
        a0 *= batch

        def f(p, w):
            t = a0 / w + a1 + a2 * w / p + a3 * w + a4 * p
            return 1.0 / t if t > 0 else math.inf
    return f


def job_mode(job: JobView) -> str:
    """A job's training mode, part of its request: async if its model name says so (the
    synthetic Optimus workload names async jobs ``<model>/async``), else sync (§6.1)."""
    m = (job.model or "").lower()
    return "async" if m.endswith("async") else "sync"


def shape(job: JobView) -> tuple[str | None, str]:
    """(PS role or None, the role whose count is w): a job without PS is fitted with p = 1."""
    names = [r.name for r in job.roles]
    worker = "worker" if "worker" in names else names[0]
    return ("ps" if "ps" in names and worker != "ps" else None), worker


# ---------------------------------------------------------------------------- Algorithm 1
class Plan:
    """One job in Algorithm 1: its task counts per role and its remaining-time model. While
    Algorithm 1 runs, the job's (p, w), remaining time ``t`` and per-role constants live in
    slots (the hot loop reads no dicts); ``counts`` is written back at the end."""

    __slots__ = ("job", "counts", "est", "ps", "worker", "t", "seq", "p", "w", "ups", "wup", "nxt", "cpu", "cap",
                 "step", "take", "need", "jid", "placed")

    def __init__(self, job: JobView, est: Estimate | None, seq: int, step: tuple[int, int] | None = None,
                 start: dict[str, int] | None = None):
        """``step``: (PS, workers) added at once, one role a round, from ``start`` (the counts the
        job runs at; None: its gang minimum), as DLRover §6.3 runs Optimus; None: Algorithm 1."""
        self.job, self.est, self.seq = job, est, seq
        self.counts = {r.name: r.min_count for r in job.roles}
        if start:
            self.counts.update((r, n) for r, n in start.items() if r in self.counts)
        self.ps, self.worker = shape(job)
        self.t = None
        self.ups = self.wup = None   # (divisor, demand, cap) of the PS / worker role, None: not grown
        self.nxt = None              # remaining time after the task(s) the job is queued for
        self.cpu = sum(self.counts[r.name] * r.demand[1] for r in job.roles)   # cores the job's counts hold
        need = [0.0, 0.0, 0.0]   # GPUs, cores, memory of the starting counts (Algorithm 1's minimums)
        for r in job.roles:
            for k in range(3):
                need[k] += self.counts[r.name] * r.demand[k]
        self.need = tuple(need)
        self.jid = job.job_id
        # the counts to place, without roles at none: fixed for a plan without estimate (Algorithm 1
        # grows only the plans it has an estimate for), else worked out after Algorithm 1
        self.placed = _nonzero(self.counts) if est is None else None
        self.cap = math.inf          # cores the job may hold (``job_cpu_cap``)
        self.step = step
        self.take = 1                # tasks the queued heap entry adds

    def pw(self, counts=None) -> tuple[int, int]:
        c = self.counts if counts is None else counts
        return (c[self.ps] if self.ps else 1), c[self.worker]


def _nonzero(counts: dict) -> dict:
    """Tasks per role, without the roles at none (``task_counts``'s form)."""
    return {r: c for r, c in counts.items() if c}


def dominant_share(demand, capacity) -> float:
    """A task's dominant share: its largest demand over the cluster's capacity (DRF's definition)."""
    return max((d / c for d, c in zip(demand, capacity) if d > 0 and c > 0), default=0.0)


def allocate(plans: Iterable[Plan], capacity, *, divisor: str = "share", on_no_fit: str = "stop",
             max_tasks: int = 0, job_cpu_cap: float = math.inf, least: tuple | None = None) -> list[Plan]:
    """Algorithm 1 (§4.1). ``plans`` in arrival order; returns those that got their gang minimum.
    ``least``: no plan needs less than this of each resource for its minimum; the minimums' pass
    ends once less than that is left of some resource (no later plan can fit: those the pass
    would skip are not read).

    Minimums first, in arrival order, skipping jobs whose minimum no longer fits the totals
    (note §6 #12); then the task of largest Eq. 9 gain, while gains are positive. A task that
    no longer fits ends the loop (``stop``, the paper's "until some resource ... is used up")
    or only that role of that job (``skip``). No job grows beyond ``job_cpu_cap`` cores (the
    per-job quota of DLRover §6.1, under which DLRover §6.3 runs Optimus). A plan with a
    ``step`` starts at its own counts (not the minimum) and takes at most one entry: its step of
    the role of larger gain (``_next_step``).

    Cost: each added task evaluates the job's remaining time at its two next settings (the time
    at the setting it moves to was computed when it was queued) and one heap operation
    (``heapreplace``: the job's next task replaces its last at the top).
    """
    l0, l1, l2 = (float(x) + EPS for x in capacity)
    got = []
    for plan in plans:
        n0, n1, n2 = plan.need
        if n0 <= l0 and n1 <= l1 and n2 <= l2:
            l0 -= n0
            l1 -= n1
            l2 -= n2
            got.append(plan)
            if least is not None and (l0 < least[0] or l1 < least[1] or l2 < least[2]):
                break
    heap = []
    shares: dict = {}   # dominant share per demand vector (jobs of one type share their demands)
    for plan in got:
        if plan.est is None:
            continue
        plan.cap = job_cpu_cap
        for r in plan.job.roles:
            if r.elastic and r.name in (plan.ps, plan.worker):
                if divisor == "share":
                    d = shares.get(r.demand)
                    if d is None:
                        d = shares[r.demand] = dominant_share(r.demand, capacity)
                else:
                    d = max(r.demand)
                u = (d, r.demand, min(r.max_count, max_tasks or r.max_count))
                if r.name == plan.ps:
                    plan.ups = u
                else:
                    plan.wup = u
        plan.p, plan.w = plan.pw()
        plan.t = plan.est.time(plan.p, plan.w)
        item = _next(plan)
        if item is not None:
            heap.append(item)
    heapq.heapify(heap)   # keys (-gain, arrival, seq) are distinct: the same order as pushes
    while heap:
        g, _, _, plan, is_ps = heap[0]
        if g >= 0:
            break
        d = (plan.ups if is_ps else plan.wup)[1]
        n = plan.take
        if not (n * d[0] <= l0 and n * d[1] <= l1 and n * d[2] <= l2):
            if on_no_fit == "stop":
                break
            if is_ps:   # that role of that job is blocked for the rest of the round
                plan.ups = None
            else:
                plan.wup = None
        else:
            l0 -= n * d[0]
            l1 -= n * d[1]
            l2 -= n * d[2]
            if is_ps:
                plan.p += n
            else:
                plan.w += n
            plan.cpu += n * d[1]
            plan.t = plan.nxt
            if plan.step is not None:   # one step of one role a round (DLRover §6.3)
                plan.ups = plan.wup = None
        item = _next(plan)
        if item is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, item)
    for plan in got:
        if plan.est is not None:
            if plan.ps:
                plan.counts[plan.ps] = plan.p
            plan.counts[plan.worker] = plan.w
    return got


def _next(plan: Plan):
    """The job's heap entry for its best next task (Eq. 9: the larger of the PS and the worker
    gain, each per unit of the task's dominant share; PS on ties, note §6 #10), or None."""
    if plan.step is not None:
        return _next_step(plan)
    t, p, w, est = plan.t, plan.p, plan.w, plan.est
    q, rate = est.q, est.rate   # Estimate.time inlined: Q / f (Eq. 6)
    best = tn = None
    is_ps = False
    u = plan.ups
    if u is not None and p < u[2] and plan.cpu + u[1][1] <= plan.cap + 1e-9:
        f = rate(p + 1, w)
        tn = q / f if f > 0 else math.inf
        best, is_ps = _gain(t, tn, u[0]), True
    u = plan.wup
    if u is not None and w < u[2] and plan.cpu + u[1][1] <= plan.cap + 1e-9:
        f = rate(p, w + 1)
        after = q / f if f > 0 else math.inf
        gain = _gain(t, after, u[0])
        if best is None or gain > best:
            best, tn, is_ps = gain, after, False
    if best is None:
        return None
    plan.nxt = tn
    return (-best, plan.job.submit_time, plan.seq, plan, is_ps)


def _next_step(plan: Plan):
    """The heap entry of a plan with a growth step (DLRover §6.3: Optimus adds "2 PS and 4
    workers for Wide & Deep jobs and 1 PS and 1 worker for xDeepFM jobs" where the original
    "only adds one worker or PS each time"): the step of PS or the step of workers, whichever
    has the larger Eq. 9 gain per unit of the step's dominant share (PS on ties), or None. A
    step that would pass the role's bound or the job's CPU quota adds the tasks that fit (a
    choice: else a job 3 cores under its quota, or one PS under its bound, stops short of it)."""
    best = None
    for is_ps, u, size in ((True, plan.ups, plan.step[0]), (False, plan.wup, plan.step[1])):
        if u is None:
            continue
        have = plan.p if is_ps else plan.w
        cores = u[1][1]
        n = min(size, u[2] - have)
        if cores > 0 and plan.cap != math.inf:
            n = min(n, int((plan.cap - plan.cpu + 1e-9) // cores))
        if n < 1:
            continue
        f = plan.est.rate(plan.p + n, plan.w) if is_ps else plan.est.rate(plan.p, plan.w + n)
        after = plan.est.q / f if f > 0 else math.inf
        gain = _gain(plan.t, after, n * u[0])
        if best is None or gain > best[0]:
            best = (gain, after, is_ps, n)
    if best is None:
        return None
    gain, plan.nxt, is_ps, plan.take = best
    return (-gain, plan.job.submit_time, plan.seq, plan, is_ps)


def _gain(t: float, after: float, unit: float) -> float:
    """Eq. 9 for one task: the drop of remaining time per unit of its dominant share."""
    if t == math.inf:
        gain = math.inf if after != math.inf else 0.0
    else:
        gain = t - after
    return gain / unit if unit > 0 else (math.inf if gain > 0 else 0.0)


# ---------------------------------------------------------------------------- Theorem 1
class NodeSet:
    """Free resources of the up nodes, popped most-free-CPU first (§4.2: servers "in descending
    order of ... available CPU capacity") from two heaps: nodes with a GPU free and nodes
    without (CPU servers, and GPU servers whose GPUs are all taken). A job with GPU tasks looks
    at the first kind first, any other job at the second kind first (then the other): on mixed
    clusters CPU jobs leave free GPUs' servers to GPU jobs (note §6 #15d)."""

    def __init__(self, free: np.ndarray, up, capacity: np.ndarray, heaps: bool = True):
        """``heaps`` False: no heaps yet (the caller changes rows first, then calls ``reheap``)."""
        self.rows = np.asarray(free, dtype=float).tolist()
        self.up = [bool(u) for u in up]
        self.total = [0.0, 0.0, 0.0]
        self.heaps: tuple[list, list] = ([], [])   # (with GPUs, without)
        self.failed: dict[tuple, list] = {}   # task kinds -> counts that did not fit (this round)
        if heaps:
            self.reheap()

    def reheap(self) -> None:
        self.failed = {}   # room changed: what did not fit may now
        heaps = ([], [])
        for i, row in enumerate(self.rows):
            if self.up[i]:
                heaps[0 if row[0] > EPS else 1].append((-row[1], i))
        for h in heaps:
            heapq.heapify(h)
        self.heaps = heaps
        total = [0.0, 0.0, 0.0]
        for h in heaps:
            for _, i in h:
                row = self.rows[i]
                total[0] += row[0]
                total[1] += row[1]
                total[2] += row[2]
        self.total = total

    def pop(self, gpu_first: bool) -> int | None:
        a, b = self.heaps if gpu_first else self.heaps[::-1]
        h = a or b
        return heapq.heappop(h)[1] if h else None

    def push(self, nodes: list[int]) -> None:
        for i in nodes:
            heapq.heappush(self.heaps[0 if self.rows[i][0] > EPS else 1], (-self.rows[i][1], i))

    def place(self, job, counts: dict) -> dict | None:
        return place(self, job, counts)

    def add(self, job: JobView, alloc, sign: float = 1.0) -> bool:
        """Give back (``sign`` 1) or take again (-1) what ``alloc`` holds; taking fails (and
        changes nothing) if a node no longer has room. Heaps are rebuilt by ``reheap``."""
        delta: dict[int, list[float]] = {}
        for r in job.roles:
            tasks = alloc.get(r.name, {})
            d = _demand(r, tasks)
            for i, c in tasks.items():
                acc = delta.setdefault(i, [0.0, 0.0, 0.0])
                for k in range(3):
                    acc[k] += sign * c * d[k]
        if sign < 0 and any(self.rows[i][k] + d[k] < -EPS for i, d in delta.items() for k in range(3)):
            return False
        for i, d in delta.items():
            for k in range(3):
                self.rows[i][k] += d[k]
        return True


class Strategy:
    """Free resources placed by one of policies/placement.py's strategies instead of Theorem 1
    (Fig. 18's ablations: DRF's load-balancing ``spread``, Tetris's ``align``), with NodeSet's
    interface."""

    def __init__(self, free: np.ndarray, name: str):
        self.free, self.how = free, strategy(name)

    def place(self, job, counts: dict) -> dict | None:
        return self.how(self.free, job.roles, {r: n for r, n in counts.items() if n})

    def add(self, job: JobView, alloc, sign: float = 1.0) -> bool:
        if sign > 0:
            release(self.free, job)
            return True
        return keep_in_place(self.free, job)

    def reheap(self) -> None:
        pass


def theorem1(free: np.ndarray, roles, counts: dict) -> dict | None:
    """Theorem 1 placement as a placement strategy (``strategy(free, roles, counts)``, deducting
    from ``free``), for DRF's and Tetris's allocation with Optimus's placement (Fig. 17)."""
    nodes = NodeSet(free, np.ones(len(free), dtype=bool), None)
    alloc = place(nodes, SimpleNamespace(roles=roles), counts)
    if alloc is not None:
        free[:] = np.asarray(nodes.rows)
    return alloc


def _demand(role, tasks) -> tuple[float, float, float]:
    cpu, mem = getattr(tasks, "cpu", None), getattr(tasks, "mem", None)
    return (role.gpu, role.cpu if cpu is None else cpu, role.mem if mem is None else mem)


def _fits(row, demand) -> int:
    """Tasks of ``demand`` that fit in ``row``."""
    n = 1 << 30
    g, c, m = demand
    if g > 0:
        n = int((row[0] + EPS) // g)
    if c > 0:
        x = int((row[1] + EPS) // c)
        n = x if x < n else n
    if m > 0:
        x = int((row[2] + EPS) // m)
        n = x if x < n else n
    return n


def _spread(rows: list, cand: list[int], demand, n: int) -> dict[int, int] | None:
    """``n`` tasks over ``cand`` as evenly as their room allows (counts differ by at most one
    between nodes that are not full), deducted from ``rows``; None if they do not fit."""
    caps = sorted((min(_fits(rows[i], demand), n), j, i) for j, i in enumerate(cand))
    caps = [(c, i) for c, _, i in caps if c > 0]
    if sum(c for c, _ in caps) < n:
        return None
    out, rem, left = {}, n, len(caps)
    for cap, i in caps:   # smallest room first: each node takes its even share of what is left
        take = min(cap, -(-rem // left))
        left -= 1
        if take:
            out[i] = take
            rem -= take
            row = rows[i]
            for k in range(3):
                row[k] -= take * demand[k]
    return dict(sorted(out.items()))


def place(nodes: NodeSet, job: JobView, counts: dict[str, int]) -> dict | None:
    """Theorem 1 (§4.2): the fewest servers that hold the job (k = 1, 2, ... in the order of
    ``NodeSet``), with each role's tasks spread evenly over them; roles with GPUs placed first.
    Deducts from ``nodes``; None (nothing changed) if the job does not fit."""
    roles = sorted((r for r in job.roles if counts.get(r.name, 0) > 0), key=lambda r: -r.demand[0])
    if not roles:
        return None
    need = [sum(counts[r.name] * r.demand[k] for r in roles) for k in range(3)]
    if any(need[k] > nodes.total[k] + EPS for k in range(3)):
        return None
    kind = tuple((r.name, r.demand) for r in roles)
    sizes = tuple(counts[r.name] for r in roles)
    for failed in nodes.failed.get(kind, ()):   # a job like one that did not fit, and no smaller
        if all(a >= b for a, b in zip(sizes, failed)):
            return None
    first, n_first = roles[0], counts[roles[0].name]
    cand: list[int] = []
    have, slots, out, next_try = [0.0, 0.0, 0.0], 0, None, 1
    while out is None:
        i = nodes.pop(need[0] > 0)
        if i is None:
            if cand and len(cand) < next_try:   # the last, whole candidate set
                out = _try(nodes.rows, cand, roles, counts)
            break
        cand.append(i)
        row = nodes.rows[i]
        for k in range(3):
            have[k] += row[k]
        slots += _fits(row, first.demand)
        # try k servers only once they could hold the job at all (cheap necessary conditions);
        # after a failed try, at twice as many (a fragmented cluster costs O(n), not O(n^2))
        if len(cand) >= next_try and slots >= n_first and all(have[k] + EPS >= need[k] for k in range(3)):
            out = _try(nodes.rows, cand, roles, counts)
            next_try = 2 * len(cand)
        if out is None and all(have[k] >= GIVE_UP * need[k] for k in range(3)):
            break   # servers with GIVE_UP times what the job needs cannot hold it: it waits
    if out is not None:
        for k in range(3):
            nodes.total[k] -= need[k]
    else:
        nodes.failed.setdefault(kind, []).append(sizes)
    nodes.push(cand)
    return out


def _try(rows, cand, roles, counts) -> dict | None:
    saved = [(i, list(rows[i])) for i in cand]
    alloc = {}
    for r in roles:
        placed = _spread(rows, cand, r.demand, counts[r.name])
        if placed is None:
            for i, row in saved:
                rows[i][:] = row
            return None
        alloc[r.name] = placed
    return alloc


# ---------------------------------------------------------------------------- the policy
@register
class Optimus(Policy):
    name = "optimus"
    tags = frozenset({"elastic", "multi-resource", "ps"})

    def __init__(self, interval: Positive = 1200.0, event_driven: bool = False,
                 threshold: Annotated[float, Range(gt=0)] | None = None, loose_threshold: NonNegative = 0.03,
                 relative: bool = False, patience: Annotated[int, Range(ge=1, le=1000)] = 5,
                 overestimate: Annotated[float, Range(ge=1)] = 1.05, prior_epochs: Positive = 20.0,
                 prerun: Annotated[list[PrerunPair], Length(1, 64)] | None = None, prerun_s: NonNegative = 30.0,
                 divisor: Literal["share", "raw"] = "share", on_no_fit: Literal["stop", "skip"] = "stop",
                 max_tasks: Annotated[int, Range(ge=0, le=100_000)] = 0, keep_placement: bool = True, use_measured: bool = True,
                 prediction_error: Fraction = 0.0, error_on: Literal["both", "convergence", "speed"] = "both",
                 speed_error: Fraction | None = None, seed: Count = 0, job_cpu_cap: Positive | None = None,
                 placement: Literal["theorem1", "first_fit", "best_fit", "consolidate", "spread", "align",
                                    "most_free"] = "theorem1", steps: dict[str, StepPair] | None = None,
                 mode: Literal["name", "async", "sync"] = "name"):
        self.interval, self.event_driven = float(interval), event_driven
        self.threshold = None if threshold is None else float(threshold)   # None: each job owner's (§3.1)
        self.relative, self.patience = relative, int(patience)
        self.loose = float(loose_threshold) or None
        self.overestimate, self.prior_epochs = float(overestimate), float(prior_epochs)
        self.prerun = tuple(tuple(int(x) for x in s) for s in (PRERUN if prerun is None else prerun))
        self.delay = float(prerun_s) * len(self.prerun)   # §5/§6.1: pre-run time before the first start
        self.divisor, self.on_no_fit, self.max_tasks = divisor, on_no_fit, int(max_tasks)
        self.keep_placement, self.use_measured = keep_placement, use_measured
        self.error, self.error_on, self.seed = float(prediction_error), error_on, int(seed)
        # §6.3.1's combined point errs by 15% on convergence and 6% on speed: a speed error of its own
        self.speed_error = self.error if speed_error is None else float(speed_error)
        self.placement = placement   # Fig. 18's ablations: another policy's placement for Algorithm 1's counts
        self.job_cpu_cap = math.inf if job_cpu_cap is None else float(job_cpu_cap)   # None: Optimus has no quota
        # per model, [PS, workers] added at once, one role a round (DLRover §6.3's Optimus); None: Algorithm 1
        self.steps = {m: (int(a), int(b)) for m, (a, b) in (steps or {}).items()}
        self.mode = mode   # a PS job's training mode: from its model name (job_mode), or every job's

    def reset(self, view: View) -> None:
        self.active: dict[str, JobView] = {}
        # the active jobs in arrival order, each (submit time, trace index, tick, job, its plan if the
        # job is rigid): kept as jobs come and go, so that a round reads its eligible jobs as a prefix
        # (a job is eligible ``delay`` after its submission) instead of sorting them. A rigid job's
        # Plan is its gang request, the same every round: made once (``_enqueue``).
        self.queue: list[tuple] = []
        self.entries: dict[str, tuple] = {}   # job id -> its queue entry
        self._tick = 0
        self.needs: Counter = Counter()   # the queued rigid jobs' minimums (GPUs, cores, memory): how many of each
        self.elastic = 0                  # elastic jobs queued
        self.held: dict[str, tuple] = {}   # job id -> (allocation, its task counts): ``place_all``
        self.cache: dict[str, dict] = {}   # job id -> fitted state (losses seen, samples, models)
        self.next_at = 0.0
        self._node_size = None   # the largest server's capacity per resource: (any server, a GPU server)
        self._sizes_key = None   # the capacities ``_node_size`` was worked out from

    # ------------------------------------------------------------------ the loop
    def decide(self, view: View) -> Decision:
        for job in view.finished:
            self.active.pop(job.job_id, None)
            self.cache.pop(job.job_id, None)
            self._dequeue(job.job_id)
            self.held.pop(job.job_id, None)
        for job in view.arrived:
            self.active[job.job_id] = job
            self._enqueue(job)
        now = view.now
        due = now >= self.next_at - 1e-9
        decision = Decision()
        if due or (self.event_driven and (view.arrived or view.finished or view.stopped or self._ready(now))):
            if due:
                self.next_at = now + self.interval
            decision.allocations = self.schedule(view)
        wake = self.next_at
        if self.event_driven:
            later = [j.submit_time + self.delay for j in self.active.values() if j.submit_time + self.delay > now + 1e-9]
            wake = min([wake, *later])
        decision.wakeup = wake - now
        return decision

    def _enqueue(self, job: JobView) -> None:
        """Add ``job`` to the queue at its place in arrival order (the tick breaks ties as the
        order of arrival did)."""
        self._dequeue(job.job_id)
        plan = None if any(r.elastic for r in job.roles) else Plan(job, None, 0)
        entry = (job.submit_time, job.index, self._tick, job, plan)
        self._tick += 1
        self.entries[job.job_id] = entry
        bisect.insort(self.queue, entry)
        if plan is None:
            self.elastic += 1
        else:
            self.needs[plan.need] += 1

    def _dequeue(self, job_id: str) -> None:
        entry = self.entries.pop(job_id, None)
        if entry is None:
            return
        del self.queue[bisect.bisect_left(self.queue, entry[:3])]   # the key (time, index, tick) is unique
        plan = entry[4]
        if plan is None:
            self.elastic -= 1
        else:
            self.needs[plan.need] -= 1
            if not self.needs[plan.need]:
                del self.needs[plan.need]

    def _ready(self, now: float) -> bool:
        """A job's pre-run ended at this instant (event-driven mode replans then)."""
        return any(abs(j.submit_time + self.delay - now) < 1e-9 for j in self.active.values())

    def schedule(self, view: View) -> dict:
        """One round: estimates, Algorithm 1, Theorem 1; the changed allocations."""
        capacity = view.cluster.up_capacity()
        cap = view.cluster.capacity
        key = (cap.shape, cap.tobytes())
        if key != self._sizes_key:   # the servers' sizes change only with the cluster
            self._sizes_key, self._node_size = key, _server_sizes(cap)
        least = None   # with elastic jobs queued every eligible job is estimated, whether it fits or not
        if not self.elastic and self.needs:
            least = tuple(min(need[k] for need in self.needs) for k in range(3))
        got = allocate(self._eligible(view), capacity, divisor=self.divisor, on_no_fit=self.on_no_fit,
                       max_tasks=self.max_tasks, job_cpu_cap=self.job_cpu_cap, least=least)
        return self.place_all(view, got)

    def _eligible(self, view: View) -> Iterator[Plan]:
        """The plans of the jobs past their pre-run, in arrival order (a prefix of the queue:
        submission times are sorted, so are the ends of pre-runs)."""
        limit, delay = view.now + 1e-9, self.delay
        for n, (submit, _, _, job, plan) in enumerate(self.queue):
            if not submit + delay <= limit:
                return
            yield plan if plan is not None else self._plan(job, view, n)

    def _plan(self, job: JobView, view: View, seq: int) -> Plan:
        """The job's place in Algorithm 1; with a growth step for its model (``steps``) it
        grows from the counts it runs at, one step a round."""
        est = self.estimate(job, view) if any(r.elastic for r in job.roles) else None
        step = self.steps.get(job.model or "")
        if step is None or est is None:
            return Plan(job, est, seq)
        return Plan(job, est, seq, step, task_counts(job.allocation) if job.allocation else None)

    def place_all(self, view: View, plans: list[Plan]) -> dict:
        """Theorem 1 placement of the planned counts, smallest job first (p + w, note §6 #16).
        With ``keep_placement`` a running job planned at the counts it runs keeps its nodes (no
        restart: §5.4 restarts a job when its PS or workers change)."""
        wanted = {p.jid: p for p in plans}
        kept, moved, held = set(), [], self.held
        for jid, job in view.running.items():
            plan = wanted.get(jid)
            if plan is not None and self.keep_placement:
                alloc = job.allocation   # its task counts are worked out once per allocation it holds
                h = held.get(jid)
                if h is None or h[0] is not alloc:
                    h = held[jid] = (alloc, task_counts(alloc))
                if h[1] == (plan.placed if plan.est is None else _nonzero(plan.counts)):
                    kept.add(jid)
                    continue
            moved.append(job)
        changes: dict = {}
        order = [p for p in plans if p.jid not in kept]
        if order:   # else nothing is placed: the cluster's free resources are not needed
            self._place(view, order, moved, changes)
        for job in moved:   # running jobs whose gang minimum did not fit this round are paused too
            if job.job_id not in wanted:
                changes[job.job_id] = None
        return changes

    def _place(self, view: View, order: list[Plan], moved: list[JobView], changes: dict) -> None:
        """Place ``order`` on the free resources with ``moved``'s given back; ``changes`` gets the
        allocations that differ from the jobs' own (None: paused)."""
        cl = view.cluster
        nodes = (NodeSet(cl.free_copy(), cl.up, cl.capacity, heaps=False) if self.placement == "theorem1"
                 else Strategy(cl.free_copy(), self.placement))
        for job in moved:
            nodes.add(job, job.allocation)
        nodes.reheap()
        order.sort(key=lambda p: (sum(p.counts.values()), p.job.submit_time, p.job.index))
        for plan in order:
            job = plan.job
            alloc = nodes.place(job, plan.counts)
            if alloc is None and not job.allocation:   # counts that no cluster state can hold: fewer tasks
                counts = self._packable(view, job, plan.counts)
                if counts != plan.counts:
                    alloc = nodes.place(job, counts)
            if alloc is not None:
                if not _same(alloc, job.allocation):
                    changes[plan.jid] = alloc
                continue
            if job.allocation and nodes.add(job, job.allocation, -1.0):  # paused? keep what it has, if still free
                nodes.reheap()
                continue
            if job.allocation:
                changes[plan.jid] = None   # §4.2: jobs not placed are paused until the next interval

    def _packable(self, view: View, job: JobView, counts: dict) -> dict:
        """``counts`` with one task fewer at a time (``_shrink``) until they can be placed on the
        whole (empty) cluster. A choice: Algorithm 1 plans against the cluster's totals, so its
        counts may not pack onto the nodes at all; a pending job planned so waits for good (one
        DLRM job alone on DLRover-RM's 20 servers did: a livelock). Counts that pack onto the
        empty cluster are kept: the job waits for room, as §4.2 says."""
        cl, counts = view.cluster, dict(counts)
        while True:
            empty = (NodeSet(cl.capacity.copy(), cl.up, cl.capacity) if self.placement == "theorem1"
                     else Strategy(cl.capacity.copy(), self.placement))
            if empty.place(job, counts) is not None or not _shrink(job, counts):
                return counts

    # ------------------------------------------------------------------ estimates
    def estimate(self, job: JobView, view: View) -> Estimate:
        q, rate = self.remaining(job), self.speed(job)
        if self.error or self.speed_error:   # §6.3.1: the error is on the total epochs to convergence, v·(1 ± e), not on what is left
            eq, ef = self._error_factors(job)
            base = rate
            if eq != 1.0:
                done = job.iterations_done
                q = max((q + done) * eq - done, 0.5 * (job.iterations_per_epoch or 2.0))
            rate = (lambda p, w: base(p, w) * ef) if ef != 1.0 else base
        return Estimate(q, rate)

    def _error_factors(self, job: JobView) -> tuple[float, float]:
        """§6.3.1: v·(1 + e) or v·(1 − e), the sign drawn per job and per quantity (note §6 #6)."""
        c = self.cache.setdefault(job.job_id, {})
        if "error" not in c:
            signs = component_rng(self.seed, f"optimus.error.{job.index}").choice([-1.0, 1.0], size=2)
            c["error"] = (1.0 + signs[0] * self.error if self.error_on in ("both", "convergence") else 1.0,
                          1.0 + signs[1] * self.speed_error if self.error_on in ("both", "speed") else 1.0)
        return c["error"]

    def remaining(self, job: JobView) -> float:
        """Q_j in iterations: the fitted curve's epochs left (§3.1, §4.1) times the epoch length,
        less the part of the current epoch done; ``prior_epochs`` before 3 epochs are seen ([C]
        estimator: +20 epochs when the fit fails). A job without loss reports that declares its
        iterations (a fixed number of steps, as DLRover-RM §6's DLRM jobs: 200,000) has those
        less the ones done (at least one); one that declares none, the iterations done so far
        (at least one)."""
        done = job.iterations_done
        ipe = job.iterations_per_epoch
        if not ipe:
            declared = job.declared_iterations
            return max((declared - done) if declared is not None else done, 1.0)
        losses = job.loss_observations
        n = len(losses)
        c = self.cache.setdefault(job.job_id, {})
        if c.get("losses") != n:
            c["losses"] = n
            epochs, early = self.prior_epochs, True
            if n >= 3:
                try:
                    fit = LossFitter().fit(losses)
                    delta = self.threshold if self.threshold is not None else job.convergence_threshold
                    loose = self.loose if self.loose is not None and self.loose > delta else None
                    epochs = fit.remaining_epochs(delta, loose, self.relative, self.patience)
                    early = loose is not None and n < fit.total_epochs(loose, self.relative, self.patience)
                except ValueError:
                    epochs = self.prior_epochs
            c["epochs"] = epochs * (self.overestimate if early else 1.0)
        return max(c["epochs"] * ipe - (done - n * ipe), ipe * 0.5)

    def speed(self, job: JobView):
        """f_j(p, w): Eq. 3/4 fitted by NNLS to the pre-run samples and the measured throughput,
        refitted when a new sample arrives (§3.2)."""
        c = self.cache.setdefault(job.job_id, {})
        ps, worker = shape(job)
        if "prerun" not in c:
            c["prerun"] = self._prerun(job, ps, worker, self._node_size)
        samples = job.throughput_samples
        key = (len(samples), samples[-1].start if samples else None, samples[-1].end if samples else None)
        if c.get("speed_key") != key:
            c["speed_key"] = key
            points: dict[tuple, list[float]] = {}
            for x, r in c["prerun"]:
                points.setdefault(x, []).append(r)
            _measured(samples, ps, worker, points)
            measured = {x: float(np.mean(v)) for x, v in sorted(points.items())}
            model = self._fit(job, list(measured.items()))
            if self.use_measured and measured:   # a measured point is used as it is (note §6 #20, [C])
                c["rate"] = lambda p, w: measured.get((p, w)) or model(p, w)
            else:
                c["rate"] = model
        return c["rate"]

    def _prerun(self, job: JobView, ps, worker, node_size=None) -> list:
        """§3.2/§6.1 pre-run: the job trained briefly at a few (p, w) settings (within its bounds),
        each measured through the job's profiled speed, on the fewest servers that hold the
        setting (Theorem 1's placement; ``node_size``: the largest server's capacity per resource)."""
        out, seen = [], set()
        bound = {r.name: (r.min_count, r.max_count) for r in job.roles}
        for p, w in self.prerun:
            counts = {r.name: r.min_count for r in job.roles}
            if ps:
                counts[ps] = min(max(p, bound[ps][0]), bound[ps][1])
            counts[worker] = min(max(w, bound[worker][0]), bound[worker][1])
            x = ((counts[ps] if ps else 1), counts[worker])
            if x in seen:
                continue
            seen.add(x)
            try:
                r = job.profiled.counts_rate(counts, _fewest_nodes(job, counts, node_size))
            except PolicyError:   # no speed model to profile with (a bare test engine)
                return []
            if r > 0:
                out.append((x, r))
        return out

    def _fit(self, job: JobView, points: list):
        mode = (job_mode(job) if self.mode == "name" else self.mode) if shape(job)[0] else "sync"
        batch = float(job.batch_size or 1.0)
        if not points:   # nothing measured: throughput proportional to workers
            return lambda p, w: float(w)
        model = OptimusSpeed(mode, batch).fit(points, min_samples=1)
        return optimus_rate(mode, model.theta, batch)


@register
class OptimusOracle(Optimus):
    """Optimus with the true remaining work and speed (§6.3.1's zero-error case; with
    ``prediction_error`` its error-injection experiment)."""

    name = "optimus_oracle"
    oracle = True
    tags = frozenset({"oracle", "elastic", "multi-resource", "ps"})

    def remaining(self, job: JobView) -> float:
        """The true remaining work, aimed as the estimator aims it (§4.1): with ``loose_threshold``
        δ' the true work to δ' (times ``overestimate``) until the job has reached δ', then to its
        convergence point, so that the oracle differs from ``optimus`` in its estimates only
        (§6.3.1 feeds the true values to the same scheduler)."""
        left = max(job.remaining_work, 0.0)
        curve = job.spec.curve
        delta = self.threshold if self.threshold is not None else job.convergence_threshold
        if curve is None or self.loose is None or not self.loose > delta:
            return left
        c = self.cache.setdefault(job.job_id, {})
        if "loose_work" not in c:   # work to reach δ' on the true curve
            c["loose_work"] = epochs_to_converge(curve.b, self.loose, self.relative, self.patience) * curve.iters_per_epoch
        to_loose = c["loose_work"] - job.iterations_done
        if to_loose > 0:
            return min(to_loose * self.overestimate, left)
        return left

    def speed(self, job: JobView):
        """The true speed at Theorem 1's layout on the fewest servers that hold a setting (the
        speed model's, exact); with ``use_measured``, at a (p, w) the job has run at, the mean
        throughput measured there instead (the testbed measurements §6.1's simulator replays):
        on a busy testbed a job can land on more servers than the fewest, where its 1GbE
        transfers cost more (docs/policies/optimus.md, the oracle)."""
        c = self.cache.setdefault(job.job_id, {})
        truth = self._truth(job, c)
        if not self.use_measured:
            return truth
        samples = job.throughput_samples
        key = (len(samples), samples[-1].start if samples else None, samples[-1].end if samples else None)
        if c.get("speed_key") != key:
            c["speed_key"] = key
            ps, worker = shape(job)
            measured = {x: float(np.mean(v)) for x, v in _measured(samples, ps, worker, {}).items()}
            c["rate"] = (lambda p, w: measured.get((p, w)) or truth(p, w)) if measured else truth
        return c["rate"]

    def _truth(self, job: JobView, c: dict):
        if "truth" not in c:
            ps, worker = shape(job)
            exact = Profiled(job.spec, Observer(speed=self._speed_model, cluster=self._cluster))
            base = {r.name: r.min_count for r in job.roles}
            memo: dict = {}

            def rate(p, w):
                r = memo.get((p, w))
                if r is None:
                    counts = dict(base)
                    if ps:
                        counts[ps] = p
                    counts[worker] = w
                    r = memo[(p, w)] = exact.counts_rate(counts, _fewest_nodes(job, counts, self._node_size))
                return r
            c["truth"] = rate
        return c["truth"]

    def schedule(self, view: View) -> dict:
        self._speed_model, self._cluster = view.clock.speed, view.clock.cluster
        return super().schedule(view)


def _measured(samples, ps, worker, points: dict) -> dict:
    """``points`` with the throughput samples added: (p, w) -> rates measured there (a job
    without PS counts p = 1)."""
    for s in samples:
        k = task_counts(s.allocation)
        if s.rate > 0 and k.get(worker, 0) > 0:
            points.setdefault(((k.get(ps, 1) if ps else 1), k[worker]), []).append(s.rate)
    return points


def _shrink(job: JobView, counts: dict) -> bool:
    """One task fewer of the role with most tasks above its minimum (workers on ties); False at
    the gang minimum (``Optimus._packable``)."""
    over = [(counts[r.name] - r.min_count, r.name == "worker", r.name) for r in job.roles if counts[r.name] > r.min_count]
    if not over:
        return False
    counts[max(over)[2]] -= 1
    return True


def _server_sizes(capacity: np.ndarray):
    """The largest server's capacity per resource, over every server and over the servers with
    GPUs (a job with GPU tasks is placed on those: Theorem 1 spreads its PS and workers evenly
    over the same servers); None for an empty cluster."""
    if not len(capacity):
        return None
    gpu = capacity[capacity[:, 0] > 0]
    return capacity.max(axis=0), (gpu.max(axis=0) if len(gpu) else capacity.max(axis=0))


def _fewest_nodes(job: JobView, counts: dict, sizes) -> int:
    """The fewest servers that hold ``counts`` of the job's tasks, each of the largest size of the
    servers it can use (``_server_sizes``: servers with GPUs for a job with GPU tasks); 1 unknown.
    A testbed GPU server (8 cores) holds 1 PS and 2 workers of ResNet-50, where the largest
    server per resource (16 cores of a CPU server, 2 GPUs of a GPU server) would hold 3 PS more."""
    if sizes is None:
        return 1
    gpu_job = any(counts.get(r.name, 0) and r.demand[0] > 0 for r in job.roles)
    node_size = sizes[1] if gpu_job else sizes[0]
    n = 1
    for k in range(3):
        need = sum(counts.get(r.name, 0) * r.demand[k] for r in job.roles)
        if need > 0 and node_size[k] > 0:
            n = max(n, math.ceil(need / node_size[k] - 1e-9))
    return n


def _same(a, b) -> bool:
    if set(a) != set(k for k, v in b.items() if v):
        return False
    return all(dict(a[r]) == dict(b[r]) for r in a)
