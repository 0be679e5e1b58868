"""SideCar's adaptive GPU scheduler and its two baselines (Wang et al., SC20, seed 003).

Every job is one container on one host (TF MirroredStrategy, §V-A) and may run with any of its
*options*, GPU counts ({1, 2, 4, 8} by default, §III-B-1 Table III, notes A16) within its
role's bounds. Three policies:

- ``sidecar`` (§III-C, Algorithms 1 and 2): a waiting job (FIFO scan, no head-of-line blocking,
  notes A9) tries every option on every host, with the host's idle GPUs or the idle GPUs plus
  the shortfall taken from *one* running job on that host, whose remaining count must be one of
  its options (Alg. 1); when no job waits and GPUs are idle, idle GPUs go to one running job,
  on its host or, with ``cross_host``, on another host by a pod restart (Alg. 2, §VI-E). The
  option with the lowest predicted makespan wins (strict <, first evaluated wins ties, A2);
  there is no do-nothing option (A4). Predictions (§III-C, E1–E6): remaining iterations ×
  profiled seconds per iteration with N GPUs of the host's type (``JobView.profiled``: the same
  per-type speed the engine trains at, simulator/profiles/sidecar.yaml, Table IV), plus the restart and start costs
  below; the makespan is the latest predicted finish of all jobs (A1). Early initialisation
  (§III-B-3): the incoming job's container is brought up for ``container_init_s`` while the
  victim keeps training on all its GPUs; then the victim restarts its training process on
  fewer GPUs and the new job starts its process (run with ``overhead=sidecar`` and
  ``early_init: true``, so that the start costs the process start only).
- ``sidecar_termination`` (§V-B(2), the Optimus-style baseline, notes A17): an arriving job
  starts with its smallest option if a host has an idle GPU, else waits (FIFO); when no job
  waits, idle GPUs go one option step at a time to the job with the largest marginal gain in
  predicted remaining time per GPU (Optimus), each step a pod restart (``overhead=pod_restart``),
  which may place the job on another host (``cross_host``: a new pod, §III-A).
- ``k8s_default`` (§V-B(1), notes A18): each job runs at its requested count (drawn from the
  options by the workload), static; any waiting job that fits on one host starts, out of order,
  on the host with the most idle GPUs.

W1–W3 jobs declare their epochs (§V-A, §III-C), so the remaining iterations are the declared
iterations (``JobView.declared_iterations``, engine config ``observe.declared_iterations``) less
those done. A job that declares none (W4 runs to a target accuracy) and reports its training curve
is predicted by SideCar's online fit (E7, §III-C-1: Optimus's Eq. 1 fitted by NNLS to the points it
has reported, ``LossFitter``; ``accuracy_fit``); before ``fit_min_points`` points, or for a job that
reports none, by the iterations the finished jobs of its model ran, on average,
``undeclared_iterations`` before any has finished. Jobs the model does not cover (several roles, CPU only,
larger than a host) run at their request, first fit, FIFO. docs/policies/sidecar.md.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from typing import Annotated

import numpy as np

from clustersim.policies.base import Decision, JobView, Policy, View, arrival, register
from clustersim.policies.placement import first_fit
from clustersim.simulator.cluster import EPS, tasks_per_node
from clustersim.simulator.convergence import LossFitter
from clustersim.simulator.job import nodes_of, task_counts
from clustersim.simulator.overhead import PodRestart, SidecarRestart   # the §II-C costs, cited there
from clustersim.simulator.params import Length, NonNegative, Positive, Range

# GPUs a job may be given: 1 to 4,096 each, 1 to 64 options (choice: bounds on a list the
# policy searches at every decision; SideCar's are 1, 2, 4, 8, §IV)
GpuOptions = Annotated[list[Annotated[int, Range(ge=1, le=4096)]], Length(1, 64)]

INF = float("inf")
# E7's fit (``_Base.fitted_total``): at least the 3 points Eq. 1's three coefficients need (LossFitter)
FitPoints = Annotated[int, Range(ge=3, le=1000)]
Patience = Annotated[int, Range(ge=1, le=1000)]


class _Base(Policy):
    """Shared: options, hosts, fallback for jobs outside the single-host model, predictions."""

    tick_s: float | None = None

    def __init__(self, gpu_options: GpuOptions = (1, 2, 4, 8), undeclared_iterations: Positive = 10010.0,
                 accuracy_fit: bool = True, fit_min_points: FitPoints = 3, fit_patience: Patience = 5,
                 fit_relative: bool = False):
        self.options = sorted({int(o) for o in gpu_options})
        self.prior = float(undeclared_iterations)
        self.fit_on, self.fit_min = accuracy_fit, int(fit_min_points)
        self.fit_patience, self.fit_relative = int(fit_patience), fit_relative
        self._charge = PodRestart()   # what a restart's checkpoint costs (the subclasses' checkpoint_gb_per_s)
        self._fits: dict[str, tuple[int, float | None]] = {}   # job -> (points fitted, predicted total iterations)

    def reset(self, view: View) -> None:
        self.queue: list[str] = []          # waiting jobs, FIFO by arrival
        self.sizes: dict[str | None, list] = {}   # model -> [iterations finished jobs ran, count]
        self.hosts = range(view.cluster.num_nodes)
        self.gpus_per_host = view.cluster.capacity[:, 0]
        self._opts: dict[tuple, list] = {}    # a role's bounds -> its options (opts)
        self.max_host = self.gpus_per_host.max(initial=0)   # GPUs of the largest host
        self._facts: dict[str, tuple] = {}    # job -> (role or None, options, shape, declared, model): ``facts``
        self._shapes: dict[tuple, int] = {}   # shape -> its number (``_shape``)
        self._fits = {}

    # --- the jobs the model covers
    def facts(self, jv: JobView) -> tuple:
        """(``role``, ``opts``, shape: task demand and options, declared iterations, model) of a
        job, worked out once while it lives (fixed at submission, read at every decision). The
        shape of a job outside the model is what its first fit reads: each role's demand and count."""
        hit = self._facts.get(jv.job_id)
        if hit is None:
            roles = jv.roles
            role = roles[0] if len(roles) == 1 and roles[0].gpu == 1 and roles[0].count <= self.max_host else None
            if role is None:   # outside the model: no options (``fallback`` runs it, first fit)
                counts = jv.requested_counts()
                fit = ("first fit",) + tuple((tuple(r.demand), counts.get(r.name, 0)) for r in roles)
                hit = self._facts[jv.job_id] = (None, None, self._shape(fit), None, None)
            else:
                opts = self._options(role)
                hit = self._facts[jv.job_id] = (role, opts, self._shape((tuple(role.demand), tuple(opts))),
                                                jv.declared_iterations, jv.model)
        return hit

    def _shape(self, shape: tuple) -> int:
        """A small number for a shape, so that sets and maps of shapes hash an int."""
        return self._shapes.setdefault(shape, len(self._shapes))

    def role(self, jv: JobView):
        """The job's one role of 1-GPU tasks if the model covers it (one host holds it), else None."""
        return self.facts(jv)[0]

    def opts(self, jv: JobView) -> list[int]:
        return self.facts(jv)[1]

    def _options(self, r) -> list[int]:
        key = (r.min_count, r.max_count, r.count)
        out = self._opts.get(key)
        if out is None:
            top = self.max_host
            out = self._opts[key] = [o for o in self.options if r.min_count <= o <= r.max_count and o <= top] or [r.count]
        return out

    @staticmethod
    def host(jv: JobView) -> int:
        return next(iter(nodes_of(jv.allocation)))

    def idle(self, free: np.ndarray, jv: JobView, view: View) -> np.ndarray:
        fit = tasks_per_node(free, jv.roles[0].demand)
        return np.where(view.cluster.up, fit, 0)

    def start_waiting(self, view: View, size) -> tuple[dict, np.ndarray]:
        """Start waiting jobs out of order, each with ``size(job)`` GPUs on the host with the most
        idle ones that fits it (§VI-A); the allocations and the free matrix left."""
        self.arrivals(view)
        allocs: dict = {}
        free = view.cluster.free_copy()
        for jid in list(self.queue):
            jv = view.pending[jid]
            if self.role(jv) is None:
                self.fallback(jv, free, allocs)
                continue
            n = size(jv)
            idle = self.idle(free, jv, view)
            hosts = [h for h in self.hosts if idle[h] >= n]
            if hosts:
                h = max(hosts, key=lambda x: (idle[x], -x))
                free[h] -= np.asarray(jv.roles[0].demand) * n
                allocs[jid] = {jv.roles[0].name: {h: n}}
        self.queue = [j for j in self.queue if j not in allocs]
        return allocs, free

    # --- predictions (E1)
    def t_iter(self, jv: JobView, n: int, host: int, view: View) -> float:
        """Profiled seconds per iteration with n GPUs on ``host`` (§III-B-1's training-speed profile,
        by GPU count and GPU type: the host's type picks the profile's speed, Table IV)."""
        return jv.profiled.iteration_time({jv.roles[0].name: {host: n}})

    def checkpoint_s(self, jv: JobView) -> float:
        """Writing (or reading back) the job's model checkpoint, as the overhead model charges it
        (``checkpoint_gb_per_s``, notes/sidecar.md §3.6's C(τ)); 0 when not charged."""
        return self._charge.checkpoint_s(jv.profiled.costs)

    def remaining(self, jv: JobView) -> float:
        """Declared iterations less those done (E1); without a declaration, the iterations the
        fitted curve predicts (``fitted_total``, E7) or, before it has enough points, the mean size
        of the model's finished jobs (else of all finished jobs, else ``undeclared_iterations``)."""
        total = jv.declared_iterations
        if total is None:
            total = self.fitted_total(jv)
        if total is None:
            s = self.sizes.get(jv.model) or self.sizes.get(None)
            total = s[0] / s[1] if s else self.prior
        return max(total - jv.iterations_done, 0.0)

    def fitted(self, jv: JobView) -> bool:
        """Whether an undeclared job is predicted by the online fit (it reports its curve)."""
        return self.fit_on and jv.declared_iterations is None and jv.iterations_per_epoch is not None

    def fitted_total(self, jv: JobView) -> float | None:
        """E7 (§III-C-1): a job that declares no epochs trains until it reaches its owner's target;
        "the scheduler employs the online fitting method of Optimus [14]": the points the job has
        reported so far (one per ``iterations_per_epoch``) fitted by non-negative least squares to
        Optimus's Eq. 1 (``LossFitter``, the same fit the Optimus policy uses), and the iterations
        at which the fitted curve meets the owner's stopping rule (``convergence_threshold`` over
        ``fit_patience`` points, as the owner's rule is set; ``fit_relative``). At least the next
        point: the job has not stopped at the last one. None before ``fit_min_points`` points (the
        fallback of ``remaining``) or when the fit fails. Refitted only when a point arrives."""
        if not self.fitted(jv):
            return None
        losses = jv.loss_observations
        n = len(losses)
        if n < self.fit_min:
            return None
        hit = self._fits.get(jv.job_id)
        if hit is None or hit[0] != n:
            try:
                fit = LossFitter().fit(losses)
                epochs = fit.total_epochs(jv.convergence_threshold, self.fit_relative, self.fit_patience)
                total = max(epochs, n + 1) * jv.iterations_per_epoch
            except ValueError:
                total = None
            hit = self._fits[jv.job_id] = (n, total)
        return hit[1]

    # --- FIFO bookkeeping and the fallback
    def ended(self, view: View) -> set:
        """Learn from the jobs that finished (the size of their kind of job) and forget their
        facts; their ids."""
        gone = {j.job_id for j in view.finished}
        for jid in gone:
            self._facts.pop(jid, None)
            self._fits.pop(jid, None)
        for jv in view.finished:   # what a finished job ran: the size of its kind of job
            for key in (jv.model, None):
                s = self.sizes.setdefault(key, [0.0, 0])
                s[0] += jv.iterations_done
                s[1] += 1
        return gone

    def arrivals(self, view: View) -> None:
        gone = self.ended(view)
        for jv in sorted(view.arrived, key=arrival):
            self.queue.append(jv.job_id)
        for jv in view.stopped:   # a failure stopped it: it waits again, first
            if jv.job_id in view.pending and jv.job_id not in self.queue:
                self.queue.insert(0, jv.job_id)
        if gone:   # a queued job leaves the queue only by starting (``decide`` takes it out) or ending
            self.queue = [j for j in self.queue if j not in gone and j in view.pending]

    def tick(self, view: View, free: np.ndarray, allocs: dict) -> float | None:
        """Look again ``tick_s`` later while GPUs stay idle and jobs run (notes A7: the Job Launcher
        "periodically checks"; a job that is restarting cannot grow until its restart ends)."""
        if self.tick_s is None or not (view.running or allocs) or free[:, 0].max(initial=0) < 1:
            return None
        return self.tick_s

    def fallback(self, jv: JobView, free: np.ndarray, allocs: dict) -> None:
        alloc = first_fit(free, jv.roles, jv.requested_counts())
        if alloc is not None:
            allocs[jv.job_id] = alloc


