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
  predicted remaining time per GPU (Optimus), each step a pod restart (``overhead=pod_restart``).
- ``k8s_default`` (§V-B(1), notes A18): each job runs at its requested count (drawn from the
  options by the workload), static; any waiting job that fits on one host starts, out of order,
  on the host with the most idle GPUs.

W1–W3 jobs declare their epochs (§V-A, §III-C), so the remaining iterations are the declared
iterations (``JobView.declared_iterations``, engine config ``observe.declared_iterations``) less
those done. A job that declares none (W4 runs to a target accuracy) is predicted to run as many
iterations as the finished jobs of its model did, on average (the per-type training-accuracy profile
§III-B-1 offers; the paper's curve fit, §III-C-1, is not modelled), ``undeclared_iterations``
before any has finished. Jobs the model does not cover (several roles, CPU only,
larger than a host) run at their request, first fit, FIFO. docs/policies/sidecar.md.
"""

from __future__ import annotations

from typing import Annotated

from dataclasses import dataclass

import numpy as np

from clustersim.policies.base import Decision, JobView, Policy, View, arrival, register
from clustersim.policies.placement import first_fit
from clustersim.simulator.cluster import EPS, tasks_per_node
from clustersim.simulator.job import nodes_of, task_counts
from clustersim.simulator.overhead import PodRestart, SidecarRestart   # the §II-C costs, cited there
from clustersim.simulator.params import Length, NonNegative, Positive, Range

# GPUs a job may be given: 1 to 4,096 each, 1 to 64 options (choice: bounds on a list the
# policy searches at every decision; SideCar's are 1, 2, 4, 8, §IV)
GpuOptions = Annotated[list[Annotated[int, Range(ge=1, le=4096)]], Length(1, 64)]

INF = float("inf")


class _Base(Policy):
    """Shared: options, hosts, fallback for jobs outside the single-host model, predictions."""

    tick_s: float | None = None

    def __init__(self, gpu_options: GpuOptions = (1, 2, 4, 8), undeclared_iterations: Positive = 10010.0):
        self.options = sorted({int(o) for o in gpu_options})
        self.prior = float(undeclared_iterations)

    def reset(self, view: View) -> None:
        self.queue: list[str] = []          # waiting jobs, FIFO by arrival
        self.sizes: dict[str | None, list] = {}   # model -> [iterations finished jobs ran, count]
        self.hosts = range(view.cluster.num_nodes)
        self.gpus_per_host = view.cluster.capacity[:, 0]
        self._opts: dict[tuple, list] = {}    # a role's bounds -> its options (opts)
        self.max_host = self.gpus_per_host.max(initial=0)   # GPUs of the largest host
        self._where: dict[str, tuple] = {}    # job -> (its allocation, host, GPUs, s/iteration there): ``place``
        self._facts: dict[str, tuple] = {}    # job -> (role or None, options, shape, declared, model): ``facts``

    # --- the jobs the model covers
    def facts(self, jv: JobView) -> tuple:
        """(``role``, ``opts``, shape: task demand and options, declared iterations, model) of a
        job, worked out once while it lives (fixed at submission, read at every decision)."""
        hit = self._facts.get(jv.job_id)
        if hit is None:
            roles = jv.roles
            role = roles[0] if len(roles) == 1 and roles[0].gpu == 1 and roles[0].count <= self.max_host else None
            if role is None:   # outside the model: no options (``fallback`` runs it)
                hit = self._facts[jv.job_id] = (None, None, None, None, None)
            else:
                opts = self._options(role)
                hit = self._facts[jv.job_id] = (role, opts, (tuple(role.demand), tuple(opts)),
                                                jv.declared_iterations, jv.model)
        return hit

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

    def place(self, jv: JobView, view: View) -> tuple:
        """A running job's (allocation, host, GPUs, profiled seconds per iteration there), worked
        out once per allocation: the engine gives a job a new allocation object at every change,
        so the same object means the same place."""
        alloc = jv.allocation
        hit = self._where.get(jv.job_id)
        if hit is None or hit[0] is not alloc:
            h, n = next(iter(nodes_of(alloc))), task_counts(alloc)[jv.roles[0].name]
            hit = self._where[jv.job_id] = (alloc, h, n, self.t_iter(jv, n, h, view))
        return hit

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

    def remaining(self, jv: JobView) -> float:
        """Declared iterations less those done (E1); without a declaration, the mean size of the
        model's finished jobs (else of all finished jobs, else ``undeclared_iterations``)."""
        total = jv.declared_iterations
        if total is None:
            s = self.sizes.get(jv.model) or self.sizes.get(None)
            total = s[0] / s[1] if s else self.prior
        return max(total - jv.iterations_done, 0.0)

    # --- FIFO bookkeeping and the fallback
    def arrivals(self, view: View) -> None:
        gone = {j.job_id for j in view.finished}
        for jid in gone:
            self._where.pop(jid, None)
            self._facts.pop(jid, None)
        for jv in view.finished:   # what a finished job ran: the size of its kind of job
            for key in (jv.model, None):
                s = self.sizes.setdefault(key, [0.0, 0])
                s[0] += jv.iterations_done
                s[1] += 1
        for jv in sorted(view.arrived, key=arrival):
            self.queue.append(jv.job_id)
        for jv in view.stopped:   # a failure stopped it: it waits again, first
            if jv.job_id in view.pending and jv.job_id not in self.queue:
                self.queue.insert(0, jv.job_id)
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
                 container_init_s: NonNegative = 83.0,
                 process_restart_base_s: NonNegative = SidecarRestart.sidecar_base_s,
                 process_restart_per_gpu_s: NonNegative = SidecarRestart.sidecar_per_gpu_s,
                 pod_kill_s: NonNegative = PodRestart.pod_kill_s,
                 pod_start_base_s: NonNegative = PodRestart.pod_start_base_s,
                 pod_start_per_gpu_s: NonNegative = PodRestart.pod_start_per_gpu_s,
                 cross_host: bool = True, reshape_up: bool = True, reshape_down: bool = True,
                 tick_s: Positive | None = 60.0):
        super().__init__(gpu_options, undeclared_iterations)
        self.tick_s = tick_s
        self.k_c = container_init_s
        self.d_sc = (process_restart_base_s, process_restart_per_gpu_s)
        self.pod = (pod_kill_s, pod_start_base_s, pod_start_per_gpu_s)
        self.cross_host, self.up, self.down = cross_host, reshape_up, reshape_down

    def reset(self, view: View) -> None:
        super().reset(view)
        self.plans: dict[str, _Plan] = {}
        self._order: list | None = None    # the running jobs in the model, by index, until that set changes
        self._tit: dict = {}                # job -> {(GPUs, host): profiled iteration time}
        self.adds = self.removes = 0        # Fig. 11's adding and removing events

    # --- costs the scheduler predicts with (§II-C fit, notes §3.6)
    def restart_s(self, n: int) -> float:
        """SideCar's in-container restart of the training process onto n GPUs: D_sc(n)."""
        return self.d_sc[0] + self.d_sc[1] * n

    def pod_restart_s(self, n: int) -> float:
        return self.pod[0] + self.pod[1] + self.pod[2] * n

    # --- decisions
    def decide(self, view: View) -> Decision:
        self.arrivals(view)
        if view.finished or view.stopped:
            self._order = None
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
        for jv in view.finished:
            self._tit.pop(jv.job_id, None)
        base = by_host = None     # predicted finishes and victims by host, once a job needs them
        stuck: set = set()        # (demand, options) that found no host and no victim, until the state changes
        facts = self._facts
        for jid in list(self.queue):
            if jid in self.plans or jid in allocs:
                continue
            known = facts.get(jid)   # most waiting jobs are skipped: read their shape at once
            if known is not None and known[2] in stuck:
                continue
            jv = view.pending[jid]
            role, _, shape, _, _ = known or self.facts(jv)
            if role is None:
                n = len(allocs)
                self.fallback(jv, free, allocs)
                if len(allocs) != n:
                    stuck.clear()
                continue
            if shape in stuck:
                continue
            if base is None:
                base, by_host = self._finishes(view), self._victims(view)
            plan, feasible = self._incoming(jv, view, free, busy, base, by_host)
            if not feasible:
                stuck.add(shape)
            if plan is not None:
                self.plans[jid] = plan
                base.add(jid, self._planned_finish(plan, view))
                free[plan.host, 0] -= plan.gpus - plan.removed
                stuck.clear()
                if plan.victim:
                    busy.add(plan.victim)
                    self.removes += 1
        self.queue = [j for j in self.queue if j not in allocs]
        if self.up and not self.queue and not self.plans:
            self._reshape_up(view, free, allocs, busy)
        if any(jid in view.pending for jid in allocs):   # it starts: the running jobs change
            self._order = None
        wakes = [max(p.ready - now, 1e-6) for p in self.plans.values()]
        if not self.queue and not self.plans:
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
    def _incoming(self, jv: JobView, view: View, free: np.ndarray, busy: set, base: "_Finishes",
                  by_host: dict) -> tuple[_Plan | None, bool]:
        """The job's plan of lowest predicted makespan, and whether any (host, option, victim) was
        possible at all: when none is, no job of the same demand and options has one either until
        a plan changes the free GPUs or the victims (the decision loop skips them)."""
        now = view.now
        best, plan, feasible = INF, None, False
        idle = self.idle(free, jv, view)
        start = self.k_c   # early initialisation, then the process start (D_sc)
        up = view.cluster.up
        for h in self.hosts:
            if not up[h]:
                continue
            for n in self.opts(jv):
                fits = idle[h] >= n
                if not fits and not self.down:
                    continue
                rem = n - int(idle[h])
                victims = () if fits else [v for v in by_host.get(h, ()) if v[0].job_id not in busy
                                           and v[1] - rem >= 1 and v[1] - rem in v[2]]
                if not fits and not victims:
                    continue
                feasible = True
                new = now + start + self.restart_s(n) + self.remaining(jv) * self.t_iter(jv, n, h, view)
                if fits:
                    ms = max(base.max, new)
                    if ms < best:
                        best, plan = ms, _Plan(jv.job_id, now + start, h, n, None, 0)
                    continue
                for vjv, cur, _ in victims:
                    # the victim trains on all its GPUs during the early initialisation, then restarts (E3)
                    done = start / self.t_iter(vjv, cur, h, view)
                    left = max(self.remaining(vjv) - done, 0.0)
                    fin = now + start + self.restart_s(cur - rem) + left * self.t_iter(vjv, cur - rem, h, view)
                    ms = max(base.max_except(vjv.job_id), fin, new)
                    if ms < best:
                        best, plan = ms, _Plan(jv.job_id, now + start, h, n, vjv.job_id, rem)
        return plan, feasible

    def _victims(self, view: View) -> dict[int, list]:
        """Per host, the running jobs that may give GPUs (not reconfiguring, in the model), by
        index: (job, GPUs, its options). Jobs made busy by this decision are skipped at use."""
        out: dict[int, list] = {}
        for vjv in self._by_index(view):
            if vjv.reconfiguring:
                continue
            h, n = self.place(vjv, view)[1:3]
            out.setdefault(h, []).append((vjv, n, self.opts(vjv)))
        return out

    def _by_index(self, view: View) -> list:
        """The running jobs the model covers, by index; kept until one starts, finishes or stops."""
        if self._order is None:
            self._order = [jv for jv in sorted(view.running.values(), key=lambda j: j.index)
                           if self.role(jv) is not None]
        return self._order

    def _finishes(self, view: View) -> "_Finishes":
        """Predicted finish of every running job at its allocation (E4), and of planned jobs."""
        now = view.now
        out = _Finishes(now)
        facts, where = self._facts, self._where
        totals: dict = {}   # the expected iterations of undeclared jobs, per model (``remaining``)
        for jv in self._by_index(view):   # every running job in the model: kept to what changes (progress)
            jid = jv.job_id
            w = where.get(jid)
            if w is None or w[0] is not jv.allocation:
                w = self.place(jv, view)
            f = facts[jid]
            total = f[3]
            if total is None:
                total = totals.get(f[4])
                if total is None:
                    s = self.sizes.get(f[4]) or self.sizes.get(None)
                    total = totals[f[4]] = s[0] / s[1] if s else self.prior
            out.add(jid, now + max(total - jv.iterations_done, 0.0) * w[3])
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
        for jv in self._by_index(view):
            if jv.job_id in busy or jv.job_id in allocs or jv.reconfiguring:
                continue
            h, cur = self.place(jv, view)[1:3]
            adds = [o - cur for o in self.opts(jv) if o > cur]
            if adds:
                cands.append((jv, h, cur, adds))
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
                fin = now + cost + rem * self.t_iter(jv, cur + add, target, view)
                ms = max(others_max, fin)
                if ms < best:
                    best, pick = ms, (jv, target, cur + add)
            if pick is None:
                return
            jv, target, n = pick
            role = jv.roles[0]
            h, cur = self.place(jv, view)[1:3]
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
                 count_restart: bool = False,
                 pod_kill_s: NonNegative = PodRestart.pod_kill_s,
                 pod_start_base_s: NonNegative = PodRestart.pod_start_base_s,
                 pod_start_per_gpu_s: NonNegative = PodRestart.pod_start_per_gpu_s, tick_s: Positive | None = 60.0):
        super().__init__(gpu_options, undeclared_iterations)
        self.tick_s = tick_s
        self.count_restart = count_restart
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
        (Optimus's marginal gain), if positive, on its own host, after its last restart."""
        while True:
            best, pick = 0.0, None
            for jid, jv in sorted(view.running.items(), key=lambda kv: kv[1].index):
                if jid in allocs or jv.reconfiguring or self.role(jv) is None:
                    continue
                h = self.host(jv)
                cur = task_counts(jv.allocation)[jv.roles[0].name]
                bigger = [o for o in self.opts(jv) if o > cur]
                if not bigger or self.idle(free, jv, view)[h] < bigger[0] - cur:
                    continue
                nxt = bigger[0]
                rem = self.remaining(jv)
                saved = rem * (self.t_iter(jv, cur, h, view) - self.t_iter(jv, nxt, h, view))
                if self.count_restart:
                    saved -= self.pod[0] + self.pod[1] + self.pod[2] * nxt
                gain = saved / (nxt - cur)
                if gain > best:
                    best, pick = gain, (jv, h, nxt, cur)
            if pick is None:
                return
            jv, h, nxt, cur = pick
            free[h] -= np.asarray(jv.roles[0].demand) * (nxt - cur)
            allocs[jv.job_id] = {jv.roles[0].name: {h: nxt}}
            self.adds += 1


@register
class K8sDefault(_Base):
    """Kubernetes' default scheduler as SideCar's baseline: static requested counts (§V-B(1))."""

    name = "k8s_default"

    def __init__(self, gpu_options: GpuOptions = (1, 2, 4, 8)):
        super().__init__(gpu_options)

    def decide(self, view: View) -> Decision:
        return Decision(self.start_waiting(view, lambda jv: jv.roles[0].count)[0])   # static request


