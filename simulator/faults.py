"""Faults and instability: node and task failures, OOM, stragglers, hot parameter servers, and
recovery from checkpoints (config group ``faults/``; docs/models/faults.md).

A ``FaultModel`` is the unstable world around the jobs. It talks to the run through one small
interface, ``Hooks`` (the engine implements it: the time, scheduling, failing a job or a node,
refreshing a job's rate after a slowdown, a job's state), and to the policy through what the policy
declares (``Capabilities``); it reads nothing else of either. The engine asks it three things: the
slowdown of a job on an allocation (``factor``), what a failure costs (``restore``: back to the
last checkpoint) and whether a job has run out of retries (``gives_up``). It hears of every start,
resume and reallocation (``changed``).

Every random draw comes from ``component_rng(seed, "faults.<kind>")``; events are handled in a
deterministic order, so the same config and seed give the same failures. Node failures do not
depend on the jobs at all, so every policy meets the same ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Callable, Literal, Protocol

from clustersim.simulator.errors import ConfigError
from clustersim.simulator.job import JobState, Status, StopReason, Tasks, task_demand
from clustersim.simulator.overhead import DEFAULT_COSTS, Change
from clustersim.simulator.params import Count, Fraction, NonNegative, Positive, Range, check_params
from clustersim.simulator.rng import component_rng

DAY = 86_400.0
STARTS = (Change.START, Change.RESUME)


# choice: checkpoints at most every millisecond (no trainer saves more often); a shorter interval
# makes the count of checkpoints taken in a run overflow (1e-300 s did)
Interval = Annotated[float, Range(ge=1e-3)]


@dataclass(frozen=True)
class Checkpoints:
    """Checkpoints while a job runs, every ``interval_s`` s of wall time from its (re)start, to
    durable storage (TF Estimator's default ``save_checkpoints_secs`` is 600 s); null: none, a
    failure restarts the attempt from where it began. ``flash_interval_s``: DLRover's flash
    checkpoint (DLRover-RM §5.2; dlrover docs/blogs/megatron_flash_checkpoint.md) also saves to
    host memory this often; a task failure restores from memory, a node failure loses the host's
    memory and restores from storage. Saving pauses training: ``checkpoint_gb`` (the profile's)
    over ``storage_gb_per_s``, or over ``flash_gb_per_s`` in memory (< 1 s for 20 GB, §5.2),
    charged as the fraction of time spent saving."""

    interval_s: Interval | None = 600.0
    flash_interval_s: Interval | None = None
    storage_gb_per_s: Positive = 0.5     # a choice: remote storage write rate (docs/models/faults.md)
    flash_gb_per_s: Positive = 20.0      # DLRover-RM §5.2: under 1 s for a 20 GB model


@dataclass(frozen=True)
class NodeFaults:
    """Each node fails after an exponential time of mean ``mtbf_h`` hours of being up and stays
    down ``repair_s`` (fixed, or exponential of that mean); the tasks on it fail."""

    mtbf_h: Positive
    repair_s: NonNegative = 3600.0
    repair: Literal["fixed", "exponential"] = "fixed"


@dataclass(frozen=True)
class TaskFaults:
    """Each running task (pod) fails at a constant hazard: ``per_pod_day`` is its probability of
    failing within a day (DLRover-RM §2.2: 1.5 %, so a 50-pod job fails with 53 % a day). A job
    of n tasks fails at n**size_exponent times the hazard of one (1: independent pods, the
    paper's 1 - (1 - p)^n)."""

    per_pod_day: Annotated[float, Range(ge=0, lt=1)] = 0.015
    size_exponent: Positive = 1.0

    def hazard(self, pods: int) -> float:
        """Failures per second of a job running ``pods`` tasks."""
        return -math.log1p(-self.per_pod_day) / DAY * pods ** self.size_exponent


@dataclass(frozen=True)
class OomFaults:
    """A task whose memory need (the profile's usage model, ``Zoo.usage``) exceeds its grant runs
    out of memory ``after_s`` s after training starts. ``underprovisioned``: the fraction of jobs
    whose real need is ``need_factor`` x the model's (DLRover-RM §1, Table 4: 4.7–8 % of jobs hit
    OOM; DLRover relaunches an OOM worker with twice the memory, so 2x). Roles that request no
    memory are not memory-modelled and never OOM."""

    after_s: NonNegative = 60.0
    underprovisioned: Fraction = 0.0
    need_factor: Annotated[float, Range(gt=1)] = 2.0


@dataclass(frozen=True)
class StragglerFaults:
    """A running task turns slow (``factor`` x its iteration time) at ``per_pod_hour`` per task
    and stays slow ``duration_s`` or until the job stops. A slow PS slows every worker, and so
    does a slow member of a synchronous job (all-reduce, or ``ps_sync``). A slow worker of an
    asynchronous PS job depends on how the data is served (DLRover-RM §5.1): under static
    sharding (each worker owns 1/n of the data, [D] §6.3's TFJob) the job ends when the
    straggler's share is done, as if it ran at the straggler's pace; under dynamic sharding (a
    policy declaring ``dynamic_sharding``) the others take more shards, so the job loses the
    straggler's share of the throughput plus, if it is still slow when the data runs out, the
    tail of the shard it holds then: on average half of it, ``(S·factor − S0)/(2·r)`` s more
    than a healthy worker's half shard (S: the batches of the straggler's shards, which the
    policy sets (``shard_batches``), S0 = ``shard_batches`` here, the healthy size; r: a healthy
    worker's batches/s). The fault model reads the policy's shard size every ``heartbeat_s``
    (DLRover-RM §5.1: workers report their progress offset at regular intervals). ``role``: the
    tasks a straggler is drawn among; ``per_job``: at most that many per job (a new one is drawn
    after each change of allocation or restart that lost the last, up to it)."""

    per_pod_hour: NonNegative = 0.0
    factor: Annotated[float, Range(gt=1)] = 4.0   # DLRover §6: a straggler's CPU set to 25 %
    duration_s: Positive = 1800.0
    ps_sync: bool = False
    shard_batches: Annotated[int, Range(ge=1)] = 256   # DLRover-RM §5.1: shards of 256 batches before any change
    heartbeat_s: Positive = 60.0                       # a choice: DLRover-RM §6.2 handles a straggler "within 1 minute"
    role: Literal["any", "worker", "ps"] = "any"       # the tasks a straggler is drawn among
    per_job: Count = 0                                 # stragglers a job gets at most (0: no limit; DLRover-RM §6.2 injects one)


@dataclass(frozen=True)
class HotPsFaults:
    """A ``fraction`` of PS jobs with two or more PSes has one PS carrying ``skew`` x the mean
    load (unbalanced tensor partition, DLRover §6.4: 13 % of jobs), from the job's first start.
    The slowest PS bounds the update, so the job runs as if every PS had 1/skew of its CPU
    (notes/dlrover.md A4). Per-PS CPU load shows it (``slowest_task``: the hot PS's node, the
    job's speed relative to a balanced partition; DLRover §5.4). With
    ``rebalance_on_ps_change`` a new PS set re-partitions evenly (DLRover-RM §4.3, DeepRec): a
    change of the PS count (a PS moved to another machine keeps its tensors, and its load)."""

    fraction: Fraction = 0.13
    skew: Annotated[float, Range(gt=1)] = 2.0
    rebalance_on_ps_change: bool = True


@dataclass(frozen=True)
class FaultsConfig:
    """The ``faults`` group. ``enabled: false`` (``faults=none``) runs without any of it.
    ``retries``: failures a job survives (Kubernetes Job ``backoffLimit`` defaults to 6); the next
    ends it failed. ``replay``: the trace's recorded failures happen again (docs/models/faults.md)."""

    enabled: bool = False
    retries: Count = 6
    checkpoint: dict = field(default_factory=dict)
    node: dict | None = None
    task: dict | None = None
    oom: dict | None = None
    straggler: dict | None = None
    hot_ps: dict | None = None
    replay: bool = False


class Hooks(Protocol):
    """What a fault model may read of and do to a run (``simulator.engine.Engine`` implements it)."""

    now: float   # the simulated time

    def at(self, delay: float, fn: Callable[[], None], first: bool = False) -> None:
        """Call ``fn()`` after ``delay`` s (``first``: before the other events of that instant)."""

    def fail_job(self, job_id: str, cause: StopReason, role: str | None = None, node: int | None = None) -> None:
        """A task of running job ``job_id`` failed now: the job stops."""

    def fail_node(self, at: float, node: int, repair_after: float | None = None) -> None:
        """``node`` goes down at ``at`` (its jobs stop), up again ``repair_after`` s later."""

    def refresh_rate(self, job_id: str) -> None:
        """The job's slowdown (``FaultModel.factor``) changed: its rate is worked out again."""

    def state(self, job_id: str) -> JobState:
        """The runtime record of a job."""

    def ended(self) -> bool:
        """Every job finished or failed."""


@dataclass(frozen=True)
class Capabilities:
    """What a policy declares to the fault model (class attributes of ``policies.base.Policy``).
    ``dynamic_sharding``: the fast workers take a straggler's data shards (DLRover-RM §5.1), so a
    slow worker holds the job back only by the shard it holds when the data runs out;
    ``shard_batches``: the policy's ``shard_batches(job_id)``, the batches per shard it gives
    that job's straggler now (None: it never changes them); ``checkpoint_interval_s``: the
    policy checkpoints this often instead of ``faults.checkpoint.interval_s`` (None: the config's)."""

    dynamic_sharding: bool = False
    checkpoint_interval_s: float | None = None
    shard_batches: Callable[[str], int] | None = field(default=None, compare=False)

    @classmethod
    def of(cls, policy) -> "Capabilities":
        """What ``policy`` declares; a policy outside the ``Policy`` hierarchy declares nothing.
        ``shard_batches`` is read from an instance only (a class's is an unbound function)."""
        shards = getattr(policy, "shard_batches", None) if not isinstance(policy, type) else None
        return cls(bool(getattr(policy, "dynamic_sharding", False)), getattr(policy, "checkpoint_interval_s", None),
                   shards if callable(shards) else None)


@dataclass(frozen=True)
class World:
    """What the fault model reads of the run's setting, fixed for the run: the jobs, the node
    count, and the models a hot PS and OOM are worked out with."""

    jobs: list
    num_nodes: int
    speed: object = None     # SpeedModel (a hot PS's slowdown)
    cluster: object = None   # Cluster, for the speed model
    usage: object = None     # usage(spec, alloc) -> {role: (cpu, mem) per task} (OOM); None: no OOM


def _section(cls, value, key: str):
    return None if value is None else cls(**check_params(cls, value, f"faults.{key}.{{}}"))


def check_config(cfg: dict | None) -> FaultsConfig:
    """The checked ``faults`` config (errors name the key)."""
    params = dict(cfg or {})
    params.pop("name", None)
    return FaultsConfig(**check_params(FaultsConfig, params, "faults.{}"))


def make(cfg: dict | None, seed: int = 0, *, costs_of=None, table=None) -> "FaultModel | None":
    """The fault model a ``faults`` config describes, or None when it is off. ``table``: the job
    table, whose recorded attempts and status ``replay`` needs."""
    c = check_config(cfg)
    if not c.enabled:
        return None
    return FaultModel(c, seed, costs_of=costs_of, table=table)


class FaultModel:
    def __init__(self, cfg: FaultsConfig, seed: int = 0, *, costs_of=None, table=None):
        self.cfg = cfg
        self.seed = seed
        self.ckpt = _section(Checkpoints, cfg.checkpoint, "checkpoint")
        self.node = _section(NodeFaults, cfg.node, "node")
        self.task = _section(TaskFaults, cfg.task, "task")
        self.oom = _section(OomFaults, cfg.oom, "oom")
        self.straggler = _section(StragglerFaults, cfg.straggler, "straggler")
        self.hot_ps = _section(HotPsFaults, cfg.hot_ps, "hot_ps")
        self.costs_of = costs_of or (lambda spec: DEFAULT_COSTS)
        self.records = _recorded_failures(table) if cfg.replay else {}
        if cfg.replay and table is None:
            raise ConfigError("faults.replay: needs the trace's job table (attempts, status)")
        self.hooks: Hooks | None = None
        self.world: World | None = None
        self.declared = Capabilities()
        self._rng = {k: component_rng(seed, f"faults.{k}") for k in ("node", "task", "oom", "straggler")}
        self._alloc: dict[str, int] = {}     # job -> token, bumped at every change of its allocation
        self._attempt: dict[str, int] = {}   # job -> token, bumped at every (re)start
        self._slow: dict[str, tuple] = {}    # job -> (role, factor, attempt token, slow until) of its straggler
        self._shards: dict[str, int] = {}    # job -> batches per shard of its straggler, as last read
        self._stragglers: dict[str, int] = {}  # job -> stragglers drawn so far
        self._slow_at: dict[str, tuple] = {}  # job -> (role, node, tasks of the role there) of its straggler
        self._hot: dict[str, tuple] = {}     # job -> (PS count, hot PS's node) when it appeared
        self._big_need: set[str] = set()     # underprovisioned jobs
        self._counted: dict[str, int] = {}   # failures that count against the retries
        self._replayed: dict[str, int] = {}  # recorded failures replayed so far
        self._replaying: str | None = None
        self._failed_at: dict[str, float] = {}

    # ------------------------------------------------------------------ setup
    def attach(self, hooks: Hooks, world: World, declared: Capabilities) -> None:
        """Run start: per-job draws (in job order, so they do not depend on the policy) and the
        first failure of every node."""
        self.hooks, self.world, self.declared = hooks, world, declared
        if declared.checkpoint_interval_s is not None:   # a policy may set its own
            self.ckpt = Checkpoints(**{**self.ckpt.__dict__, "interval_s": declared.checkpoint_interval_s})
        draw = component_rng(self.seed, "faults.jobs")
        for spec in world.jobs:
            u_oom, u_hot = draw.random(2)
            if self.oom and u_oom < self.oom.underprovisioned:
                self._big_need.add(spec.job_id)
            ps = next((r for r in spec.roles if r.name == "ps"), None)
            if self.hot_ps and ps is not None and u_hot < self.hot_ps.fraction:
                self._hot[spec.job_id] = ()   # appears at the first start
        unknown = set(self.records) - {spec.job_id for spec in world.jobs}
        if unknown:
            raise ConfigError(f"faults.replay: recorded failures of jobs not in the run, e.g. {sorted(unknown)[0]!r}")
        if self.node:
            for n in range(world.num_nodes):
                hooks.at(self._rng["node"].exponential(self.node.mtbf_h * 3600.0), partial(self._node_fails, n))

    # ------------------------------------------------------------------ what the engine asks
    def factor(self, st: JobState, alloc) -> float:
        """The job's speed on ``alloc`` relative to the speed model's: stragglers, a hot PS, and
        the time spent saving checkpoints."""
        job = st.spec.job_id
        f = 1.0
        slow = self._slow.get(job)
        if slow is not None and st.allocation and slow[2] == self._attempt.get(job) and self._stays(job, alloc):
            f *= self._straggler_effect(st, alloc, slow[0], slow[1])   # not at a (re)start, nor once removed
        if job in self._hot:
            f *= self._hot_effect(st, alloc)
        return f * self._saving(st)

    def changed(self, st: JobState, change: Change) -> None:
        """A job (re)started or changed its allocation: checkpoints, and the failures ahead."""
        job, now = st.spec.job_id, self.hooks.now
        self._alloc[job] = token = self._alloc.get(job, 0) + 1
        if job in self._slow and not self._stays(job, st.allocation):   # the policy removed the straggler
            self._slow.pop(job)
        if change in STARTS:
            self._attempt[job] = self._attempt.get(job, 0) + 1
            self._slow.pop(job, None)   # a straggler does not outlive its attempt
            self._start_checkpoints(st, now)
            if job in self._failed_at:   # time to recover: failure -> training again
                st.recover_s += st.busy_until - self._failed_at.pop(job)
                st.recoveries += 1
            if self._hot.get(job) == () and _count(st.allocation, "ps"):
                node = next(n for n, c in st.allocation["ps"].items() if c)   # the first PS is the hot one
                self._hot[job] = (_count(st.allocation, "ps"), node)
            self._replay(st)
        pods = sum(sum(t.values()) for t in st.allocation.values())
        if self.task and self.task.per_pod_day > 0:
            self.hooks.at(self._rng["task"].exponential(1.0 / self.task.hazard(pods)), partial(self._task_fails, job, token))
        if self.straggler and self.straggler.per_pod_hour > 0 and job not in self._slow \
                and not (self.straggler.per_job and self._stragglers.get(job, 0) >= self.straggler.per_job):
            if self.straggler.role != "any":
                pods = _count(st.allocation, self.straggler.role)
            rate = self.straggler.per_pod_hour / 3600.0 * pods
            if rate > 0:
                self.hooks.at(self._rng["straggler"].exponential(1.0 / rate), partial(self._slow_down, job, token))
        if self.oom:
            self._watch_memory(job, token)

    def restore(self, st: JobState, cause: StopReason) -> tuple[float, float, float]:
        """The job failed and stopped: back to its last checkpoint (a node failure loses the
        in-memory one). Returns what was lost: (iterations, s of training, GPU-seconds)."""
        job, now = st.spec.job_id, self.hooks.now
        self._failed_at[job] = now
        self._slow.pop(job, None)
        stores = st.ckpts or [[math.inf, math.inf, (now, st.progress, st.service)]]
        if cause is StopReason.NODE_DOWN:
            stores = stores[:1]
        t, progress, service = max((c[2] for c in stores), key=lambda c: c[0])
        lost = (st.progress - progress, now - t, st.service - service)
        st.progress = progress
        st.ckpts, st.ckpt_next = None, None
        st.lost_iterations += lost[0]
        st.lost_s += lost[1]
        st.lost_gpu_s += lost[2]
        if self._replaying == job:
            self._replayed[job] = self._replayed.get(job, 0) + 1
        else:
            self._counted[job] = self._counted.get(job, 0) + 1
        return lost

    def gives_up(self, st: JobState) -> bool:
        """Out of retries, or the trace's last recorded attempt failed."""
        job = st.spec.job_id
        rec = self.records.get(job)
        if rec is not None and rec[1] and self._replayed.get(job, 0) >= len(rec[0]):
            return True
        return self._counted.get(job, 0) > self.cfg.retries

    # ------------------------------------------------------------------ checkpoints
    def _start_checkpoints(self, st: JobState, now: float) -> None:
        """A (re)start restored the state it begins from: every store holds it."""
        here = (now, st.progress, st.service)
        c = self.ckpt
        stores = [[c.interval_s or math.inf, now + (c.interval_s or math.inf), here]]
        if c.flash_interval_s:
            stores.append([c.flash_interval_s, now + c.flash_interval_s, here])
        st.ckpts = stores
        st.ckpt_next = min(s[1] for s in stores)

    def _saving(self, st: JobState) -> float:
        """Fraction of time not spent saving checkpoints."""
        c = self.ckpt
        gb = self.costs_of(st.spec).checkpoint_gb
        busy = 0.0
        if c.interval_s:
            busy += gb / c.storage_gb_per_s / c.interval_s
        if c.flash_interval_s:
            busy += gb / c.flash_gb_per_s / c.flash_interval_s
        return 1.0 / (1.0 + busy)

    # ------------------------------------------------------------------ events
    def _live(self, job: str, token: int) -> bool:
        return self._alloc.get(job) == token and self.hooks.state(job).status is Status.RUNNING

    def _node_fails(self, node: int) -> None:
        hooks = self.hooks
        if hooks.ended():
            return
        rng, n = self._rng["node"], self.node
        repair = n.repair_s if n.repair == "fixed" else rng.exponential(n.repair_s) if n.repair_s > 0 else 0.0
        hooks.fail_node(hooks.now, node, repair)
        hooks.at(repair + rng.exponential(n.mtbf_h * 3600.0), partial(self._node_fails, node))

    def _task_fails(self, job: str, token: int) -> None:
        if self._live(job, token):
            st = self.hooks.state(job)
            role, node = _pick_task(st.allocation, self._rng["task"])
            self.hooks.fail_job(job, StopReason.FAILED, role, node)

    def _fail_if(self, job: str, token: int, cause: StopReason, role: str) -> None:
        if self._live(job, token):
            node = next(n for n, c in self.hooks.state(job).allocation[role].items() if c)
            self.hooks.fail_job(job, cause, role, node)

    def _slow_down(self, job: str, token: int) -> None:
        lim = self.straggler.per_job
        if not self._live(job, token) or job in self._slow or (lim and self._stragglers.get(job, 0) >= lim):
            return
        alloc = self.hooks.state(job).allocation
        if self.straggler.role != "any":
            alloc = {self.straggler.role: alloc[self.straggler.role]}
        role, node = _pick_task(alloc, self._rng["straggler"])
        self._stragglers[job] = self._stragglers.get(job, 0) + 1
        self.slow_task(job, role, self.straggler.factor, self.straggler.duration_s, node)

    def slow_task(self, job: str, role: str, factor: float, duration_s: float, node: int | None = None) -> None:
        """A task of ``role`` of running job ``job`` on ``node`` (None: its first node) turns
        ``factor`` x slower for ``duration_s``, until the job stops, or until a scale-in removes a
        task of that role on that node (tasks of a role on one node are interchangeable: the one
        removed is the slow one); the engine brings the job's rate up to date."""
        st = self.hooks.state(job)
        if st.status is not Status.RUNNING:
            return
        attempt = self._attempt[job]
        if node is None:
            node = next(n for n, c in st.allocation[role].items() if c)
        self._slow[job] = (role, factor, attempt, self.hooks.now + duration_s)
        self._slow_at[job] = (role, node, st.allocation[role].get(node, 0))
        self._shards[job] = self._shard_size(job)
        self.hooks.refresh_rate(job)
        self.hooks.at(duration_s, partial(self._recover_speed, job, attempt))
        if self.declared.dynamic_sharding and self.declared.shard_batches is not None and role != "ps":
            self.hooks.at(self._heartbeat_s(), partial(self._heartbeat, job, attempt))

    def _heartbeat_s(self) -> float:
        return self.straggler.heartbeat_s if self.straggler else StragglerFaults.heartbeat_s

    def _shard_size(self, job: str) -> int:
        """Batches per shard the policy gives the job's straggler now (the healthy size if it sets none)."""
        healthy = self.straggler.shard_batches if self.straggler else StragglerFaults.shard_batches
        ask = self.declared.shard_batches
        return int(ask(job)) if ask is not None else healthy

    def _heartbeat(self, job: str, attempt: int) -> None:
        """A heartbeat of the straggling job: a new shard size the policy set takes effect."""
        slow = self._slow.get(job)
        if slow is None or slow[2] != attempt or self.hooks.state(job).status is not Status.RUNNING:
            return
        size = self._shard_size(job)
        if size != self._shards.get(job):
            self._shards[job] = size
            self.hooks.refresh_rate(job)
        self.hooks.at(self._heartbeat_s(), partial(self._heartbeat, job, attempt))

    def _recover_speed(self, job: str, attempt: int) -> None:
        slow = self._slow.get(job)
        if slow is not None and slow[2] == attempt:
            del self._slow[job]
            self.hooks.refresh_rate(job)
            st = self.hooks.state(job)
            if st.status is Status.RUNNING and self.straggler and self.straggler.per_pod_hour > 0:
                pods = sum(sum(t.values()) for t in st.allocation.values())   # the next one may come
                rate = self.straggler.per_pod_hour / 3600.0 * pods
                self.hooks.at(self._rng["straggler"].exponential(1.0 / rate),
                               partial(self._slow_down, job, self._alloc[job]))

    def _stays(self, job: str, alloc) -> bool:
        """The straggler is still among ``alloc``'s tasks (none of its node's tasks was removed)."""
        role, node, count = self._slow_at[job]
        return alloc.get(role, {}).get(node, 0) >= count

    def slowest_task(self, job: str) -> tuple[str, int, float] | None:
        """What per-worker step times show of a running job: its slow task's (role, node, speed
        relative to the others), None while every task keeps pace."""
        slow = self._slow.get(job)
        st = self.hooks.state(job) if self.hooks is not None else None
        if st is None or st.status is not Status.RUNNING:
            return None
        if slow is None or slow[2] != self._attempt.get(job) or not self._stays(job, st.allocation):
            return self._hot_task(st)
        role, node, _ = self._slow_at[job]
        return role, node, 1.0 / slow[1]

    def _hot_task(self, st: JobState) -> tuple[str, int, float] | None:
        """A hot PS as per-PS CPU load shows it: ("ps", its node, the job's speed relative to a
        balanced partition); None if the job has none (or it was re-partitioned)."""
        if st.spec.job_id not in self._hot or not self._hot_now(st, st.allocation):
            return None
        f = self._hot_effect(st, st.allocation)
        if not f < 1.0:
            return None
        ps = st.allocation["ps"]
        node = self._hot[st.spec.job_id][1]
        return "ps", node if ps.get(node, 0) else next(n for n, c in ps.items() if c), f

    # ------------------------------------------------------------------ effects
    def _straggler_effect(self, st: JobState, alloc, role: str, factor: float) -> float:
        """The job's speed with one task ``factor`` x slow (StragglerFaults: static vs dynamic sharding)."""
        sync = self.straggler is not None and self.straggler.ps_sync and any(r.name == "ps" for r in st.spec.roles)
        if role == "ps" or sync or not self.declared.dynamic_sharding:
            return 1.0 / factor   # every worker waits on it, or the job ends when its static share is done
        # dynamic data sharding (DLRover-RM §5.1): one slow worker of n, the others go on at full speed
        n = max(_count(alloc, role), 1)
        share = (n - 1 + 1.0 / factor) / n
        base = self.world.speed.rate(st.spec, alloc, self.world.cluster) if self.world and self.world.speed else 0.0
        job = st.spec.job_id
        until = self._slow[job][3] if job in self._slow else math.inf
        left = st.spec.total_work - st.progress
        if not base > 0 or not left > 0:
            return share
        healthy = self.straggler.shard_batches if self.straggler else StragglerFaults.shard_batches
        size = self._shards.get(job, healthy)
        t = left / (base * share)   # s to the end of the data at the straggling speed
        if self.hooks.now + t >= until:
            return share            # it recovers before the data runs out: no tail
        tail = max(size * factor - healthy, 0.0) / (2.0 * base / n)
        return share * t / (t + tail)   # the tail spread over what is left: the job ends ``tail`` s later

    def _hot_effect(self, st: JobState, alloc) -> float:
        """The slowest PS bounds the update (notes/dlrover.md A4): one PS with ``skew`` x the mean
        share makes the PS side as slow as if every PS had 1/skew of its CPU (speed models that
        use PS CPU: DLRover-RM Eq. 3) or, for models that count PSes only (Optimus Eq. 3, tables),
        as if there were p/skew PSes (linear between the neighbouring counts)."""
        p = _count(alloc, "ps")
        if p < 2 or not self._hot_now(st, alloc):
            return 1.0
        speed, cluster, skew = self.world.speed, self.world.cluster, self.hot_ps.skew
        base = speed.rate(st.spec, alloc, cluster)
        if not base > 0:
            return 1.0
        ps = alloc["ps"]
        cpu = task_demand(st.spec.role("ps"), ps)[1]
        slow = speed.rate(st.spec, {**alloc, "ps": Tasks(dict(ps), cpu / skew, getattr(ps, "mem", None))}, cluster)
        if slow < base * (1 - 1e-12):
            return slow / base
        eff = max(p / skew, 1.0)
        lo = math.floor(eff)
        r_lo = speed.rate(st.spec, _with_tasks(alloc, "ps", lo), cluster)
        r_hi = speed.rate(st.spec, _with_tasks(alloc, "ps", lo + 1), cluster) if eff > lo else r_lo
        return min((r_lo + (eff - lo) * (r_hi - r_lo)) / base, 1.0)

    def _hot_now(self, st: JobState, alloc) -> bool:
        """The hot PS is still there: not yet started, or the PS count it appeared with (with
        ``rebalance_on_ps_change`` another count re-partitions evenly). The partition is by
        tensor, so a PS moved to another machine stays hot."""
        at_start = self._hot.get(st.spec.job_id, ())
        return at_start == () or not self.hot_ps.rebalance_on_ps_change or _count(alloc, "ps") == at_start[0]

    def need(self, job_id: str) -> float:
        """The job's hidden memory need: ``oom.need_factor`` for the underprovisioned jobs (drawn
        at the run's start), else 1 (what the usage model says). An observer sees it in the job's
        usage (``usage.BoundUsage``), as a profiler would."""
        return self.oom.need_factor if self.oom and job_id in self._big_need else 1.0

    def _watch_memory(self, job: str, token: int) -> None:
        """Time the job's OOM: ``after_s`` into training if a role needs more than its grant
        already, else when its growing memory (PS embedding tables grow with the samples seen,
        DLRover-RM §5.3) crosses the grant at the job's rate now. Checked again then (the rate
        may have changed without a change of allocation)."""
        st = self.hooks.state(job)
        first = self._oom_first(st, self.hooks.now)
        if first is not None:
            self.hooks.at(first[0], partial(self._oom_if, job, token))

    def _oom_if(self, job: str, token: int) -> None:
        if not self._live(job, token):
            return
        first = self._oom_first(self.hooks.state(job), self.hooks.now)
        if first is None:
            return
        delay, role, over = first
        if over or delay <= 1e-6:
            self._fail_if(job, token, StopReason.OOM, role)
        else:   # slower than when timed: not there yet
            self.hooks.at(delay, partial(self._oom_if, job, token))

    def _oom_first(self, st: JobState, now: float) -> tuple[float, str, bool] | None:
        """(s from now, role, over already) of the job's first OOM on its allocation, if it comes:
        a role whose tasks need more than their grant ``after_s`` after training (re)starts; one
        whose need grows past the grant when its memory, linear in the work done (``Zoo.usage``),
        gets there at the allocation's healthy speed times the fault model's factor."""
        usage = self.world.usage
        if usage is None or not st.allocation:
            return None
        scale = self.need(st.spec.job_id)
        work = st.spec.total_work
        start = max(st.busy_until, now)
        w = self.world   # the rate once the change is over (during it the job may not train)
        rate = w.speed.rate(st.spec, st.allocation, w.cluster) * st.factor if w.speed is not None else st.rate
        done = min((st.progress + st.rate * max(now - st.since, 0.0)) / work, 1.0) if work > 0 else 1.0
        at_now, at_end = usage(st.spec, st.allocation, progress=done), usage(st.spec, st.allocation, progress=1.0)
        best = None
        for role, tasks in st.allocation.items():
            grant = task_demand(st.spec.role(role), tasks)[2]
            m0, m1 = at_now[role][1] * scale, at_end[role][1] * scale
            if grant <= 0 or m1 <= grant * (1 + 1e-9):
                continue
            if m0 > grant * (1 + 1e-9):
                first = (start - now + self.oom.after_s, role, True)
            elif rate > 0:   # the work until the memory reaches the grant
                crossing = done + (grant - m0) / (m1 - m0) * (1.0 - done)
                first = (start - now + (crossing - done) * work / rate, role, False)
            else:
                continue
            if best is None or first[0] < best[0]:
                best = first
        return best

    # ------------------------------------------------------------------ replay
    def _replay(self, st: JobState) -> None:
        """The next recorded failed attempt of a (re)started job ends after its recorded run time."""
        rec = self.records.get(st.spec.job_id)
        k = self._replayed.get(st.spec.job_id, 0)
        if rec is None or k >= len(rec[0]):
            return
        length = rec[0][k]
        if rec[1] and k == len(rec[0]) - 1:
            length *= 1 - 1e-9   # a hair before its recorded end: at its recorded speed it fails, not finishes
        job, token = st.spec.job_id, self._attempt[st.spec.job_id]
        self.hooks.at(st.busy_until - self.hooks.now + length, partial(self._replayed_failure, job, token),
                       first=True)

    def _replayed_failure(self, job: str, attempt: int) -> None:
        st = self.hooks.state(job)
        if self._attempt.get(job) == attempt and st.status is Status.RUNNING:
            role, node = _pick_task(st.allocation, None)
            self._replaying = job
            try:
                self.hooks.fail_job(job, StopReason.FAILED, role, node)
            finally:
                self._replaying = None


def _count(alloc, role: str) -> int:
    return sum(alloc[role].values()) if role in alloc else 0


def _with_tasks(alloc, role: str, n: int) -> dict:
    """``alloc`` with only the first ``n`` tasks of ``role`` (node order), the same grants."""
    tasks, kept = alloc[role], {}
    for node, c in tasks.items():
        take = min(c, n - sum(kept.values()))
        if take > 0:
            kept[node] = take
    return {**alloc, role: Tasks(kept, getattr(tasks, "cpu", None), getattr(tasks, "mem", None))}


def _pick_task(alloc, rng) -> tuple[str, int]:
    """One task of the allocation, uniformly (the first with ``rng`` None): (role, node)."""
    tasks = [(role, n) for role, t in alloc.items() for n, c in t.items() for _ in range(c)]
    return tasks[int(rng.integers(len(tasks)))] if rng is not None else tasks[0]


def _recorded_failures(table) -> dict[str, tuple[list[float], bool]]:
    """job -> (run time of each failed attempt, whether the last one ended the job). Philly
    records each attempt: all but the last failed and were retried; a job whose status is
    ``failed`` failed in its last one too. A failed job without attempts (PAI) failed after its
    recorded duration."""
    if table is None:
        return {}
    cols = table.select(["job_id", "status", "attempts", "duration"]).to_pydict()
    out = {}
    for job, status, attempts, duration in zip(cols["job_id"], cols["status"], cols["attempts"], cols["duration"]):
        spans = [a["end"] - a["start"] for a in attempts or () if a["start"] is not None and a["end"] is not None]
        failed = status == "failed"
        if not spans and failed and duration:
            spans = [duration]
        lengths = spans if failed else spans[:-1]
        if lengths:
            out[job] = ([max(x, 0.0) for x in lengths], failed)
    return out