@dataclass
class _Plan:
    """An incoming job being initialised early (Alg. 1's T, with its host)."""

    job: str
    ready: float          # container ready: the victim stops, the job starts
    host: int
    gpus: int
    victim: str | None
    removed: int


@register
class SideCar(_Base):
    name = "sidecar"
    tags = frozenset({"elastic"})

    def __init__(self, gpu_options: GpuOptions = (1, 2, 4, 8), undeclared_iterations: Positive = 10010.0,
                 accuracy_fit: bool = True, fit_min_points: FitPoints = 3, fit_patience: Patience = 5,
                 fit_relative: bool = False, container_init_s: NonNegative = 83.0,
                 process_restart_base_s: NonNegative = SidecarRestart.sidecar_base_s,
                 process_restart_per_gpu_s: NonNegative = SidecarRestart.sidecar_per_gpu_s,
                 pod_kill_s: NonNegative = PodRestart.pod_kill_s,
                 pod_start_base_s: NonNegative = PodRestart.pod_start_base_s,
                 pod_start_per_gpu_s: NonNegative = PodRestart.pod_start_per_gpu_s,
                 checkpoint_gb_per_s: Annotated[float, Range(gt=0)] | None = None,
                 cross_host: bool = True, reshape_up: bool = True, reshape_down: bool = True,
                 tick_s: Positive | None = 60.0):
        super().__init__(gpu_options, undeclared_iterations, accuracy_fit, fit_min_points, fit_patience, fit_relative)
        self._charge = PodRestart(checkpoint_gb_per_s=checkpoint_gb_per_s)
        self.tick_s = tick_s
        self.k_c = container_init_s
        self.d_sc = (process_restart_base_s, process_restart_per_gpu_s)
        self.pod = (pod_kill_s, pod_start_base_s, pod_start_per_gpu_s)
        self.cross_host, self.up, self.down = cross_host, reshape_up, reshape_down

    def reset(self, view: View) -> None:
        super().reset(view)
        self.plans: dict[str, _Plan] = {}
        self._tit: dict = {}                # job -> {(GPUs, host): profiled iteration time}
        self.adds = self.removes = 0        # Fig. 11's adding and removing events
        # kept while jobs run, changed only by what an event changes (``_sync``): the running jobs
        # in the model, those that may give GPUs by host and those that may take more, by index,
        # and their predicted finishes ordered by a bound (``_Latest``)
        self._run: dict[str, _Running] = {}
        self._givers: dict[int, list] = {}     # host -> [(index, job)] with an option below its count
        self._takers: list = []                # [(index, job)] with an option above its count
        self._latest: dict = {}                # declared, or the model whose mean it expects -> _Latest
        self._fitted_run: dict[str, _Running] = {}   # jobs predicted by E7's fit: each worked out at every decision
        self._changed: set = set()             # jobs this policy started or reshaped: read at the next decision
        self._version = 0
        # the waiting jobs, FIFO, kept per shape (``facts``), so that a decision passes over a
        # shape that found no plan without reading its jobs: shape -> [(place in line, job)]
        self._waiting: dict = {}
        self._line: dict = {}                  # job -> (place in line, shape)
        self._back = self._front = 0           # places given at the back and (negative) at the front

    # --- costs the scheduler predicts with (§II-C fit, notes §3.6)
    def restart_s(self, n: int) -> float:
        """SideCar's in-container restart of the training process onto n GPUs: D_sc(n)."""
        return self.d_sc[0] + self.d_sc[1] * n

    def pod_restart_s(self, n: int) -> float:
        return self.pod[0] + self.pod[1] + self.pod[2] * n

    # --- the waiting line
    def arrivals(self, view: View) -> None:
        """The line as ``_Base.arrivals`` keeps it (arrivals at the back, a stopped job first),
        per shape."""
        gone = self.ended(view)
        for jv in sorted(view.arrived, key=arrival):
            self._back += 1
            self._wait(jv, self._back)
        for jv in view.stopped:   # a failure stopped it: it waits again, first
            if jv.job_id in view.pending and jv.job_id not in self._line:
                self._front -= 1
                self._wait(jv, self._front)
        for jid in gone:
            self._leave(jid)

    def _wait(self, jv: JobView, place: int) -> None:
        shape = self.facts(jv)[2]
        self._line[jv.job_id] = (place, shape)
        insort(self._waiting.setdefault(shape, []), (place, jv.job_id))

    def _leave(self, jid: str) -> None:
        at = self._line.pop(jid, None)
        if at is not None:
            line = self._waiting[at[1]]
            del line[bisect_left(line, (at[0], jid))]
            if not line:
                del self._waiting[at[1]]

    def _in_line(self, stuck: set):
        """The waiting jobs in line order, but those whose shape is in ``stuck`` when the scan
        reaches them (the caller adds shapes to it and clears it as it goes): the order in which a
        pass over the whole line would take them."""
        waiting = self._waiting
        at = dict.fromkeys(waiting, 0)
        last = None
        while True:
            best = None
            for shape, line in waiting.items():
                if shape in stuck:
                    continue
                i = at[shape]
                if last is not None and i < len(line) and line[i][0] <= last:
                    i = at[shape] = bisect_left(line, (last + 0.5,))   # passed while it was stuck
                if i < len(line) and (best is None or line[i][0] < best[0]):
                    best = (line[i][0], shape, i)
            if best is None:
                return
            last, shape, i = best
            at[shape] = i + 1
            yield waiting[shape][i][1]

    # --- decisions
    def decide(self, view: View) -> Decision:
        self.arrivals(view)
        self._sync(view)
        now = view.now
        allocs: dict = {}
        free = view.cluster.free_copy()
        busy = set()       # victims and jobs being reshaped by a plan
        for p in list(self.plans.values()):
            if p.job not in view.pending or (p.victim and p.victim not in view.running):
                del self.plans[p.job]        # the job or its victim went away: plan again
                continue
            if p.ready <= now + 1e-9:
                self._apply(p, view, free, allocs)
                del self.plans[p.job]
            else:
                free[p.host, 0] -= p.gpus - p.removed     # the idle GPUs it reserved
                if p.victim:
                    busy.add(p.victim)
        busy.update(allocs)   # reshaped by this decision already: its view is not yet up to date
        base = by_host = None     # predicted finishes and victims by host, once a job needs them
        # shapes (demand and options, or a first fit's demands and counts) that found no host and no
        # victim, and the idle GPUs per task demand, until a plan or a start changes the free GPUs
        stuck: set = set()
        idles: dict = {}
        for jid in self._in_line(stuck):
            if jid in self.plans or jid in allocs:
                continue
            jv = view.pending[jid]
            role, _, shape, _, _ = self.facts(jv)
            if role is None:
                n = len(allocs)
                self.fallback(jv, free, allocs)   # a first fit that fails leaves ``free`` as it was
                if len(allocs) != n:
                    stuck.clear()
                    idles.clear()
                else:
                    stuck.add(shape)
                continue
            if base is None:
                base, by_host = self._finishes(view), self._victims(view)
            idle = idles.get(role.demand)
            if idle is None:
                idle = idles[role.demand] = self.idle(free, jv, view).tolist()
            plan, feasible = self._incoming(jv, view, idle, busy, base, by_host)
            if not feasible:
                stuck.add(shape)
            if plan is not None:
                self.plans[jid] = plan
                base.add(jid, self._planned_finish(plan, view))
                free[plan.host, 0] -= plan.gpus - plan.removed
                stuck.clear()
                idles.clear()
                if plan.victim:
                    busy.add(plan.victim)
                    self.removes += 1
        for jid in allocs:
            self._leave(jid)
        if self.up and not self._line and not self.plans:
            self._reshape_up(view, free, allocs, busy)
        self._changed.update(allocs)   # started or reshaped: read back at the next decision
        wakes = [max(p.ready - now, 1e-6) for p in self.plans.values()]
        if not self._line and not self.plans:
            wakes.append(self.tick(view, free, allocs))
        wakes = [w for w in wakes if w is not None]
        return Decision(allocs, min(wakes) if wakes else None)

    def _apply(self, p: _Plan, view: View, free: np.ndarray, allocs: dict) -> None:
        jv = view.pending[p.job]
        role = jv.roles[0].name
        if p.victim:
            vjv = view.running[p.victim]
            n = task_counts(vjv.allocation)[vjv.roles[0].name]
            allocs[p.victim] = {vjv.roles[0].name: {p.host: n - p.removed}}
            free[p.host] += np.asarray(vjv.roles[0].demand) * p.removed
        alloc = {role: {p.host: p.gpus}}
        need = np.asarray(jv.roles[0].demand) * p.gpus
        if (free[p.host] + EPS >= need).all():
            free[p.host] -= need
            allocs[p.job] = alloc
        elif p.victim:                 # cannot happen while reservations hold; undo the shrink
            del allocs[p.victim]

    # --- Algorithm 1: incoming job
    def _incoming(self, jv: JobView, view: View, idle: list, busy: set, base: "_Finishes",
                  by_host: dict) -> tuple[_Plan | None, bool]:
        """The job's plan of lowest predicted makespan (``idle``: tasks of its demand that fit on
        each host, none on a host that is down), and whether any (host, option, victim) was
        possible at all: when none is, no job of the same demand and options has one either until
        a plan changes the free GPUs or the victims (the decision loop skips them)."""
        now = view.now
        best, plan, feasible = INF, None, False
        start = self.k_c   # early initialisation, then the process start (D_sc)
        up = view.cluster.up
        opts = self.opts(jv)
        left = self.remaining(jv)
        # every plan ends no sooner than the latest finish of the others (A1's makespan): with no
        # victim, all running jobs; with a victim, all but it, which is that latest finish unless
        # the victim holds it. Once a plan reaches it no later one is strictly better (A2), and
        # only a plan that shrinks the job holding it needs working out
        floor = base.max
        holder = base.top[0][1] if base.top else None
        # the hosts where an option fits on idle GPUs (none on a host that is down) or a job may give
        lo = opts[0]
        hosts = (h for h, x in enumerate(idle) if x >= lo)
        givers = self.down and by_host
        if givers:
            hosts = sorted(set(hosts).union(h for h in by_host if up[h]))
        for h in hosts:
            if not givers and best <= floor:
                break   # only plans on idle GPUs are left, none strictly better
            idle_h = idle[h]
            on_host = by_host.get(h, ()) if self.down else ()
            for n in opts:
                fits = idle_h >= n
                if fits:
                    feasible = True
                    if best <= floor:
                        continue
                    new = now + start + self.restart_s(n) + left * self.t_iter(jv, n, h, view)
                    ms = max(floor, new)
                    if ms < best:
                        best, plan = ms, _Plan(jv.job_id, now + start, h, n, None, 0)
                    continue
                if not on_host:
                    continue
                rem = n - int(idle_h)
                victims = [v for v in on_host if v[0].job_id not in busy and v[1] - rem >= 1 and v[1] - rem in v[2]]
                if not victims:
                    continue
                feasible = True
                if best <= floor:
                    victims = [v for v in victims if v[0].job_id == holder]
                    if not victims:
                        continue
                new = now + start + self.restart_s(n) + left * self.t_iter(jv, n, h, view)
                for vjv, cur, _ in victims:
                    # the victim trains on all its GPUs during the early initialisation, then restarts (E3)
                    done = start / self.t_iter(vjv, cur, h, view)
                    rest = max(self.remaining(vjv) - done, 0.0)
                    fin = (now + start + self.restart_s(cur - rem) + 2 * self.checkpoint_s(vjv)
                           + rest * self.t_iter(vjv, cur - rem, h, view))
                    ms = max(base.max_except(vjv.job_id), fin, new)
                    if ms < best:
                        best, plan = ms, _Plan(jv.job_id, now + start, h, n, vjv.job_id, rem)
        return plan, feasible

    # --- the running jobs, kept across decisions
    def _sync(self, view: View) -> None:
        """Bring the kept running jobs up to date: a job changes allocation only when this policy
        starts or reshapes it (read back at the next decision), and leaves by finishing or stopping."""
        for jv in view.finished:
            self._tit.pop(jv.job_id, None)
            self._drop(jv.job_id)
        for jv in view.stopped:
            self._drop(jv.job_id)
        running = view.running
        for jid in self._changed:
            jv = running.get(jid)
            if jv is None:
                self._drop(jid)
            elif self.role(jv) is not None:
                self._keep(jv, view)
        self._changed.clear()

    def _keep(self, jv: JobView, view: View) -> None:
        """(Re)enter a running job at its allocation: host, GPUs, profiled speed there, and the
        lists it belongs to."""
        jid = jv.job_id
        self._drop(jid)
        _, opts, _, declared, model = self.facts(jv)
        alloc = jv.allocation
        h, n = next(iter(nodes_of(alloc))), task_counts(alloc)[jv.roles[0].name]
        self._version += 1
        rec = self._run[jid] = _Running(jv, self._version, h, n, self.t_iter(jv, n, h, view), declared,
                                        None if declared is not None else model, opts)
        key = (jv.index, jid)
        if opts[0] < n:
            insort(self._givers.setdefault(h, []), key)
        if opts[-1] > n:
            insort(self._takers, key)
        if self.fitted(jv):   # E7's prediction moves either way as points arrive: no bound holds
            self._fitted_run[jid] = rec
            return
        group = _DECLARED if declared is not None else model
        latest = self._latest.get(group)
        if latest is None:
            latest = self._latest[group] = _Latest(None if declared is not None else self._expected(model))
        latest.push(rec, jv.iterations_done)
        latest.live += 1

    def _drop(self, jid: str) -> None:
        rec = self._run.pop(jid, None)
        if rec is None:
            return
        key = (rec.jv.index, jid)
        for keys in (self._givers.get(rec.host, ()), self._takers):
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                del keys[i]
        if self._fitted_run.pop(jid, None) is not None:
            return
        # its entry in ``_Latest`` is stale from now on (no longer the job's record)
        self._latest[_DECLARED if rec.declared is not None else rec.model].live -= 1

    def _expected(self, model) -> float:
        """The iterations an undeclared job of ``model`` is expected to run (``remaining``)."""
        s = self.sizes.get(model) or self.sizes.get(None)
        return s[0] / s[1] if s else self.prior

    def _victims(self, view: View) -> dict[int, list]:
        """Per host, the running jobs that may give GPUs (an option below their count, not
        reconfiguring), by index: (job, GPUs, its options). Jobs made busy by this decision are
        skipped at use."""
        out: dict[int, list] = {}
        run = self._run
        for h, keys in self._givers.items():
            vs = [(r.jv, r.gpus, r.opts) for r in (run[jid] for _, jid in keys) if not r.jv.reconfiguring]
            if vs:
                out[h] = vs
        return out

    def _finishes(self, view: View) -> "_Finishes":
        """The two latest predicted finishes (E4) of the running jobs at their allocations, and of
        planned jobs: what the makespan of a plan reads (A1)."""
        now = view.now
        out = _Finishes(now)
        for group, latest in self._latest.items():
            latest.top(self._run, now, None if group is _DECLARED else self._expected(group), out)
        for jid, rec in self._fitted_run.items():
            out.add(jid, now + self.remaining(rec.jv) * rec.t)
        for p in self.plans.values():
            out.add(p.job, self._planned_finish(p, view))
        return out

    def _planned_finish(self, p: _Plan, view: View) -> float:
        jv = view.pending[p.job]
        return p.ready + self.restart_s(p.gpus) + self.remaining(jv) * self.t_iter(jv, p.gpus, p.host, view)

    def t_iter(self, jv: JobView, n: int, host: int, view: View) -> float:
        """Profiled seconds per iteration (``_Base.t_iter``), kept while the job lives: a profile
        is fixed per job, GPU count and host (the host's GPU type)."""
        times = self._tit.get(jv.job_id)
        if times is None:
            times = self._tit[jv.job_id] = {}
        t = times.get((n, host))
        if t is None:
            t = times[(n, host)] = super().t_iter(jv, n, host, view)
        return t

    # --- Algorithm 2: running jobs take idle GPUs
    def _reshape_up(self, view: View, free: np.ndarray, allocs: dict, busy: set) -> None:
        now = view.now
        up = view.cluster.up
        if not up.any() or free[up, 0].max() + EPS < 1:
            return   # no idle GPU (as tasks_per_node counts): none to take (the model's tasks take one each)
        grown = set()
        # the candidates by index, with what the loop reads of them (fixed during it: it changes
        # only the free GPUs, and takes out each job it grows): (job, host, GPUs, the GPUs each
        # larger option adds, remaining iterations, the latest finish of the other jobs). A job at
        # its largest option can take nothing: it is no candidate (nor is its task demand's idle
        # count then looked at, which bounds only its own tries)
        cands = []
        run = self._run
        for _, jid in self._takers:
            r = run[jid]
            if jid in busy or jid in allocs or r.jv.reconfiguring:
                continue
            cands.append((r.jv, r.host, r.gpus, [o - r.gpus for o in r.opts if o > r.gpus]))
        if not cands:
            return
        base = self._finishes(view)    # the running jobs' predictions: this loop changes none of them
        cands = [(jv, h, cur, adds, self.remaining(jv), base.max_except(jv.job_id)) for jv, h, cur, adds in cands]
        while True:
            cands = [c for c in cands if c[0].job_id not in grown]
            if not cands:
                return
            rooms: dict = {}   # per task demand: (idle per host, the two roomiest hosts)
            rows = [self._room(free, c[0], view, rooms) for c in cands]
            total = int(max(idle.sum() for idle, _ in rooms.values()))
            # Algorithm 2's search, GPUs added first, then the jobs by index (the first evaluated
            # wins ties), over only the (added GPUs, job) pairs an option of the job allows
            tries = sorted((add, i) for i, c in enumerate(cands) for add in c[3] if add <= total)
            best, pick = INF, None
            for add, i in tries:
                jv, h, cur, _, rem, others_max = cands[i]
                idle, top = rows[i]
                if idle[h] >= add:
                    target, cost = h, self.restart_s(cur + add)
                elif self.cross_host:
                    # the roomiest other host (ties: the lowest index), if it has cur + add idle
                    target = top[0] if top[0] != h else (top[1] if len(top) > 1 else None)
                    if target is None or idle[target] < cur + add:
                        continue
                    cost = self.pod_restart_s(cur + add)
                else:
                    continue
                # a running job's restart writes its checkpoint and reads it back (D_sc, notes §3.6)
                fin = now + cost + 2 * self.checkpoint_s(jv) + rem * self.t_iter(jv, cur + add, target, view)
                ms = max(others_max, fin)
                if ms < best:
                    best, pick = ms, (jv, target, cur + add)
            if pick is None:
                return
            jv, target, n = pick
            role = jv.roles[0]
            r = self._run[jv.job_id]
            h, cur = r.host, r.gpus
            free[h] += np.asarray(role.demand) * cur
            free[target] -= np.asarray(role.demand) * n
            allocs[jv.job_id] = {role.name: {target: n}}
            grown.add(jv.job_id)
            self.adds += 1

    def _room(self, free: np.ndarray, jv: JobView, view: View, rooms: dict) -> tuple:
        key = tuple(jv.roles[0].demand)
        hit = rooms.get(key)
        if hit is None:
            idle = self.idle(free, jv, view)
            top = [int(x) for x in np.argsort(-idle, kind="stable")[:2]]
            hit = rooms[key] = (idle, top)
        return hit


