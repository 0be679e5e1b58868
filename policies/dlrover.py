"""DLRover-RM's three stages for PS/worker recommendation-model training (seeds 000 [D] and 002 [RM]).

1. Warm start ([RM] §4.3, Algorithm 1): a new job starts at the exponential smoothing of the
   configurations of its k most similar finished jobs in the job history (an SQLite file,
   ``dlrover_history.py``); without history, at [D] §4.2's sampling configuration (one worker
   and ``cold_ps`` PS of a whole pod each, the job's requested memory). The user's own
   configuration is not used ([D] §6: jobs run "without user resource input").
2. Auto-scaling ([RM] §4.3, Eqs. 7-14; ``dlrover_search.py``): every ``interval`` s, each job that
   has trained at its configuration (at least ``opt_start_s`` s and ``opt_start_steps`` steps, [D]
   §4.3) and whose last change is ``min_interval`` s old ([D] §6.1) gets its throughput model
   refitted (NNLS) and candidate plans from NSGA-II (a worker no fewer cores than the ⌈ŵ⌉ it is
   seen to use, [D] §4.2); plans are taken greedily across jobs by
   RE·WG (ρ = 2.5) within the free capacity. Every grant respects the per-pod (32 cores, [D]
   §6.1) and per-job CPU caps (200 cores, [D] §6.1). A cold start's first plan is [D] §4.1's
   closed form from the sampled ŵ and ŝ (Eqs. 10-11), as the draft's Optimize follows its Sampling.
   A planned change is verified: the first healthy rate measured after it, below the rate before
   it (``rollback_tolerance``), rolls it back for good; no plan is believed to get more than
   ``max_speedup`` x the steps/s per used core the job measures now (a sanity bound on the fit);
   after ``max_rollbacks`` rolled-back plans Stage 2 leaves the job where it went back to.
3. Instability handling ([RM] §4.3, §5; [D] §4.2, §5.4), at every round:
   - OOM prevention: the memory a task is predicted to need by the end of the job (a line through
     its reported need against steps: a worker's at the current task counts only, the PSes' total
     across PS counts, [RM] §5.3) above its grant → the prediction plus ``mem_margin`` (20 %,
     DLRover's code); a Stage-2 plan grants that prediction too. After an OOM: a worker's memory
     doubles; a PS OOM doubles the PS count ([D] §4.2) or, with ``ps_oom: double_memory``, their memory.
   - Slow tasks, as per-task reports show them (``JobView.slowest_task``: progress offsets and
     per-PS load, [RM] §5.1, [D] §5.4): a worker below ``slow_ratio`` of its peers' speed gets
     smaller shards (``shard_batches``: 256 → 128 → 64 batches, one step per heartbeat) without a
     restart (``straggler: replace``: its pod relaunched on another node, [RM] Fig. 13's
     traditional handling); a slow PS gets the hot-PS remedy (cores / relative speed, at most a pod, else one
     PS more; [D] §4.2 Adjust 2), then, if the same node's PS stays slow, moves to another machine
     ([D] §5.4), by seamless migration.
   - Idle PS ([D] §4.2 Adjust 1): PS cores left idle by the workers bring more workers, beyond the
     job's CPU quota as preemptible overflow workers, taken back when a pending job does not fit.
   - Recovery: a job stopped by a failure or a node going down restarts at once, before any
     other job, at its last configuration (its pods relaunched elsewhere; the overhead model
     charges the checkpoint restore: flash checkpoint under ``overhead=dlrover_flash``).
Jobs that are not PS/worker jobs start at their request when they fit and are left alone.
docs/policies/dlrover.md lists every parameter, its source and the choices made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

import numpy as np

from clustersim.policies.base import Decision, JobView, Policy, View, register
from clustersim.policies.dlrover_history import Config, History, Record, default_path, smooth
from clustersim.policies.dlrover_search import Candidate, Costs, JobState, candidate, candidates, fit, greedy, score
from clustersim.policies.placement import PlacementAnyCluster, merge, shrink, strategy
from clustersim.simulator.cluster import EPS
from clustersim.simulator.job import StopReason, Tasks, task_counts, task_demand
from clustersim.simulator.params import Count, Fraction, Length, NonNegative, Positive, Range

SHARD_BATCHES = (256, 128, 64)   # [RM] §5.1: shard sizes of dynamic data sharding
DRAFT_PS_CPU = 16.0              # [D] §4.1: "s = 16 is a reasonable value" for a PS
HEARTBEAT_S = 60.0               # [RM] §6.2: a straggler is handled "within 1 minute"
RESTART = (StopReason.FAILED, StopReason.NODE_DOWN)


def is_ps_job(job: JobView) -> bool:
    names = {r.name for r in job.roles}
    return names == {"ps", "worker"}


@dataclass
class Track:
    """What the policy remembers of one PS job."""

    config: Config | None = None        # last configuration granted
    last_change: float = -math.inf      # when it was granted
    worker_cap: float = math.inf        # ŵ: CPU a worker was seen to use below its grant ([D] §4.1)
    mem_seen: dict = field(default_factory=dict)   # worker -> [(steps, GB per task)] at ``mem_counts``;
    # ps -> [(steps, GB of all PSes)]: the model's parameters, whatever the PS count ([RM] §5.3)
    mem_counts: tuple = ()              # the task counts (workers, PS) the workers' series was seen at
    usage: dict = field(default_factory=dict)      # role -> (cores, GB) per task, last report
    shard: int = 0                      # index into ``shard_batches`` (dynamic data sharding)
    shard_at: float = -math.inf         # when the shard size last shrank (one step per heartbeat)
    slow: list = field(default_factory=list)       # [start, end, role, relative speed] of intervals with a slow task
    oom_roles: tuple = ()               # roles whose grant is doubled at the next start
    start: Config | None = None         # the warm or cold start, worked out once
    front: tuple = ()                   # the last round's candidate configurations (NSGA-II seeds)
    verify: tuple | None = None         # (configuration before the last plan, its measured rate): unverified
    bad: set = field(default_factory=set)          # planned configurations that ran slower (rolled back)
    rollbacks: int = 0                  # plans rolled back; at ``max_rollbacks`` Stage 2 leaves the job where it is
    hot_fixes: int = 0                  # hot-PS remedies taken ([D] §4.2 Adjust 2; then a PS more)
    fix_speed: float = 0.0              # the slow PS's reported speed when the last remedy was taken
    moved_off: set = field(default_factory=set)    # nodes a slow PS ([D] §5.4) or, replaced, a straggler was moved off
    idle_ps_at: tuple = ()              # the PS set (count, cores) the idle-PS rule last acted on
    overflow: int = 0                   # workers beyond the job's CPU quota: preemptible ([D] §4.2)
    planned: bool = False               # Stage 2 has planned it (the draft's Adjust follows its Optimize)
    cold: bool = False                  # started cold: its start is [D] §4.2's sampling configuration


@register
class DLRover(Policy):
    name = "dlrover"
    tags = frozenset({"elastic", "multi-resource", "ps"})
    dynamic_sharding = True   # a straggler's shards shrink: it never holds the job's tail ([RM] §5.1)

    # sizes are bounded so that a config cannot ask for a search that never ends (choice: k up to
    # 1,000 neighbours, up to 1,024 cold-start PS, NSGA-II populations and generations up to 10,000
    # each, 100x and 5,000x the defaults of [RM] §6)
    def __init__(self, history: str | None = None, history_run: str = "default", k: Annotated[int, Range(ge=1, le=1000)] = 5,
                 mu: Annotated[float, Range(gt=0, lt=1)] = 0.5, min_similarity: Fraction = 0.5,
                 cold_ps: Annotated[int, Range(ge=1, le=1024)] = 1, start: Literal["history", "request"] = "history",
                 interval: Positive = 180.0, min_interval: NonNegative = 60.0,
                 opt_start_s: NonNegative = 60.0, opt_start_steps: NonNegative = 100.0,
                 rho: float = 2.5, pop_size: Annotated[int, Range(ge=1, le=10_000)] = 40,
                 generations: Annotated[int, Range(ge=1, le=10_000)] = 2, seed: Count = 0,
                 job_cpu_cap: Positive = 200.0, pod_cpu: Positive = 32.0, job_steps: Positive = 200_000.0,
                 worker_launch_s: NonNegative = 120.0, prepare_s: NonNegative = 300.0, pause_s: NonNegative = 180.0,
                 price_cpu: Positive = 1.0, price_mem: NonNegative = 0.125, mem_margin: Fraction = 0.2,
                 slow_ratio: Fraction = 0.8,
                 ps_oom: Literal["double_count", "double_memory"] = "double_count",
                 max_speedup: Annotated[float, Range(ge=1)] = 2.0, rollback_tolerance: Fraction = 0.05,
                 max_rollbacks: Annotated[int, Range(ge=1, le=1_000_000)] = 1,
                 shard_batches: Annotated[list[Annotated[int, Range(ge=1)]], Length(1, 16)] = SHARD_BATCHES,
                 straggler: Literal["shards", "replace"] = "shards",
                 idle_ps: bool = True, idle_ps_max_workers: Annotated[int, Range(ge=1, le=100_000)] | None = None,
                 overflow: bool = True, master_launch_s: NonNegative = 20.0,
                 placement: PlacementAnyCluster = "spread"):
        self.history_path = None if history is None else (default_path() if history == "cache" else history)
        self.history_run = history_run
        self.k, self.mu, self.min_similarity, self.cold_ps = k, mu, min_similarity, cold_ps
        self.start = start
        self.interval, self.min_interval = float(interval), float(min_interval)
        self.opt_start_s, self.opt_start_steps = float(opt_start_s), float(opt_start_steps)
        self.rho, self.pop_size, self.generations, self.seed = float(rho), pop_size, generations, seed
        self.job_cpu_cap, self.pod_cpu, self.job_steps = float(job_cpu_cap), float(pod_cpu), float(job_steps)
        self.costs = Costs(worker_launch_s, prepare_s, pause_s, price_cpu, price_mem)
        self.mem_margin, self.slow_ratio, self.ps_oom = mem_margin, slow_ratio, ps_oom
        self.max_speedup, self.rollback_tolerance = float(max_speedup), float(rollback_tolerance)
        self.max_rollbacks = max_rollbacks
        self.shard_sizes = tuple(int(b) for b in shard_batches)
        self.straggler = straggler
        self.idle_ps, self.overflow = idle_ps, overflow
        self.idle_ps_max_workers = math.inf if idle_ps_max_workers is None else int(idle_ps_max_workers)
        # a new job's master pod is launched before its PS and workers ([D] §3, Fig. 5), a pod launch
        # taking about 20 s ([D] §6.3): the job's tasks are placed no earlier than that after its arrival
        self.master_launch_s = float(master_launch_s)
        self.placement = placement
        self.place = strategy(placement)
        self.history: History | None = None

    # ------------------------------------------------------------------ lifecycle
    def reset(self, view: View) -> None:
        if self.history is not None:
            self.history.close()
        self.history = History(self.history_path, self.history_run)
        self.place = strategy(self.placement, view.cluster.capacity)
        cap = view.cluster.capacity
        self.node_cpu = float(cap[:, 1].max()) if len(cap) else 0.0
        self.node_mem = float(cap[:, 2].max()) if len(cap) else 0.0
        self.queue: dict[str, JobView] = {}      # pending, in the order they get resources
        self.tracks: dict[str, Track] = {}
        self.order: dict[str, int] = {}
        self.next_round = 0.0
        self.warm_started = 0

    def decide(self, view: View) -> Decision:
        for job in view.finished:
            self._remember(view.now, job)
            self.queue.pop(job.job_id, None)
            self.tracks.pop(job.job_id, None)
        restarts = []
        for job in view.stopped:
            self._stopped(job)
            if job.stop_reason in RESTART:
                restarts.append(job)
        for job in view.arrived:
            self.order[job.job_id] = job.index
            self.queue[job.job_id] = job
            if is_ps_job(job):
                self.tracks[job.job_id] = Track()
        for job in view.stopped:
            self.queue[job.job_id] = job
        # recovery first ([RM] §5.2: relaunch and restore), then the others in arrival order
        first = {j.job_id for j in restarts}
        self.queue = dict(sorted(self.queue.items(), key=lambda kv: (kv[0] not in first, kv[1].submit_time,
                                                                     kv[1].index)))
        free = view.cluster.free_copy()
        decision = Decision()
        self._stragglers(view)
        self._replace_stragglers(view, free, decision)
        self._admit(view, free, decision)
        if view.now >= self.next_round - 1e-9:
            self.next_round = view.now + self.interval
            self._round(view, free, decision)
        if self.queue or decision.allocations or any(is_ps_job(j) for j in view.running.values()):
            decision.wakeup = max(self.next_round - view.now, 1e-3)
            if any(tr.slow and tr.slow[-1][1] == math.inf and tr.slow[-1][2] == "worker" for tr in self.tracks.values()):
                decision.wakeup = min(decision.wakeup, HEARTBEAT_S)   # a straggler is watched between rounds
            masters = [self._master_ready(j) - view.now for j in self.queue.values() if self._master_ready(j) > view.now]
            if masters:
                decision.wakeup = min(decision.wakeup, max(min(masters), 1e-3))
        return decision

    def _master_ready(self, job: JobView) -> float:
        """When a PS job's master pod is up and its tasks can be launched: ``master_launch_s`` after
        its arrival ([D] §3: the ElasticJob operator starts the job's master pod, which asks the Brain
        for the initial plan and then has the PS and worker pods launched); a job that ran keeps its
        master (a restart is not delayed), and other jobs start at their request, as they came."""
        tr = self.tracks.get(job.job_id)
        if tr is None or tr.config is not None:
            return -math.inf
        return job.submit_time + self.master_launch_s

    # ------------------------------------------------------------------ stage 1: starting jobs
    def initial_config(self, job: JobView) -> Config:
        """Warm start from the history, else [D]'s sampling configuration (cold start); with
        ``start: request``, the owner's configuration ([RM] §6.2's instability experiments start
        the job at its well-tuned configuration)."""
        if self.start == "request":
            return self._bounded(job, _requested(job))
        recs = self.history.similar(job.model, job.tenant, job.user, self.k, self.min_similarity)
        m = 1.0 + self.mem_margin
        if recs:
            self.warm_started += 1
            # memory from what the jobs were seen to use ([D] §4.2), PS memory as a total
            raw = [replace(r.config, worker_mem=r.worker_mem_used * m, ps_mem=r.ps_mem_used * r.config.ps * m)
                   for r in recs]
            cfg = smooth(raw, self.mu)
            cfg = replace(cfg, ps_mem=cfg.ps_mem / cfg.ps)
        else:
            w, ps = _roles(job)
            p = max(self.cold_ps, ps.min_count)
            pod = self._pod()
            if job.job_id in self.tracks:
                self.tracks[job.job_id].cold = True
            cfg = Config(max(1, w.min_count), p, pod, pod, w.mem, ps.mem * ps.count / p)
        return self._bounded(job, cfg)

    def _pod(self) -> float:
        return float(min(self.pod_cpu, self.node_cpu)) or 1.0

    def _bounded(self, job: JobView, cfg: Config) -> Config:
        """``cfg`` within the job's task bounds, the pod and node sizes and the job's CPU cap."""
        w, ps = _roles(job)
        pod = self._pod()
        wc = float(min(max(round(cfg.worker_cpu), 1), pod))
        pc = float(min(max(round(cfg.ps_cpu), 1), pod))
        nw = min(max(cfg.workers, w.min_count), w.max_count)
        np_ = min(max(cfg.ps, ps.min_count), ps.max_count)
        while nw * wc + np_ * pc > self.job_cpu_cap + 1e-9:
            if nw > w.min_count:
                nw -= 1
            elif np_ > ps.min_count:
                np_ -= 1
            elif wc > 1 or pc > 1:
                wc, pc = max(1.0, wc - 1), max(1.0, pc - 1)
            else:
                break
        ps_total = cfg.ps_mem * cfg.ps
        wm = float(min(math.ceil(cfg.worker_mem), self.node_mem))
        pm = float(min(math.ceil(ps_total / np_), self.node_mem))
        return Config(nw, np_, wc, pc, wm, pm)

    def _admit(self, view: View, free: np.ndarray, decision: Decision) -> None:
        self._start_pending(view, free, decision)
        # a job still waiting for its master pod is not one that does not fit
        if any(self._master_ready(j) <= view.now + 1e-9 for j in self.queue.values()) \
                and self._preempt_overflow(view, free, decision):
            self._start_pending(view, free, decision)

    def _start_pending(self, view: View, free: np.ndarray, decision: Decision) -> None:
        for jid, job in list(self.queue.items()):
            if is_ps_job(job):
                if self._master_ready(job) > view.now + 1e-9:
                    continue
                tr = self.tracks.setdefault(jid, Track())
                if tr.config is None and tr.start is None:
                    tr.start = self.initial_config(job)
                cfg = tr.config if tr.config is not None else tr.start
                cfg = self._after_oom(job, tr, cfg)   # kept even if it does not fit yet
                if tr.config is not None:
                    tr.config = cfg
                else:
                    tr.start = cfg
                alloc = self._place(free, job, cfg)
                if alloc is None:   # does not fit now: the owner's request (which fits the empty cluster), else wait
                    cfg = _requested(job)
                    alloc = self._place(free, job, cfg)
                if alloc is None:
                    continue
                tr.config, tr.last_change = cfg, view.now
                decision.allocations[jid] = alloc
            else:
                alloc = self.place(free, job.roles, job.requested_counts())
                if alloc is None:
                    continue
                decision.allocations[jid] = alloc
            del self.queue[jid]

    # ------------------------------------------------------------------ placing a configuration
    def _place(self, free: np.ndarray, job: JobView, cfg: Config) -> dict | None:
        """An allocation of ``cfg`` (tasks kept where they are when they can be), deducted from
        ``free``; None (``free`` untouched) when the nodes cannot hold it."""
        trial = free.copy()
        current = job.allocation
        for role in job.roles:   # plan as if the job gave back what it holds
            tasks = current.get(role.name, {})
            d = np.asarray(task_demand(role, tasks))
            for node, c in tasks.items():
                trial[node] += c * d
        grants = {"worker": (cfg.workers, cfg.worker_cpu, cfg.worker_mem), "ps": (cfg.ps, cfg.ps_cpu, cfg.ps_mem)}
        out = {}
        for role in job.roles:
            n, cpu, mem = grants[role.name]
            spec = replace(role, cpu=cpu, mem=mem)
            d = np.asarray(spec.demand)
            old = dict(current.get(role.name, {}))
            keep = shrink({role.name: old}, {role.name: n}).get(role.name, {}) if old else {}
            if any((trial[node] < c * d - EPS).any() for node, c in keep.items()):
                keep = {}
            for node, c in keep.items():
                trial[node] -= c * d
            extra = n - sum(keep.values())
            placed = {}
            if extra > 0:
                got = self.place(trial, [spec], {role.name: extra})
                if got is None:
                    return None
                placed = got[role.name]
            out[role.name] = Tasks(merge({0: keep}, {0: placed})[0], cpu=cpu, mem=mem)
        free[:] = trial
        return out

    # ------------------------------------------------------------------ stages 2 and 3
    def _round(self, view: View, free: np.ndarray, decision: Decision) -> None:
        plans: list[JobState] = []
        jobs: dict[int, JobView] = {}
        for jid, job in view.running.items():
            tr = self.tracks.get(jid)
            if tr is None or jid in decision.allocations or tr.config is None or job.reconfiguring:
                continue
            self._observe(view, job, tr)
            if self._verify(view, job, tr, free, decision) or self._stage3(view, job, tr, free, decision):
                continue   # rolled back, or reconfigured by an instability reaction
            if tr.verify is not None or (tr.slow and tr.slow[-1][1] == math.inf and tr.slow[-1][2] == "ps"):
                continue   # the last plan not yet measured, or a slow PS: stage 2 plans interference-free jobs ([RM] §4.3)
            if tr.rollbacks >= self.max_rollbacks:
                continue   # back at its best measured configuration: no performance issue to plan for ([D] §4)
            state = self._plan_state(view, job, tr)
            if state is not None:
                plans.append(state)
                jobs[state.key] = job
        if not plans:
            return
        cpu_free = float(free[:, 1].sum())
        cands: list[Candidate] = []
        for st in plans:
            job = jobs[st.key]
            tr = self.tracks[job.job_id]
            draft = self._draft_plan(job, tr)
            if draft and not tr.planned and tr.cold and tr.config == tr.start:
                # [D] §4.1: the Optimize step follows the Sampling step with Eqs. 10-11's closed
                # form from the sampled ŵ and ŝ (Table 1: sampling -> optimize; the sampling PS is
                # a whole pod, so ŝ is what a worker needs, not what a saturated PS gives it).
                # Samples at one configuration do not determine [RM]'s five coefficients: a
                # search on such a fit picks plans the job then runs far slower at (rolled back).
                first = candidate(st, self.costs, draft[0])
                cands.append(replace(first, score=score(first, st.remaining, self.rho)))
                continue
            found = candidates(st, self.costs, self.pop_size, self.generations, self.seed * 1_000_003 + st.key,
                               cpu_free, (*self._draft_plan(jobs[st.key], tr), *tr.front))
            found = [c for c in found if _x_cfg(c.config) not in tr.bad]
            tr.front = tuple(c.config for c in found)
            cands.extend(replace(c, score=score(c, st.remaining, self.rho)) for c in found)
        totals = np.array([cpu_free, float(free[:, 2].sum())])

        def take(c: Candidate) -> bool:
            job = jobs[c.key]
            alloc = self._place(free, job, c.config)
            if alloc is None:
                return False
            decision.allocations[job.job_id] = alloc
            tr = self.tracks[job.job_id]
            tr.verify, tr.planned = (tr.config, self._rate_at(job, tr, tr.config)), True
            tr.config, tr.last_change = c.config, view.now
            tr.overflow = 0   # a plan keeps within the job's CPU cap (Eq. 13): no worker of it is overflow
            return True

        greedy(cands, totals, take)

    def _draft_plan(self, job: JobView, tr: Track) -> tuple:
        """[D] §4.1's closed form from the measured per-task use (Eqs. 10-11): ``N_w = C/(ŵ+ŝ)``
        workers of ``ceil(ŵ)`` cores, PSes of 16 cores sharing ``C - N_w·ŵ`` -- a seed of the
        search, as the draft's Optimize step follows its Sampling step."""
        cfg, use = tr.config, tr.usage
        if "worker" not in use or "ps" not in use:
            return ()
        w_hat = max(use["worker"][0], 1e-9)
        s_hat = use["ps"][0] * cfg.ps / cfg.workers       # PS CPU used per worker
        n_w = int(self.job_cpu_cap // (w_hat + s_hat))
        ps_cpu = min(DRAFT_PS_CPU, self._pod())
        n_ps = int((self.job_cpu_cap - n_w * math.ceil(w_hat)) // ps_cpu)
        if n_w < 1 or n_ps < 1:
            return ()
        return (self._bounded(job, Config(n_w, n_ps, math.ceil(w_hat), ps_cpu, cfg.worker_mem, cfg.ps_mem * cfg.ps / n_ps)),)

    def _observe(self, view: View, job: JobView, tr: Track) -> None:
        """Usage reports: ŵ and the memory each role needs, against steps done."""
        use = job.usage()
        tr.usage = use
        cfg = tr.config
        u_w = use.get("worker", (cfg.worker_cpu, cfg.worker_mem))[0]
        if u_w < cfg.worker_cpu - 1e-9:
            tr.worker_cap = u_w
        done = job.iterations_done
        counts = (cfg.workers, cfg.ps)
        if counts != tr.mem_counts:   # another split of the data: a new series of a worker's memory
            tr.mem_seen, tr.mem_counts = {"ps": tr.mem_seen.get("ps", [])}, counts
        for role in task_counts(job.allocation):
            if role in use:
                seen = tr.mem_seen.setdefault(role, [])
                # the PSes' total: the embedding tables the PSes shard grow with the samples seen,
                # not with the PS count ([RM] §5.3), so the series goes on across a change of it
                seen.append((done, use[role][1] * (cfg.ps if role == "ps" else 1)))
                del seen[:-8]

    def _samples(self, job: JobView, tr: Track) -> list:
        """[(x, steps/s)] the job would have run without slow tasks: a sample taken beside a slow
        PS is left out; one beside a worker straggler is the others' rate, as its progress offset
        shows (dynamic sharding: it lacks ``(1 - s)/n`` of the rate, s its relative speed), so it
        counts as ``rate·n/(n - 1 + s)``: auto-scaling goes on around a straggler."""
        out = []
        for smp in job.throughput_samples:
            x, rate = _x(job, smp.allocation), smp.rate
            for a, b, role, speed in tr.slow:
                if a < smp.end and smp.start < b:
                    if role == "ps":
                        break
                    rate = rate * x[0] / max(x[0] - 1.0 + speed, 1e-9)
            else:
                out.append((x, rate))
        return out

    def _rate_at(self, job: JobView, tr: Track, cfg: Config) -> float:
        """Mean healthy steps/s measured at ``cfg`` (0 if none)."""
        here = _x_cfg(cfg)
        rates = [r for x, r in self._samples(job, tr) if x == here]
        return float(np.mean(rates)) if rates else 0.0

    def _plan_state(self, view: View, job: JobView, tr: Track) -> JobState | None:
        cfg = tr.config
        done = job.iterations_done
        if cfg.worker_cpu <= 0 or cfg.ps_cpu <= 0:   # a request without CPU: nothing to model
            return None
        if view.now - tr.last_change < max(self.min_interval, self.opt_start_s) - 1e-9:
            return None
        samples = self._samples(job, tr)
        here = _x_cfg(cfg)
        if not any(x == here for x, _ in samples) or done < self.opt_start_steps:
            return None
        model = fit(samples, tr.worker_cap)
        w, ps = _roles(job)
        # PS memory as a total that the PSes share ([RM] §5.3) and a worker's memory ([D] §4.2):
        # what they are predicted to need by the job's end (OOM prevention's line: embedding
        # tables grow with the samples seen) plus the margin. Sized at today's need, a plan would
        # run out of memory as the tables grow, before the next prediction; so until two reports
        # draw a line, a plan keeps at least the memory granted now.
        remaining = max(self.job_steps - done, 0.0)
        ps_total = self._planned_mem(tr, "ps", remaining)
        w_mem = float(min(math.ceil(self._planned_mem(tr, "worker", remaining)), self.node_mem))
        pod = self._pod()
        # a worker gets no fewer cores than it is seen to use ([D] §4.2: "each new worker is
        # allocated with ŵ CPU cores"): below ŵ the job has never been measured, and a fit whose
        # samples all hold ŵ or more (the cores above it idle) cannot tell the workers' compute
        # term from the constant one -- it planned 50 xDeepFM workers of 3 cores (ŵ = 19.4)
        wc_min = int(min(max(math.ceil(tr.worker_cap - 1e-9), 1), pod)) if math.isfinite(tr.worker_cap) else 1
        bounds = (w.min_count, w.max_count, ps.min_count, ps.max_count, wc_min, 1, int(pod))
        # the sanity bound: no plan is believed to get more than ``max_speedup`` x the steps per
        # used core the job measures now ([D] Table 1: 1.46 -> 1.50 and 0.276 -> 0.275 steps/s per
        # used core from sampling to the optimum)
        used = cfg.workers * min(tr.usage.get("worker", (cfg.worker_cpu,))[0], cfg.worker_cpu) \
            + cfg.ps * min(tr.usage.get("ps", (cfg.ps_cpu,))[0], cfg.ps_cpu)
        per_core = self.max_speedup * self._rate_at(job, tr, cfg) / used if used > 0 else math.inf
        return JobState(self.order[job.job_id], model, cfg, max(self.job_steps - done, 1.0), bounds,
                        self.job_cpu_cap, min(ps_total, self.node_mem * cfg.ps), w_mem, per_core or math.inf)

    def _apply(self, view: View, job: JobView, tr: Track, new: Config, free: np.ndarray, decision: Decision,
               alloc: dict | None = None) -> bool:
        """Grant ``new`` (placed now unless ``alloc`` is given); False if the nodes cannot hold it."""
        alloc = alloc if alloc is not None else self._place(free, job, new)
        if alloc is None:
            return False
        decision.allocations[job.job_id] = alloc
        if _x_cfg(new) != _x_cfg(tr.config):
            tr.verify = None   # an instability reaction: what the last plan did can no longer be measured
        tr.config, tr.last_change = new, view.now
        return True

    def _verify(self, view: View, job: JobView, tr: Track, free: np.ndarray, decision: Decision) -> bool:
        """After a planned change, the first healthy rate measured at the new configuration: below
        the rate before it (less ``rollback_tolerance``, the measurement noise) the plan is rolled
        back and never taken again; else it stands. True when rolled back. (A choice: [RM] trusts
        its model; DLRover's code undoes a worker step whose speed did not grow.) After
        ``max_rollbacks`` of them Stage 2 plans the job no more: it is back at the best
        configuration measured, and [D] §4's Brain "generates resource plans when a job has a
        performance issue" (a fit that keeps promising what the job does not run made one job
        alternate between plans and rollbacks 76 times)."""
        if tr.verify is None:
            return False
        before, rate_before = tr.verify
        here = _x_cfg(tr.config)
        n = len([s for s in job.throughput_samples if s.start >= tr.last_change - 1e-9 and s.end > s.start
                 and _x(job, s.allocation) == here])
        rates = [r for x, r in self._samples(job, tr) if x == here][-n:] if n else []
        if not rates or view.now - tr.last_change < self.min_interval - 1e-9:
            return False
        tr.verify = None
        if rates[-1] >= rate_before * (1.0 - self.rollback_tolerance):
            return False
        tr.bad.add(_x_cfg(tr.config))
        back = replace(before, worker_mem=max(before.worker_mem, tr.config.worker_mem),
                       ps_mem=max(before.ps_mem * before.ps, tr.config.ps_mem * tr.config.ps) / before.ps)
        if not self._apply(view, job, tr, self._bounded(job, back), free, decision):
            return False
        tr.overflow = 0   # ``_bounded`` keeps the configuration within the job's CPU cap
        tr.rollbacks += 1
        return True

    def _stage3(self, view: View, job: JobView, tr: Track, free: np.ndarray, decision: Decision) -> bool:
        """The instability reactions; True when the job was reconfigured."""
        new = self._oom_prevention(job, tr)
        if new is not None and new != tr.config:
            return self._apply(view, job, tr, new, free, decision)
        if view.now - tr.last_change < self.min_interval - 1e-9:
            return False
        if self._slow_ps(view, job, tr, free, decision):
            return True
        # a straggler leaves the PSes idle too; dynamic sharding answers it, not more workers
        return not (tr.slow and tr.slow[-1][1] == math.inf) and self._idle_ps(view, job, tr, free, decision)

    def _idle_ps(self, view: View, job: JobView, tr: Track, free: np.ndarray, decision: Decision) -> bool:
        """[D] §4.2 Adjust 1, idle CPU in the PSes: with the PSes using ``s_used`` of their
        ``s_total`` cores for ``N_w`` workers, ``ŝ = s_used/N_w`` per worker and the PSes can serve
        ``ΔN_w = min(⌈s_total/ŝ⌉, √K) − N_w`` more workers (√K, undefined in [D]: ``idle_ps_max_workers``;
        None: the job's worker bound). Workers beyond the job's CPU quota are preemptible overflow
        workers (``overflow``; [D] §4.2: "marked as low priority and preemptible"), taken back when
        a pending job does not fit. Once per PS set, after Stage 2 planned the job ([D]: Sampling,
        Optimize, then Adjust), and verified like a plan."""
        cfg = tr.config
        use = tr.usage.get("ps")
        if not self.idle_ps or not tr.planned or tr.verify is not None or use is None or tr.idle_ps_at == (cfg.ps, cfg.ps_cpu) or use[0] >= cfg.ps_cpu - 1e-9:
            return False
        w, _ = _roles(job)
        s_hat = use[0] * cfg.ps / cfg.workers
        target = min(math.ceil(cfg.ps * cfg.ps_cpu / s_hat - 1e-9), self.idle_ps_max_workers, w.max_count)
        room = int((self.job_cpu_cap - cfg.cpu + 1e-9) // cfg.worker_cpu) if cfg.cpu <= self.job_cpu_cap else 0
        if not self.overflow:
            target = min(target, cfg.workers + room)
        if target <= cfg.workers:
            return False
        before = (cfg, self._rate_at(job, tr, cfg))
        if not self._apply(view, job, tr, replace(cfg, workers=target), free, decision):
            return False
        tr.idle_ps_at, tr.verify = (cfg.ps, cfg.ps_cpu), before
        tr.overflow = max(target - cfg.workers - room, 0) + tr.overflow
        return True

    def _preempt_overflow(self, view: View, free: np.ndarray, decision: Decision) -> bool:
        """Cluster CPU is tight (a pending job does not fit): every job's overflow workers go
        ([D] §4.2); True if any did."""
        took = False
        for jid, tr in self.tracks.items():
            job = view.running.get(jid)
            if not tr.overflow or job is None or jid in decision.allocations:
                continue
            cfg = replace(tr.config, workers=max(tr.config.workers - tr.overflow, 1))
            if self._apply(view, job, tr, cfg, free, decision):
                tr.overflow, took = 0, True
        return took

    def _oom_prevention(self, job: JobView, tr: Track) -> Config | None:
        """Grant each role the memory a task is predicted to need by the job's end, plus the
        margin, when that exceeds its grant ([RM] §5.3; [D] §4.2). The prediction is a line
        through the per-task need against steps done, seen at the current task counts only: a
        scale-out changes the tasks' count, not how much memory each needs."""
        cfg = tr.config
        remaining = max(self.job_steps - job.iterations_done, 0.0)
        out = cfg
        for role in ("worker", "ps"):
            if not _reported(tr, role):
                continue
            need = self._need(tr, role, remaining) / (cfg.ps if role == "ps" else 1)
            if need > _grant(cfg, role) + 1e-9:
                mem = float(min(math.ceil(need * (1.0 + self.mem_margin)), self.node_mem))
                out = replace(out, **{f"{role}_mem": mem})
        return None if out == cfg else out

    def _planned_mem(self, tr: Track, role: str, remaining: float) -> float:
        """GB a plan grants a worker (``worker``) or all the PSes (``ps``): the predicted need plus
        ``mem_margin``; at least the grant while fewer than two reports predict the growth; the
        grant when the job reports nothing of its own."""
        cfg = tr.config
        grant = cfg.worker_mem if role == "worker" else cfg.ps_mem * cfg.ps
        if not _reported(tr, role):
            return grant
        need = self._need(tr, role, remaining) * (1.0 + self.mem_margin)
        return need if len(tr.mem_seen.get(role, ())) >= 2 else max(need, grant)

    def _need(self, tr: Track, role: str, remaining: float) -> float:
        """GB a worker (``role`` worker) or all the PSes (``ps``) are predicted to need after
        ``remaining`` more steps: the line through the series, at least the last report."""
        now = tr.usage[role][1] * (tr.config.ps if role == "ps" else 1)
        return max(_extrapolate(tr.mem_seen.get(role, []), remaining), now)

    def _stragglers(self, view: View) -> None:
        """[RM] §5.1: a worker whose progress offset lags its peers' (``slowest_task``: below
        ``slow_ratio`` of their speed) gets smaller shards, one step per heartbeat (256 -> 128 ->
        64 batches); full shards again once it keeps pace. Its slow interval stays out of fits."""
        for jid, job in view.running.items():
            tr = self.tracks.get(jid)
            if tr is None or tr.config is None:
                continue
            slow = job.slowest_task
            slow = slow if slow is not None and slow[2] < self.slow_ratio else None
            open_ = bool(tr.slow) and tr.slow[-1][1] == math.inf
            if open_ and (slow is None or tuple(tr.slow[-1][2:]) != (slow[0], slow[2])):
                tr.slow[-1][1] = view.now   # over, or another task or speed: a new interval
            if slow is not None and not (open_ and tuple(tr.slow[-1][2:]) == (slow[0], slow[2])):
                tr.slow.append([view.now, math.inf, slow[0], slow[2]])
                del tr.slow[:-16]
            if self.straggler == "replace":
                continue   # the traditional handling: no shards to resize (``_replace_stragglers``)
            if slow is not None and slow[0] == "worker" and view.now - tr.shard_at >= HEARTBEAT_S - 1e-9:
                tr.shard, tr.shard_at = min(tr.shard + 1, len(self.shard_sizes) - 1), view.now
            elif slow is None:
                tr.shard, tr.shard_at = 0, -math.inf

    def _replace_stragglers(self, view: View, free: np.ndarray, decision: Decision) -> None:
        """``straggler: replace``, the traditional handling [RM] §6.2 compares dynamic sharding with
        (Fig. 13: "employs a 'stop-and-restart' strategy"; [RM] §7: "existing works simply replace the
        slowest node with a new node"): at the heartbeat that reports a worker straggler, its pod is
        relaunched on another node, once per node; the overhead model charges the change (a
        stop-and-restart under ``overhead=stop_resume``)."""
        if self.straggler != "replace":
            return
        for jid, job in view.running.items():
            tr = self.tracks.get(jid)
            slow = job.slowest_task
            if tr is None or tr.config is None or job.reconfiguring or jid in decision.allocations \
                    or slow is None or slow[0] != "worker" or slow[2] >= self.slow_ratio or slow[1] in tr.moved_off:
                continue
            alloc = self._move_off(free, job, "worker", slow[1])
            if alloc is not None:
                tr.moved_off.add(slow[1])
                self._apply(view, job, tr, tr.config, free, decision, alloc)

    def _slow_ps(self, view: View, job: JobView, tr: Track, free: np.ndarray, decision: Decision) -> bool:
        """A PS that holds the job back (``slowest_task``: per-PS load and step times, [D] §5.4).
        First the hot-PS remedy ([D] §4.2 Adjust 2): the PSes get their cores / the relative
        speed (``s_new``, at most a pod); at a pod already, one PS more, which re-partitions the
        parameters evenly over the new set ([RM] §4.3). If the PS is no faster after that, the
        load was not the cause but the machine: the PS moves to another node ([D] §5.4). Seamless
        migration either way; True when the job was reconfigured."""
        slow = job.slowest_task
        if slow is None or slow[0] != "ps" or slow[2] >= self.slow_ratio:
            return False
        cfg, (_, ps) = tr.config, _roles(job)
        if tr.hot_fixes >= 1 and slow[2] <= tr.fix_speed + 1e-9 and slow[1] not in tr.moved_off:
            alloc = self._move_off(free, job, "ps", slow[1])
            if alloc is not None:
                tr.moved_off.add(slow[1])
                return self._apply(view, job, tr, cfg, free, decision, alloc)
        cpu = float(min(math.ceil(cfg.ps_cpu / max(slow[2], 1e-9)), self._pod()))
        if cpu > cfg.ps_cpu and cfg.cpu + cfg.ps * (cpu - cfg.ps_cpu) <= self.job_cpu_cap + 1e-9:
            new = replace(cfg, ps_cpu=cpu)
        elif cfg.ps < ps.max_count:
            # one PS more, which re-partitions the parameters evenly ([RM] §4.3, DeepRec); at the
            # job's CPU quota the PS cores are shared by the new set (8 x 16 -> 9 x 14 for W&D)
            n = cfg.ps + 1
            room = math.floor((self.job_cpu_cap - cfg.workers * cfg.worker_cpu + 1e-9) / n)
            if min(cfg.ps_cpu, room) < 1:
                return False
            new = replace(cfg, ps=n, ps_cpu=float(min(cfg.ps_cpu, room)), ps_mem=cfg.ps_mem * cfg.ps / n)
        else:
            return False
        tr.hot_fixes, tr.fix_speed = tr.hot_fixes + 1, slow[2]
        return self._apply(view, job, tr, new, free, decision)

    def _move_off(self, free: np.ndarray, job: JobView, role: str, node: int) -> dict | None:
        """The job's allocation with one ``role`` task moved from ``node`` to another node (same
        grants), deducted from ``free``; None when no other node can hold it."""
        tasks = job.allocation.get(role, {})
        if not tasks.get(node):
            return None
        spec = next(r for r in job.roles if r.name == role)
        d = np.asarray(task_demand(spec, tasks))
        trial = free.copy()
        trial[node] = 0.0   # not back onto the bad machine
        got = self.place(trial, [replace(spec, cpu=float(d[1]), mem=float(d[2]))], {role: 1})
        if got is None:
            return None
        target = next(iter(got[role]))
        kept = dict(tasks)
        kept[node] -= 1
        if not kept[node]:
            del kept[node]
        kept[target] = kept.get(target, 0) + 1
        free[node] += d
        free[target] -= d
        return {**job.allocation, role: Tasks(kept, cpu=float(d[1]), mem=float(d[2]))}

    def shard_batches(self, job_id: str) -> int:
        """Batches per data shard the job's straggler gets now (dynamic data sharding, [RM] §5.1);
        the fault model reads it at every heartbeat (``faults.Capabilities.shard_batches``)."""
        tr = self.tracks.get(job_id)
        return self.shard_sizes[min(tr.shard if tr else 0, len(self.shard_sizes) - 1)]

    # ------------------------------------------------------------------ stops and finishes
    def _stopped(self, job: JobView) -> None:
        tr = self.tracks.get(job.job_id)
        if tr is not None and job.stop_reason is StopReason.OOM:
            over = [r for r, (_, mem) in tr.usage.items() if tr.config and mem > _grant(tr.config, r) + 1e-9]
            tr.oom_roles = tuple(over) or ("worker", "ps")

    def _after_oom(self, job: JobView, tr: Track, cfg: Config) -> Config:
        """[D] §4.2: a worker that ran out of memory restarts with double; a PS OOM doubles the
        PS count (more PSes share the model) or, with ``ps_oom: double_memory``, their memory."""
        if not tr.oom_roles:
            return cfg
        roles, tr.oom_roles = tr.oom_roles, ()
        w, ps = _roles(job)
        if "worker" in roles:
            cfg = replace(cfg, worker_mem=min(cfg.worker_mem * 2, self.node_mem))
        if "ps" in roles:
            if self.ps_oom == "double_count" and cfg.ps * 2 <= ps.max_count \
                    and cfg.cpu + cfg.ps * cfg.ps_cpu <= self.job_cpu_cap + 1e-9:
                cfg = replace(cfg, ps=cfg.ps * 2, ps_mem=cfg.ps_mem)   # per-PS grant kept: the total doubles
            else:
                cfg = replace(cfg, ps_mem=min(cfg.ps_mem * 2, self.node_mem))
        return cfg

    def _remember(self, now: float, job: JobView) -> None:
        """A finished PS job goes into the history with its final configuration."""
        tr = self.tracks.get(job.job_id)
        if tr is None or tr.config is None:
            return
        here = _x_cfg(tr.config)
        rates = [r for x, r in self._samples(job, tr) if x == here]
        if not rates:
            return
        cfg = tr.config
        uw = tr.usage.get("worker", (cfg.worker_cpu, cfg.worker_mem))
        up = tr.usage.get("ps", (cfg.ps_cpu, cfg.ps_mem))
        self.history.add(Record(self.history_run, job.job_id, job.model, job.tenant, job.user, now, cfg,
                                float(np.mean(rates)), uw[0], up[0], uw[1], up[1]))


# ---------------------------------------------------------------------------- helpers
def _roles(job: JobView):
    by = {r.name: r for r in job.roles}
    return by["worker"], by["ps"]


def _requested(job: JobView) -> Config:
    w, ps = _roles(job)
    return Config(w.count, ps.count, w.cpu, ps.cpu, w.mem, ps.mem)


def _x(job: JobView, alloc) -> tuple:
    """(w, p, λw, λp) of an allocation: counts and each role's per-task CPU."""
    counts = task_counts(alloc)
    w, ps = _roles(job)
    return (counts.get("worker", 0), counts.get("ps", 0), float(task_demand(w, alloc.get("worker", {}))[1]),
            float(task_demand(ps, alloc.get("ps", {}))[1]))


def _x_cfg(cfg: Config) -> tuple:
    return (cfg.workers, cfg.ps, float(cfg.worker_cpu), float(cfg.ps_cpu))


def _grant(cfg: Config, role: str) -> float:
    return cfg.worker_mem if role == "worker" else cfg.ps_mem


def _reported(tr: Track, role: str) -> bool:
    """Whether the job reports its own memory need for ``role``: a report equal to the grant is
    what a job without a usage model reports (the grant itself), which says nothing."""
    use = tr.usage.get(role)
    return use is not None and tr.config is not None and abs(use[1] - _grant(tr.config, role)) > 1e-9


def _extrapolate(seen: list, remaining: float) -> float:
    """The GB a role will need after ``remaining`` more steps: a least-squares line through its
    reports against steps done ([RM] §5.3: embedding memory grows with the samples consumed)."""
    if not seen:
        return 0.0
    if len(seen) < 2:
        return seen[-1][1]
    x = np.array([s for s, _ in seen])
    y = np.array([m for _, m in seen])
    if np.ptp(x) <= 0:
        return float(y[-1])
    slope = max(float(np.polyfit(x, y, 1)[0]), 0.0)
    return float(y[-1] + slope * remaining)