class _Running:
    """A running job in the model, at its allocation (kept from one change to the next)."""

    __slots__ = ("jv", "version", "host", "gpus", "t", "declared", "model", "opts")

    def __init__(self, jv, version, host, gpus, t, declared, model, opts):
        self.jv, self.version, self.host, self.gpus, self.t = jv, version, host, gpus, t
        self.declared, self.model, self.opts = declared, model, opts


_DECLARED = object()   # the ``_Latest`` group of the jobs that declare their iterations


class _Latest:
    """The predicted finishes of the running jobs that expect the same iterations (those that
    declare theirs, or the undeclared jobs of one model), in a heap by a bound on each job's
    remaining seconds, so that the two latest are found by looking at the few jobs whose bound
    reaches them. A job's remaining seconds, max(total - done, 0) x its s/iteration, only fall
    while its allocation holds (its progress only grows: a job that loses progress stops first),
    so the value at any earlier decision bounds it, exactly in floating point (rounding is
    monotone). Undeclared jobs expect the mean of the finished jobs, which moves at each finish:
    keys assume ``ceiling`` iterations, and while the mean is above it each bound grows by
    (mean - ceiling) x the group's largest s/iteration; once that slack makes a decision look at
    more than ``REBUILD`` jobs, the keys are worked out again at the mean."""

    REBUILD = 16

    def __init__(self, ceiling: float | None):
        self.ceiling = ceiling      # the iterations undeclared jobs' keys assume; None: each job's declared
        self.t_max = 0.0            # the largest s/iteration pushed since the keys were last worked out
        self.heap: list = []        # (-bound on remaining s, index, version, job): one live entry per job
        self.live = 0

    def push(self, rec: _Running, done: float) -> None:
        total = rec.declared if self.ceiling is None else self.ceiling
        self.t_max = max(self.t_max, rec.t)
        heappush(self.heap, (-(max(total - done, 0.0) * rec.t), rec.jv.index, rec.version, rec))

    def top(self, run: dict, now: float, expected: float | None, out: "_Finishes") -> None:
        """Add to ``out`` the exact predicted finish of every job whose bound reaches the two
        latest so far: ``out`` then holds the two latest of all (``expected``: the undeclared
        jobs' iterations now)."""
        heap = self.heap
        extra = 0.0
        if expected is not None and expected > self.ceiling:
            # a margin far above rounding (1e-9 relative, 1 us): more jobs looked at, never fewer
            extra = (expected - self.ceiling) * self.t_max * (1.0 + 1e-9) + 1e-6
        seen = []
        while heap:
            neg, _, _, rec = heap[0]
            jid = rec.jv.job_id
            if run.get(jid) is not rec:
                heappop(heap)     # the job ended or changed allocation
                continue
            if len(out.top) == 2 and now + (extra - neg) < out.top[1][0]:
                break
            heappop(heap)
            done = rec.jv.iterations_done
            total = rec.declared if expected is None else expected
            out.add(jid, now + max(total - done, 0.0) * rec.t)
            seen.append((rec, done))
        if (expected is not None and expected != self.ceiling and len(seen) > self.REBUILD) \
                or len(heap) > 2 * self.live + 64:
            self._rebuild(run, expected, seen)
        else:
            for rec, done in seen:
                self.push(rec, done)

    def _rebuild(self, run: dict, expected: float | None, seen: list) -> None:
        """Work every live job's key out again now (at ``expected`` iterations), dropping stale entries."""
        recs = [e[3] for e in self.heap if run.get(e[3].jv.job_id) is e[3]] + [rec for rec, _ in seen]
        if expected is not None:
            self.ceiling = expected
        self.heap, self.t_max = [], 0.0
        for rec in recs:
            total = rec.declared if self.ceiling is None else self.ceiling
            self.t_max = max(self.t_max, rec.t)
            self.heap.append((-(max(total - rec.jv.iterations_done, 0.0) * rec.t), rec.jv.index, rec.version, rec))
        heapify(self.heap)


class _Finishes:
    """Predicted finishes by job (E4), with the two latest kept: the makespan of all jobs, or of
    all jobs but one, is then read at once rather than by a pass over every running job."""

    def __init__(self, now: float):
        self.now = now
        self.top: list[tuple[float, str]] = []   # (finish, job), latest first, at most two

    def add(self, jid: str, t: float) -> None:
        top = self.top
        if not top or t > top[0][0]:
            top.insert(0, (t, jid))
        elif len(top) < 2 or t > top[1][0]:
            top.insert(1, (t, jid))
        del top[2:]

    @property
    def max(self) -> float:
        """The latest finish of all (now when there is none)."""
        return self.top[0][0] if self.top else self.now

    def max_except(self, jid: str) -> float:
        """The latest finish of all jobs but ``jid`` (now when there is none)."""
        for t, j in self.top:
            if j != jid:
                return t
        return self.now


@register
class SideCarTermination(_Base):
    """The termination-based baseline (Optimus's scheduling with job restarts, §V-B(2))."""

    name = "sidecar_termination"
    tags = frozenset({"elastic"})

    def __init__(self, gpu_options: GpuOptions = (1, 2, 4, 8), undeclared_iterations: Positive = 10010.0,
                 accuracy_fit: bool = True, fit_min_points: FitPoints = 3, fit_patience: Patience = 5,
                 fit_relative: bool = False, count_restart: bool = False, cross_host: bool = True,
                 gpu_steps: bool = False,
                 pod_kill_s: NonNegative = PodRestart.pod_kill_s,
                 pod_start_base_s: NonNegative = PodRestart.pod_start_base_s,
                 pod_start_per_gpu_s: NonNegative = PodRestart.pod_start_per_gpu_s,
                 checkpoint_gb_per_s: Annotated[float, Range(gt=0)] | None = None, tick_s: Positive | None = 60.0):
        super().__init__(gpu_options, undeclared_iterations, accuracy_fit, fit_min_points, fit_patience, fit_relative)
        self._charge = PodRestart(checkpoint_gb_per_s=checkpoint_gb_per_s)
        self.tick_s = tick_s
        self.count_restart = count_restart
        self.cross_host, self.gpu_steps = cross_host, gpu_steps
        self.pod = (pod_kill_s, pod_start_base_s, pod_start_per_gpu_s)

    def reset(self, view: View) -> None:
        super().reset(view)
        self.adds = 0

    def decide(self, view: View) -> Decision:
        # "first allocates one GPU (the minimal number of required GPUs)"
        allocs, free = self.start_waiting(view, lambda jv: self.opts(jv)[0])
        if not self.queue:
            self._add_one_by_one(view, free, allocs)
            return Decision(allocs, self.tick(view, free, allocs))
        return Decision(allocs)

    def _add_one_by_one(self, view: View, free: np.ndarray, allocs: dict) -> None:
        """Each step: the job whose next option saves the most predicted time per added GPU
        (Optimus's marginal gain), if positive, after its last restart. Every step terminates the
        job and starts it again as a new pod (§I, §III-A: "GPU allocation is conducted at the job
        level, and thus requires restarting the entire job, including its associated containers"),
        which Kubernetes places on any host with room for it: with ``cross_host``, the job's own
        host if the added GPUs are idle there, else another up host with the whole next option
        idle (the gain read at that host's speed; the best gain wins, the own host and then the
        lowest index on ties); without, only its own host."""
        up = view.cluster.up
        while True:
            best, pick = 0.0, None
            for jid, jv in sorted(view.running.items(), key=lambda kv: kv[1].index):
                if jid in allocs or jv.reconfiguring or self.role(jv) is None:
                    continue
                h = self.host(jv)
                cur = task_counts(jv.allocation)[jv.roles[0].name]
                opts = self.opts(jv)
                bigger = [o for o in opts if o > cur]
                if not bigger:
                    continue
                nxt = cur + 1 if self.gpu_steps else bigger[0]
                idle = self.idle(free, jv, view)
                targets = [h] if idle[h] >= nxt - cur else []
                if self.cross_host:
                    targets += [x for x in self.hosts if x != h and up[x] and idle[x] >= nxt]
                if not targets:
                    continue
                rem = self.remaining(jv)
                now_s = rem * self.t_iter(jv, cur, h, view)
                for target in targets:
                    saved = now_s - rem * self.t_iter(jv, nxt, target, view)
                    if self.count_restart:
                        saved -= self.pod[0] + self.pod[1] + self.pod[2] * nxt + 2 * self.checkpoint_s(jv)
                    gain = saved / (nxt - cur)
                    if gain > best:
                        best, pick = gain, (jv, h, target, nxt, cur)
            if pick is None:
                return
            jv, h, target, nxt, cur = pick
            demand = np.asarray(jv.roles[0].demand)
            free[h] += demand * cur
            free[target] -= demand * nxt
            allocs[jv.job_id] = {jv.roles[0].name: {target: nxt}}
            self.adds += 1


@register
class K8sDefault(_Base):
    """Kubernetes' default scheduler as SideCar's baseline: static requested counts (§V-B(1))."""

    name = "k8s_default"

    def __init__(self, gpu_options: GpuOptions = (1, 2, 4, 8)):
        super().__init__(gpu_options)

    def decide(self, view: View) -> Decision:
        return Decision(self.start_waiting(view, lambda jv: jv.roles[0].count)[0])   # static request


