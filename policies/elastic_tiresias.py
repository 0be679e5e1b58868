"""Elastic-Tiresias (EDL, Wu et al., seed 001 §5.1): Tiresias plus two rules on elastic GPU jobs.

The base plan is Tiresias's (``policies/tiresias.py``, reused by subclassing): discretized 2D-LAS
queues, every job admitted at its requested size, all-or-nothing. On top of it, at every decision:

- **reclaim** (notes/edl.md A10): while any job waits, jobs grown beyond their request by R2 go
  back to it, so that the base plan is the one Tiresias would make at the requested sizes;
- **R1, compaction**: when more than ``compaction_threshold`` (N = 10) jobs wait, each waiting job
  in priority order may start with p GPUs taken from idle GPUs and from running jobs outside the
  top queue G0 scaled in. The floor ⌈r·requested⌉ (r = ``min_fraction`` = 0.5) bounds the running
  jobs that R1 shrinks; a pending job may start on any p ≥ 1 (its role's ``min_count``), i.e. on
  what is free (§5.1: "a running job J_j has a parallelism at least ⌈r·p_j⌉"; notes A11). With
  ``start_floor`` a pending job needs ⌈r·requested⌉ GPUs to start (the older reading). The p GPUs
  coming from at most ⌈p_i/m⌉ machines (footnote 6; m = GPUs per machine). p maximises the gain
  in cluster efficiency Gain(i, p) = E_i(p) − Σ_victims [E_j(n_j) − E_j(n_j − d_j)], with
  E(n) = S(n) / t(p*) (§1 fn 1, §6.3); victims give single GPUs, the one whose efficiency drops
  least first (A12). The GPUs a graceful scale-in frees become free only once the leaving
  workers have exited, so the job is *reserved* its GPUs and starts at the next decision that
  finds them free (the engine decides again when the exit ends; ``reserve_retry_s`` wakes the
  policy for mechanisms without a graceful exit);
- **R2, expansion**: when no job waits and GPUs are idle, one GPU at a time goes to the running
  elastic job with the largest relative speed-up (S(p+1) − S(p)) / S(p), while it is positive.

S is the job's *profiled* throughput (``JobView.profiled``: what offline profiling or EDL's
``profile()`` measures, §5.2), placement-aware; measured throughput samples give only the
current size, not S(p+1). A job with an operation in flight is not scaled again (EDL §3.1,
"committed sequentially"); ``retry_s`` later it is (the paper's 60 s retry). Only single-role
GPU jobs whose role is elastic (``min_count < max_count``, e.g. the trace transform ``elastic``)
are scaled; the rest are scheduled as plain Tiresias does.

Optional, off by default: ``migrate_to_fewer_machines`` (EDL §5.2-5.3 worker migration: a running
job spread over more machines than it needs moves onto fewer when they have room; the engine
charges it as a ``migrate`` change); ``remove_stragglers`` (EDL §5.3: a job whose slowest worker runs
below ``straggler_speed`` of the others, per its per-worker step times, drops that worker by a
scale-in; expansion adds a healthy one later). Which mechanism scales (stop-free or stop-resume) is the
run's overhead model (``overhead=stop_free`` or ``overhead=stop_resume``), so the same policy
measures the value of stop-free scaling. docs/policies/elastic_tiresias.md.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from typing import Annotated

import numpy as np

from clustersim.policies.base import Decision, JobView, View, register
from clustersim.policies.placement import PlacementName, release, shrink
from clustersim.policies.tiresias import Thresholds, Tiresias
from clustersim.simulator.cluster import EPS, tasks_per_node
from clustersim.simulator.job import nodes_of, task_counts
from clustersim.simulator.params import NonNegative, Positive, Range

GAIN_EPS = 1e-9
MEMO_SETS = 4096       # node sets whose plan R1 keeps per shape (choice: bounds memory, a few MB at most)


def gpu_role(jv: JobView):
    """The job's one GPU role if it is a single-role elastic GPU job, else None."""
    roles = jv.roles
    if len(roles) == 1 and roles[0].gpu > 0 and roles[0].elastic:
        return roles[0]
    return None


@register
class ElasticTiresias(Tiresias):
    name = "elastic_tiresias"
    tags = frozenset({"elastic"})

    def __init__(self, thresholds: Thresholds = (500.0, 10000.0), starvation_knob: NonNegative = 0.0,
                 gittins: bool = False, gittins_distribution: str = "bundled:tiresias/yarn-gput1000.csv",
                 gittins_delta: Positive = 3250.0, placement: PlacementName = "first_fit",
                 consolidate_models: list[str] = ("vgg11", "vgg16", "vgg19", "alexnet"),
                 compaction: bool = True, expansion: bool = True, compaction_threshold: Annotated[int, Range(ge=0, le=1_000_000)] = 10,
                 min_fraction: Annotated[float, Range(gt=0, le=1)] = 0.5, start_floor: bool = False,
                 reserve_retry_s: Positive = 1.0, reserve_timeout_s: Positive = 300.0,
                 retry_s: Positive = 60.0, migrate_to_fewer_machines: bool = False,
                 remove_stragglers: bool = False, straggler_speed: Annotated[float, Range(gt=0, lt=1)] = 1 / 1.2,
                 straggler_check_s: Positive = 10.0):
        super().__init__(thresholds, starvation_knob, gittins, gittins_distribution, gittins_delta, placement,
                         consolidate_models)
        self.compaction, self.expansion = compaction, expansion
        self.n_wait, self.r = int(compaction_threshold), float(min_fraction)
        self.start_floor = start_floor
        self.reserve_retry_s, self.reserve_timeout_s, self.retry_s = reserve_retry_s, reserve_timeout_s, retry_s
        self.migrate = migrate_to_fewer_machines
        self.stragglers, self.straggler_speed, self.straggler_check_s = (remove_stragglers, straggler_speed,
                                                                         straggler_check_s)
        # a straggler is seen as it appears: the engine decides at each change of a job's slowdown
        self.decides_on_slowdown = bool(remove_stragglers)

    def reset(self, view: View) -> None:
        super().reset(view)
        self.size: dict[str, float] = {}         # GPUs of a job the policy resized (else its request)
        self.reserved: dict[str, tuple] = {}     # job -> (allocation, give up at)
        self.speed: dict[str, dict] = {}         # job -> {(gpus, nodes): profiled it/s}
        self.best: dict[str, tuple] = {}         # job -> (t(p*), its packed rates S(p)): _curve
        self._curves: dict = {}                  # speed profile (``Profiled.key``) -> the same: _curve
        self.grown: set[str] = set()             # jobs R2 grew past their request, until reclaimed
        self.shapes: dict[str, int] = {}         # job -> the number of what R1's search reads of it (_shape)
        self._shape_ids: dict[tuple, int] = {}   # what R1's search reads of a job -> its number: _shape
        self._profile_shape: dict = {}           # speed profile (``Profiled.key``) -> its jobs' shape number
        self._job_facts: dict[str, tuple] = {}   # job -> (its GPU role, machines k, task demand, fewest GPUs): _compact
        self.min_task_gpu = float("inf")         # the smallest per-task GPU demand of any job seen
        self._admitted: list = []                # the jobs the latest base plan admitted
        # R1's donors kept across decisions, by the allocations this policy gave (_note, _list):
        self._rich: dict[str, None] = {}         # running elastic jobs holding more than their floor
        self._held: dict[str, dict] = {}         # running elastic job -> its GPU role's tasks per node
        self._busy: dict[str, None] = {}         # of those, the ones changed since they last were seen idle
        self._listed: dict[str, dict] = {}       # donors: held, not busy, outside G0 (-> tasks per node)
        self._by_node: dict[int, dict] = {}      # node -> {donor: its tasks there}
        # R1's search kept across decisions (_search): per shape, per node set, the plan found and
        # the state of those nodes it was found on; per donor, what the search reads of it and
        # the allocation that was read off (_facts)
        self._plans: dict[tuple, dict] = {}
        self._facts: dict[str, tuple] = {}
        # what _best_take reads of each node (_node_state), kept across decisions until it changes:
        # read on the free resources ``_free_seen``; ``_stale``: nodes whose donors changed since
        self._node_states: dict[tuple, tuple] = {}
        self._free_seen: np.ndarray | None = None
        self._seen_bytes: bytes | None = None    # ``_free_seen``'s bytes, while they are known
        self._stale: set[int] = set()
        # the number of each node's last dropped state (``_touch``), and per (shape, donors count)
        # the number at which a search on one machine found no plan on any node (``_search``)
        self._tick = 0
        self._node_tick = np.zeros(view.cluster.num_nodes, dtype=np.int64)
        self._gave_none: dict[tuple, int] = {}
        # the donors' tasks per node for the k > 1 ranking (``_given_now``), and the nodes whose
        # kept states were dropped (``_touch``) since it was last read: only those are read again
        self._given = np.zeros(view.cluster.num_nodes, dtype=np.int64)
        self._given_stale: set[int] = set(range(view.cluster.num_nodes))
        # per shape on k > 1 machines, the node set its last search found no plan on and the tick then
        self._none_on: dict[tuple, tuple] = {}
        # the waiting jobs R1 may start (single-role GPU jobs that do not run), grouped by shape
        # (``_shape``; None: not yet worked out), each group's ranks (``_rank``) sorted, so that R1's
        # walk meets the first job of each shape, not every job (``_walk``); kept as Tiresias's
        # queues change (``_insert``, ``_remove``, ``_started``, ``_preempted``)
        self._groups: dict = {}                  # shape or None -> sorted [rank]
        self._members: dict = {}                 # shape or None -> {rank: job}
        self._where: dict[str, tuple] = {}       # job -> (its group, its rank there)
        # the machines' state R1 reads (free resources, donors, which are up) has a number, raised
        # at each change (``_refresh``); a shape that found no start keeps the number it failed at
        self._epoch = 0
        self._failed_then: dict[tuple, int] = {}
        self._up_seen = b""
        cap = view.cluster.capacity[:, 0]
        self.m = int(cap.max()) if len(cap) else 1
        self.compactions = self.expansions = self.straggler_removals = 0

    # ------------------------------------------------------------------ Tiresias hooks
    def _push_demotion(self, job, now: float) -> None:
        """Demotion time at the GPUs the job holds now (attained service is GPU-seconds, A8)."""
        g = self.size.get(job.view.job_id, job.demand[0])
        if job.queue < len(self.thresholds) and g > 0:
            t = now + max((self.thresholds[job.queue] - job.service) / g, 1e-6)
            heapq.heappush(self.demote_at, (t, self._count(), job, job.version))

    def _arrive(self, arrived) -> None:
        for jv in arrived:
            for role in jv.roles:
                if role.gpu > 0:
                    self.min_task_gpu = min(self.min_task_gpu, role.gpu)
        super()._arrive(arrived)

    def _admit(self, view):
        self._admitted = super()._admit(view)   # the jobs of the latest plan, for _start_admitted
        return self._admitted

    def _started(self, jobs, now: float) -> None:
        for job in jobs:
            self.size.pop(job.view.job_id, None)
            self._ungroup(job)   # it runs: no longer waiting
        super()._started(jobs, now)

    def _preempted(self, jobs, now: float) -> None:
        super()._preempted(jobs, now)
        for job in jobs:   # it waits again (where the queue order did not move it, not grouped yet)
            if job.jid not in self._where:
                self._group(job)

    def _insert(self, job) -> None:
        super()._insert(job)
        if not job.running:
            self._group(job)

    def _remove(self, job) -> None:
        self._ungroup(job)
        super()._remove(job)

    # ------------------------------------------------------------------ waiting jobs by shape
    def _group(self, job, shape=None) -> None:
        """List a waiting job in its shape's group at its rank (queue, key, trace index: Tiresias's
        order); a job R1 cannot start (not a single-role GPU job) is not listed."""
        roles = job.view.roles
        if len(roles) != 1 or roles[0].gpu <= 0:
            return
        if shape is None:
            shape = self.shapes.get(job.jid)
        rank = (job.queue, job.key, job.index)
        self._where[job.jid] = (shape, rank)
        ranks = self._groups.get(shape)
        if ranks is None:
            ranks = self._groups[shape] = []
            self._members[shape] = {}
        insort(ranks, rank)
        self._members[shape][rank] = job

    def _ungroup(self, job) -> None:
        got = self._where.pop(job.jid, None)
        if got is None:
            return
        shape, rank = got
        ranks = self._groups[shape]
        del ranks[bisect_left(ranks, rank)]
        members = self._members[shape]
        del members[rank]
        if not ranks:
            del self._groups[shape], self._members[shape]
            self._failed_then.pop(shape, None)

    def _finish(self, job) -> None:
        for d in (self.size, self.reserved, self.speed, self.best, self.shapes, self._rich, self._held, self._busy,
                  self._facts, self._job_facts):
            d.pop(job.view.job_id, None)
        self._list(job.view.job_id)
        self.grown.discard(job.view.job_id)
        super()._finish(job)

    # ------------------------------------------------------------------ decisions
    def _enqueue(self, job, q: int, key: tuple) -> None:
        super()._enqueue(job, q, key)
        if job.view.job_id in self._held:   # a running job changed queue: a donor only outside G0
            self._list(job.view.job_id)

    def decide(self, view: View) -> Decision:
        for jv in view.stopped:   # a failure stopped it: it holds nothing
            for d in (self._rich, self._held, self._busy):
                d.pop(jv.job_id, None)
            self._list(jv.job_id)
        running = view.running
        for jid in list(self._busy):   # a change ends (the job reconfigures no more): a donor again
            jv = running.get(jid)
            if jv is not None and not jv.reconfiguring:   # (a finished job leaves in _finish)
                del self._busy[jid]
                self._list(jid)
        base = super().decide(view)
        allocs = dict(base.allocations)
        self._wake: float | None = None
        self._elastic(view, allocs)
        for jid, alloc in allocs.items():   # the allocations the view shows at the next decision
            self._note(view, jid, alloc)
        wakeups = [w for w in (base.wakeup, self._wake) if w is not None]
        return Decision(allocs, min(wakeups) if wakeups else None)

    def _note(self, view, jid: str, alloc) -> None:
        """Keep ``_rich`` (the running elastic jobs holding more than their floor, by the
        allocations this policy gave them) as a decision changes an allocation: the donor check
        then looks at these jobs and at the decision's own changes, not at every running job."""
        jv = view.running.get(jid) or view.pending.get(jid)
        role = gpu_role(jv) if alloc and jv is not None else None
        if role is None:
            for d in (self._rich, self._held, self._busy):
                d.pop(jid, None)
        else:
            tasks = self._held[jid] = dict(alloc.get(role.name, {}))
            self._busy[jid] = None   # it may reconfigure: no donor until a decision sees it idle
            if sum(tasks.values()) > self._floor(role):
                self._rich[jid] = None
            else:
                self._rich.pop(jid, None)
        self._list(jid)

    def _list(self, jid: str) -> None:
        """List ``jid`` in ``_by_node`` if it is a donor at the view's allocations (held, seen not
        reconfiguring since its last change, outside G0), else take it out."""
        by_node = self._by_node
        old = self._listed.pop(jid, None)
        if old is not None:
            self._stale.update(old)
            for n in old:
                d = by_node[n]
                del d[jid]
                if not d:
                    del by_node[n]
        tasks = self._held.get(jid)
        job = self.jobs.get(jid)
        if tasks is not None and jid not in self._busy and job is not None and job.queue != 0:
            self._listed[jid] = tasks
            self._stale.update(tasks)
            for n, c in tasks.items():
                by_node.setdefault(n, {})[jid] = c

    def _later(self, seconds: float) -> None:
        self._wake = seconds if self._wake is None else min(self._wake, seconds)

    def _elastic(self, view: View, allocs: dict) -> None:
        now = view.now
        free = view.cluster.free_copy()
        planned = Planned(view.running)           # running jobs' allocations after this decision
        for jid, alloc in allocs.items():          # the base plan's stops and starts
            jv = view.running.get(jid) or view.pending[jid]
            if jid in view.running:
                release(free, jv)
            if alloc:
                _take(free, jv, alloc)
                planned[jid] = {r: dict(t) for r, t in alloc.items()}
            else:
                planned.pop(jid)
        self._start_reserved(view, allocs, free, planned)
        self._start_admitted(view, allocs, free, planned)
        self._dropped: set[str] = set()           # jobs that dropped a straggler in this decision
        if self.stragglers:
            self._remove_stragglers(view, allocs, planned)
        # waiting: pending jobs the decision has not started (every pending job is one of self.jobs)
        waiting = len(view.pending) - sum(1 for jid in allocs if jid in view.pending)
        if waiting:
            if self._reclaim(view, allocs, planned):
                self._later(self.reserve_retry_s)   # place the admitted jobs once those GPUs are free
            if self.compaction and waiting > self.n_wait:
                self._donor_cache = None   # donors per node, until a compaction shrinks one
                self._donor_room = None    # whether one of them is above its floor (the same span)
                self._idle_room: dict = {}  # per task demand: the tasks that fit each node (until free changes)
                up = view.cluster.up.tobytes()
                if up != self._up_seen:   # a node that came up or went down is an option or none
                    self._touch(range(len(free)))
                if self._refresh(free) or up != self._up_seen or allocs:
                    self._epoch += 1   # a machine changed (or may have: the decision changed allocations)
                    self._up_seen = up
                self._failed: set = set()   # shapes of jobs that found no start (the same span)
                self._walk(view, allocs, free, planned)
        elif self.expansion and not self.reserved:
            self._expand(view, allocs, free, planned)
        if self.migrate and not waiting:
            self._migrate(view, allocs, free, planned)
        if self.reserved:
            self._later(self.reserve_retry_s)

    def _walk(self, view, allocs, free, planned) -> None:
        """R1 over the waiting jobs in priority order (queue, key, index: ``_rank``), one shape at a
        time: the next job looked at is the first, past the last one looked at, of the shapes that
        have not found a start since the state last changed. A job of such a shape would find none
        either (``_compact`` returns at its shape, or before it on the idle GPUs alone, which its
        shape fixes), so the walk steps over whole shapes rather than over their jobs, and ends
        once every shape present has failed. A compaction changes the state: every shape may try
        again from the job after it. Jobs whose shape is not worked out yet (group None) are
        looked at one by one, as R1 would, and join their shape's group once ``_compact`` works it
        out (it returns before when the idle GPUs alone rule the job out: the shape's efficiency
        curve costs a speed estimate per GPU count, worked out only when needed)."""
        if self._nothing_to_take(view, free, allocs, planned):
            return   # it holds until a compaction: the walk would end at its first job R1 may start
        # (it is looked at again after each compaction, not before each job: between two it holds)
        pending, reserved, groups, failed = view.pending, self.reserved, self._groups, self._failed
        pos = None   # the rank of the last job looked at
        dropped = set()   # shapes that found no start in this state (those of earlier decisions never enter)
        heap = self._heads()
        while heap:
            rank, _, shape = heapq.heappop(heap)
            if shape in dropped or shape in failed:
                continue
            ranks = groups.get(shape)
            if ranks is None:
                continue
            i = bisect_right(ranks, pos) if pos is not None else 0
            if i == len(ranks):
                continue
            if ranks[i] != rank:   # the group changed since the entry was made: its next job
                heapq.heappush(heap, (ranks[i], shape is None, shape))
                continue
            job = self._members[shape][rank]
            pos = rank
            group = shape   # the group popped, whose next job goes back on the heap
            jid = job.jid
            if jid in pending and jid not in allocs and jid not in reserved and shape not in failed:
                if shape is not None and self._kept_none(job, shape):   # as _compact would find: no start
                    dropped.add(shape)
                    self._failed_then[shape] = self._epoch
                    continue   # (its group is dropped: no next job of it goes back on the heap)
                done = self.compactions
                self._compact(view, job, allocs, free, planned)
                if shape is None:   # _compact works its shape out (unless it returns before): it joins that group
                    shape = self.shapes.get(jid)
                    if shape is not None and jid in self._where:
                        self._ungroup(job)
                        self._group(job, shape)
                if self.compactions != done:   # the state changed: every shape tries again
                    if self._nothing_to_take(view, free, allocs, planned):
                        return   # (it changes only at a compaction: looked at after each)
                    dropped.clear()
                    heap = []
                    for s, r in groups.items():
                        i = bisect_right(r, pos)
                        if i < len(r):
                            heap.append((r[i], s is None, s))
                    heapq.heapify(heap)
                    continue
                if shape is not None:   # found no start: nor will the shape's other jobs now
                    dropped.add(shape)
                    self._failed_then[shape] = self._epoch
            ranks = groups.get(group)
            if ranks is not None and group not in dropped:
                i = bisect_right(ranks, pos)
                if i < len(ranks):
                    heapq.heappush(heap, (ranks[i], group is None, group))

    def _kept_none(self, job, shape) -> bool:
        """Whether a k > 1 shape's kept failure (``_none_on``) answers ``job`` now, as ``_search``'s
        first check would: the ranking made in this span (kept per task demand and k until a
        compaction) gives the set the shape found none on, and none of its nodes changed since.
        The walk then passes the shape over without entering ``_compact`` (most k > 1 shapes at
        most decisions)."""
        got = self._none_on.get(shape)
        facts = self._job_facts.get(job.jid)
        if got is None or facts is None:
            return False
        options = self._idle_room.get((tuple(facts[2]), facts[1]))
        if options is None or options[0] != got[0]:
            return False
        tick, then = self._node_tick, got[1]
        return all(tick[n] <= then for n in got[0])

    def _heads(self) -> list:
        """The walk's first heap: each group's first job, less the shapes present that found no
        start on the machines' state as it is now (no machine changed since, ``_epoch``): they
        find none at this decision either, so the walk passes them over without a look."""
        epoch, then = self._epoch, self._failed_then
        heap = [(ranks[0], shape is None, shape) for shape, ranks in self._groups.items() if then.get(shape) != epoch]
        heapq.heapify(heap)
        return heap

    def _nothing_to_take(self, view, free, allocs, planned) -> bool:
        """No donor above its floor and no up node with a free GPU for the smallest per-task GPU
        demand seen: no waiting job can start by R1, so the rest of the walk would change nothing."""
        if self._donor_room is None:
            self._donor_room = self._donor_above_floor(view, allocs, planned)
        if self._donor_room:
            return False
        room = self._idle_room.get("gpu")
        if room is None:
            gpus = free[view.cluster.up, 0]
            room = self._idle_room["gpu"] = bool(len(gpus)) and float(gpus.max()) + EPS >= self.min_task_gpu
        return not room

    # ------------------------------------------------------------------ reservations
    def _start_reserved(self, view, allocs, free, planned) -> None:
        for jid, (alloc, until) in list(self.reserved.items()):
            if jid not in view.pending or jid in allocs:
                del self.reserved[jid]
                continue
            jv = view.pending[jid]
            if _fits(free, jv, alloc):
                _take(free, jv, alloc)
                allocs[jid] = alloc
                planned[jid] = alloc
                del self.reserved[jid]
                job = self.jobs[jid]
                self._started([job], view.now)
                self._resized(job, alloc, view.now)
            elif view.now >= until:   # the GPUs never came free (another job took them): wait again
                del self.reserved[jid]

    def _start_admitted(self, view, allocs, free, planned) -> None:
        """Jobs the last base plan admitted but could not place (GPUs held by grown jobs or still
        exiting) start as soon as they fit, at their requested size."""
        pending = view.pending
        # only the latest plan marks jobs (mark == plan); those that wait are few, taken in pending order
        due = {job.view.job_id for job in self._admitted if not job.running and job.mark == self.plan}
        due = [jid for jid in due if jid in pending and jid not in allocs and jid not in self.reserved]
        if len(due) > 1:
            keep = set(due)
            due = [jid for jid in pending if jid in keep]
        for jid in due:
            job = self.jobs.get(jid)
            if job is None:
                continue
            alloc = self._placed(job, free, view)
            if alloc is not None:
                allocs[jid] = planned[jid] = alloc
                self._started([job], view.now)

    # ------------------------------------------------------------------ reclaim (A10)
    def _reclaim(self, view, allocs, planned) -> bool:
        """While jobs wait, jobs grown past their request shrink back to it. Only jobs R2 grew past
        their request can be (``grown``); with none, the running jobs need no look."""
        changed = False
        if not self.grown:
            return changed
        for jid, jv in view.running.items():
            if jid in allocs or jid not in planned:
                continue
            role = gpu_role(jv)
            if role is None or task_counts(jv.allocation).get(role.name, 0) <= role.count:
                continue
            if jv.reconfiguring:
                self._later(self.retry_s)
                continue
            alloc = shrink(jv.allocation, {role.name: role.count})
            self.grown.discard(jid)
            allocs[jid] = planned[jid] = alloc
            self._resized(self.jobs[jid], alloc, view.now)
            changed = True
        return changed

    # ------------------------------------------------------------------ R1: compaction
    def _compact(self, view, job, allocs, free, planned) -> None:
        jv = job.view
        facts = self._job_facts.get(job.jid)
        if facts is None:   # what R1 reads of the job's request, the same at every look
            roles = jv.roles
            if len(roles) != 1 or roles[0].gpu <= 0:
                return
            role = roles[0]
            k = max(1, math.ceil(role.count / self.m))   # footnote 6: at most ceil(p_i/m) machines
            facts = self._job_facts[job.jid] = (role, k, role.demand, self._lowest(role))
        role, k, demand, lo = facts
        if self._donor_room is None:
            self._donor_room = self._donor_above_floor(view, allocs, planned)
        hit = self._idle_room.get(demand)
        idle, top = hit if hit is not None else self._idle(view, free, demand)
        if not self._donor_room and sum(top[:k]) < lo:
            # every donor at its floor: only idle GPUs can be had, on at most k machines, and the
            # k roomiest up machines hold fewer than the fewest GPUs the job may start on
            return
        shape = self._shape(jv, role, lo)
        if shape in self._failed:
            return   # a job of the same shape found no start in this same state
        if not self._donor_room and k == 1:
            # every donor at its floor gives nothing: on one machine only idle GPUs count, so
            # the donors need not be listed (on k > 1 machines their GPUs rank the machines)
            per_node = NO_DONORS
        else:
            if self._donor_cache is None:
                self._donor_cache = self._donors(view, allocs, planned)
            per_node = self._donor_cache
        best = self._search(view, jv, role, shape, k, idle, per_node, free, planned)
        if best is None:
            self._failed.add(shape)
            return
        _, alloc, victims = best
        for vid, node, d in victims:
            vjv = view.running[vid]
            cur = planned[vid]
            self._stale.update(cur.get(vjv.roles[0].name, ()))   # it holds fewer GPUs: a donor elsewhere too
            new = {r: dict(t) for r, t in cur.items()}
            vrole = vjv.roles[0].name
            new[vrole][node] -= d
            if not new[vrole][node]:
                del new[vrole][node]
            allocs[vid] = planned[vid] = new
            self._resized(self.jobs[vid], new, view.now)
        if victims:
            self._donor_cache = self._donor_room = None
        _take(free, jv, alloc)
        self._idle_room.clear()     # the free GPUs (and perhaps the donors) changed: look anew
        self._refresh(free, alloc[role.name])   # the take changed only the job's nodes
        self._epoch += 1
        self._failed.clear()
        self.compactions += 1
        if not victims:             # idle GPUs only: it starts now
            allocs[jv.job_id] = planned[jv.job_id] = alloc
            self._started([job], view.now)
            self._resized(job, alloc, view.now)
            return
        # the victims' GPUs come free once their leaving workers exit: hold them for the job
        self.reserved[jv.job_id] = (alloc, view.now + self.reserve_timeout_s)

    def _donors(self, view, allocs, planned) -> "Overlay":
        """Per node, the running jobs that may give GPUs: elastic, outside G0, not reconfiguring,
        still running after the base plan; {job id: tasks on the node}. The kept lists
        (``_by_node``) with this decision's changes (``allocs``) laid over the nodes they touch."""
        by_node, over = self._by_node, {}

        def node(n):
            d = over.get(n)
            if d is None:
                d = over[n] = dict(by_node.get(n, {}))
            return d
        for jid in allocs:
            for n in self._listed.get(jid, ()):
                node(n).pop(jid, None)
            jv = view.running.get(jid)
            if jv is None or jid not in planned or jv.reconfiguring:
                continue
            job = self.jobs.get(jid)
            role = gpu_role(jv)
            if job is None or job.queue == 0 or role is None:
                continue
            for n, c in planned[jid].get(role.name, {}).items():
                node(n)[jid] = c
        states = self._node_states
        for n in over:   # their donors differ from the kept lists' now, and again once the overlay is gone
            states.pop((n, True), None)
        self._touch(over)
        self._stale.update(over)
        return Overlay(by_node, over)

    def _idle(self, view, free, demand) -> tuple:
        """Tasks of ``demand`` that fit each node now, and the counts of the up nodes, largest
        first. Kept per task demand until a compaction takes GPUs: under a deep overload most
        waiting jobs find nothing to take, and this spares each of them the per-node search."""
        key = tuple(demand)   # (a role's demand is a tuple: _compact looks it up by itself)
        hit = self._idle_room.get(key)
        if hit is None:
            idle = tasks_per_node(free, demand)
            hit = self._idle_room[key] = (idle, sorted(idle[view.cluster.up].tolist(), reverse=True))
        return hit

    def _options(self, view, free, demand, k, idle, per_node, planned) -> list:
        """The node sets R1 tries for a job on at most k machines: each up node with an idle GPU or
        a donor when k = 1, else the k with the most GPUs to give (idle plus donors'). They depend
        on the state alone, so they are kept per (demand, k) with the idle counts."""
        key = (tuple(demand), k)
        options = self._idle_room.get(key)
        if options is not None:
            return options
        up = view.cluster.up
        options = []
        if k == 1:   # the up nodes with an idle task's room, and those with a donor
            nodes = set(np.flatnonzero(up & (idle > 0)).tolist())
            nodes.update(n for n in per_node.nodes() if up[n] and per_node.get(n))
            options = [[n] for n in sorted(nodes)]
        else:   # the k up nodes with the most to give, ties to the lower index (a stable sort)
            cand = self._idle_room.get("up")
            if cand is None:
                cand = self._idle_room["up"] = np.flatnonzero(up)
            avail = idle[cand] + self._given_now(view, per_node, len(free))[cand]
            options.append(cand[np.argsort(-avail, kind="stable")[:k]].tolist())
        self._idle_room[key] = options
        return options

    def _given_now(self, view, per_node, nodes: int) -> np.ndarray:
        """The donors' tasks on each of the ``nodes`` up nodes (the total of its state, ``_node_state``), kept per
        node across decisions and read again only on the up nodes whose state was dropped since
        (``_given_stale``, filled by ``_touch``): a compaction or a decision changes a few machines,
        not every one. The total is summed from the donor lists themselves: building the whole
        state (each donor's facts) of every such node cost more than the ranking needs, and a
        kept state's total is that same sum (it is dropped whenever the node's donors change)."""
        given = self._given
        if len(given) != nodes:
            given = self._given = np.zeros(nodes, dtype=np.int64)
            self._given_stale.update(range(nodes))
        stale = self._given_stale
        if stale:
            up = view.cluster.up
            for n in stale:
                if up[n]:
                    on = per_node.get(n)
                    given[n] = sum(on.values()) if on else 0
            stale.clear()
        return given

    def _search(self, view, jv, role, shape, k, idle, per_node, free, planned):
        """The best of R1's plans on each node set (``_options``), as ``_best_take`` finds them; ties
        go to the earlier set. A set's plan is kept per shape across decisions with the state of
        its nodes it was found on (``_node_state``) and searched again only once one of them
        changed: a decision changes few nodes (a job ended, started or shrank), and the walk
        meets the same shapes at decision after decision. On one machine (k = 1) the plan is the
        best of the nodes' own plans, so a shape that found none on any node (``_gave_none``: the
        ``_tick`` it found none at, per whether donors counted) looks only at the nodes changed
        since (``_node_tick``): every other node's state, and so its kept plan (none), is the
        same, and a node that was not an option then is none now unless it changed. On k > 1
        machines there is one node set; a shape that found no plan on it (``_none_on``: the set
        and the ``_tick`` then) finds none again while the set ranks first and none of its nodes
        changed since, so the set's states are not read."""
        donors = per_node is not NO_DONORS
        if k > 1:
            options = self._options(view, free, role.demand, k, idle, per_node, planned)
            got = self._none_on.get(shape)
            if got is not None and got[0] == options[0]:
                tick, then = self._node_tick, got[1]
                if all(tick[n] <= then for n in got[0]):
                    return None
        else:
            since = self._gave_none.get((shape, donors))
            if since is None:
                options = self._options(view, free, role.demand, k, idle, per_node, planned)
            else:   # only the nodes changed since the shape last found nothing may give a plan
                up = view.cluster.up
                options = [[n] for n in np.flatnonzero(self._node_tick > since).tolist()
                           if up[n] and (idle[n] > 0 or per_node.get(n))]
        memo = self._plans.get(shape)
        if memo is None:
            memo = self._plans[shape] = {}
        elif len(memo) > MEMO_SETS:   # node sets of k > 1 machines vary: keep the memory bounded
            memo.clear()
        best = None
        states = self._node_states
        for nodes in options:
            key = tuple(nodes)
            state = tuple(states.get((n, donors)) or self._node_state(view, n, donors, per_node, free, planned)
                          for n in nodes)
            hit = memo.get(key)
            if hit is not None and hit[0] == state:
                plan = hit[1]
            else:
                plan = self._best_take(view, jv, role, nodes, idle, per_node, free, planned)
                if plan is not None:   # kept without the role's name: jobs of one shape may name it otherwise
                    plan = (plan[0], plan[1][role.name], tuple(plan[2]))
                memo[key] = (state, plan)
            if plan is not None and (best is None or plan[0] > best[0] + GAIN_EPS):
                best = plan
        if best is None:
            if k == 1:
                self._gave_none[(shape, donors)] = self._tick
            else:
                self._none_on[shape] = (options[0], self._tick)
            return None
        return best[0], {role.name: dict(best[1])}, list(best[2])

    def _node_state(self, view, node: int, donors: bool, per_node, free, planned) -> tuple:
        """What ``_best_take`` reads of one node: its free resources and, when the donors count
        (``donors``: ``per_node`` is the donor lists), each donor's tasks there with the GPUs it
        holds and its floor (its efficiency losses follow from those); then the donors' tasks
        there in all. Kept across decisions (``_node_states``) until ``_refresh`` finds the node
        changed, so a decision works out the few nodes it changed."""
        key = (node, donors)
        state = self._node_states.get(key)
        if state is None:
            on = per_node.get(node)
            held = ()
            if on:
                held = tuple((vid, c) + self._facts_of(view, vid, planned)[:2] for vid, c in on.items())
            state = self._node_states[key] = (tuple(free[node].tolist()), held, sum(h[1] for h in held))
        return state

    def _refresh(self, free, nodes=None) -> bool:
        """Drop the kept node states (``_node_state``) that may no longer hold: every state of a node
        whose free resources differ from those they were read on, and the states that read the
        donors of a node whose donors changed since (``_stale``: a donor listed or unlisted there,
        changed by a decision, or laid over by one, ``_donors``). True if any node changed.

        ``nodes``: the only nodes whose free resources may differ from those last seen (a
        compaction's take: the walk changes ``free`` nowhere else), so only their rows are
        compared and kept. Without it (a decision's start: the engine's changes since are not
        known node by node) the whole matrix is compared, at one byte comparison when nothing
        moved (equal bytes are equal values; unequal bytes are compared value by value)."""
        states, seen = self._node_states, self._free_seen
        changed = bool(self._stale)
        if seen is None or seen.shape != free.shape:
            states.clear()
            self._touch(range(len(free)))
            self._free_seen = free.copy()
            self._seen_bytes = self._free_seen.tobytes()
            changed = True
        elif nodes is not None:
            moved = [n for n in nodes if free[n].tolist() != seen[n].tolist()]
            for n in moved:
                seen[n] = free[n]
            changed |= self._drop_moved(moved)
            self._seen_bytes = None   # (seen changed in place: its bytes are read again when needed)
        else:
            now = free.tobytes()
            if now != (self._seen_bytes if self._seen_bytes is not None else seen.tobytes()):
                w = free.shape[1]   # the differing entries' rows, once each, ascending (C order)
                moved = list(dict.fromkeys(i // w for i in np.flatnonzero(free != seen).tolist()))
                changed |= self._drop_moved(moved)
                self._free_seen = free.copy()
            self._seen_bytes = now
        for n in self._stale:
            states.pop((n, True), None)
        self._touch(self._stale)
        self._stale.clear()
        return changed

    def _drop_moved(self, moved: list[int]) -> bool:
        """Drop every kept state of the nodes ``moved`` (their free resources changed) and number
        them (``_touch``); whether there were any."""
        states = self._node_states
        for n in moved:
            states.pop((n, True), None)
            states.pop((n, False), None)
        self._touch(moved)
        return bool(moved)

    def _touch(self, nodes) -> None:
        """Number the nodes' kept states dropped now with a new ``_tick`` (``_node_tick``)."""
        nodes = list(nodes)
        if nodes:
            self._tick += 1
            self._node_tick[nodes] = self._tick
            self._given_stale.update(nodes)

    def _shape(self, jv, role, lo) -> tuple:
        """What R1's search reads of a waiting job: its task demand, request, the fewest GPUs it may
        start on and its efficiency E(p) for p up to the request. Two jobs of one shape fare alike
        in one state, so a shape that found no start is not searched again until the state changes.
        A shape is known by its number (in the order shapes first appear), a cheap key for the
        many maps the walk and the search keep per shape; jobs of one speed profile
        (``Profiled.key``) share it without working it out again."""
        shape = self.shapes.get(jv.job_id)
        if shape is None:
            key = jv.profiled.key   # one speed profile, one role: one shape (role and lo follow from the roles)
            shape = self._profile_shape.get(key) if key is not None else None
            if shape is None:
                effs = tuple(self._eff(jv, p) for p in range(max(lo, 1), role.count + 1))
                facts = (tuple(role.demand), role.count, lo, effs)
                shape = self._shape_ids.setdefault(facts, len(self._shape_ids))
                if key is not None:
                    self._profile_shape[key] = shape
            self.shapes[jv.job_id] = shape
        return shape

    def _donor_above_floor(self, view, allocs, planned) -> bool:
        """Whether a donor (``_donors``) holds more than its floor and a GPU on an up node: R1 can
        take GPUs from it. Only the jobs above their floor at the view's allocations (``_rich``)
        and those this decision changed can be; stops at the first such donor."""
        running = view.running
        for jid in self._rich:
            if jid not in allocs and self._gives(view, running[jid], running[jid].allocation):
                return True
        for jid in allocs:
            if jid in running and jid in planned and self._gives(view, running[jid], planned[jid]):
                return True
        return False

    def _gives(self, view, jv, alloc) -> bool:
        """A running job R1 may shrink (a donor, ``_donors``) that holds more than its floor on
        ``alloc`` and a GPU on an up node."""
        job = self.jobs.get(jv.job_id)
        if job is None or job.queue == 0 or jv.reconfiguring:
            return False
        role = gpu_role(jv)
        if role is None:
            return False
        tasks = alloc.get(role.name, {})
        up = view.cluster.up
        return sum(tasks.values()) > self._floor(role) and any(c > 0 and up[n] for n, c in tasks.items())

    def _lowest(self, role) -> int:
        """The fewest GPUs a waiting job may start on: its minimum if elastic, else its request."""
        lo = role.min_count if role.elastic else role.count
        if self.start_floor:   # the older reading: the QoS floor also gates a pending job's start
            lo = max(lo, math.ceil(self.r * role.count - 1e-9))
        return lo

    def _floor(self, role) -> int:
        """The GPUs a running job keeps when R1 shrinks it: ⌈r·requested⌉, at least its minimum."""
        return max(role.min_count, math.ceil(self.r * role.count - 1e-9))

    def _best_take(self, view, jv, role, nodes, idle, per_node, free, planned):
        """Take GPUs on ``nodes`` one at a time, idle ones first, then from the donor whose
        efficiency drops least; return (gain, allocation, [(victim, node, GPUs)]) at the best p."""
        counts = {}    # victim -> GPUs it would hold
        floor = {}
        heap = []
        left = {}      # (victim, node) -> its tasks there
        loss = {}
        for node in nodes:
            on = per_node.get(node)
            if not on:
                continue
            for vid, c in on.items():
                left[(vid, node)] = c
                if vid not in counts:
                    counts[vid], floor[vid], loss[vid] = self._facts_of(view, vid, planned)
        for (vid, node), c in left.items():
            if counts[vid] > floor[vid] and c > 0:
                heapq.heappush(heap, (loss[vid], vid, node))
        placed = {n: 0 for n in nodes}
        spare = {n: int(idle[n]) for n in nodes}
        taken: dict[tuple, int] = {}
        gain_lost = 0.0
        best = None
        lo = self._lowest(role)
        for p in range(1, role.count + 1):
            node = next((n for n in nodes if spare[n] > 0), None)
            if node is not None:
                spare[node] -= 1
            else:
                while heap:
                    loss, vid, vnode = heapq.heappop(heap)
                    if counts[vid] > floor[vid] and left[(vid, vnode)] > 0:
                        break
                else:
                    break
                gain_lost += loss
                counts[vid] -= 1
                left[(vid, vnode)] -= 1
                taken[(vid, vnode)] = taken.get((vid, vnode), 0) + 1
                node = vnode
                if counts[vid] > floor[vid] and left[(vid, vnode)] > 0:
                    heapq.heappush(heap, (self._loss(view.running[vid], counts[vid]), vid, vnode))
            placed[node] += 1
            if p < lo:
                continue
            gain = self._eff(jv, p) - gain_lost
            if gain > GAIN_EPS and (best is None or gain > best[0] + GAIN_EPS):
                alloc = {role.name: {n: c for n, c in sorted(placed.items()) if c}}
                if self._cpu_mem_fit(view, jv, alloc, free, taken):
                    best = (gain, alloc, [(vid, n, d) for (vid, n), d in taken.items()])
        return best

    def _facts_of(self, view, vid: str, planned) -> tuple:
        """(GPUs it holds after the decision so far, its floor, the efficiency it loses giving one
        up): what ``_best_take`` reads of a donor. They follow from its allocation alone, so they
        are kept with the allocation they were read off (``_facts``) until the donor holds another:
        the allocations the engine keeps are read-only, and a decision's are new dicts."""
        alloc = planned[vid]
        got = self._facts.get(vid)
        if got is not None and got[0] is alloc:
            return got[1]
        vjv = view.running[vid]
        vrole = vjv.roles[0]
        n = sum(alloc.get(vrole.name, {}).values())
        floor = self._floor(vrole)
        facts = (n, floor, (self._loss(vjv, n) if n > floor else None))
        self._facts[vid] = (alloc, facts)
        return facts

    def _cpu_mem_fit(self, view, jv, alloc, free, taken) -> bool:
        """The job's tasks fit each node once the victims' leaving tasks are gone (CPU, memory too)."""
        role = jv.roles[0]
        for node, c in alloc[role.name].items():
            row = free[node].copy()
            for (vid, n), d in taken.items():
                if n == node:
                    vr = view.running[vid].roles[0]
                    row += d * np.asarray(vr.demand)
            if (row + EPS < c * np.asarray(role.demand)).any():
                return False
        return True

    # ------------------------------------------------------------------ R2: expansion
    def _expand(self, view, allocs, free, planned) -> None:
        heap = []
        # the elastic jobs that run after this decision: those running (kept, ``_held``) that the
        # decision leaves as they are, and those it changes or starts (the heap's order is by gain)
        jids = [jid for jid in self._held if jid in planned and jid not in planned.new] + list(planned.new)
        for jid in jids:
            jv = view.running.get(jid) or view.pending[jid]
            role = gpu_role(jv)
            if role is None or jv.reconfiguring or jid in self._dropped:
                continue
            alloc = planned[jid]
            if sum(alloc.get(role.name, {}).values()) >= role.max_count:
                continue
            g = self._grow_gain(view, jv, role, alloc, free)
            if g is not None:
                heapq.heappush(heap, (-g[0], jv.index, jid, g[1]))
        grown: dict[str, dict] = {}
        while heap:
            neg, _, jid, node = heapq.heappop(heap)
            if -neg <= GAIN_EPS:
                break
            jv = view.running.get(jid) or view.pending[jid]
            role = gpu_role(jv)
            alloc = grown.get(jid) or {r: dict(t) for r, t in planned[jid].items()}
            if tasks_per_node(free[node:node + 1], role.demand)[0] < 1:   # taken since: look again
                g = self._grow_gain(view, jv, role, alloc, free)
                if g is not None:
                    heapq.heappush(heap, (-g[0], jv.index, jid, g[1]))
                continue
            alloc[role.name][node] = alloc[role.name].get(node, 0) + 1
            free[node] -= np.asarray(role.demand)
            grown[jid] = alloc
            if sum(alloc[role.name].values()) < role.max_count:
                g = self._grow_gain(view, jv, role, alloc, free)
                if g is not None:
                    heapq.heappush(heap, (-g[0], jv.index, jid, g[1]))
        for jid, alloc in grown.items():
            allocs[jid] = planned[jid] = alloc
            role = gpu_role(view.running.get(jid) or view.pending[jid])
            if sum(alloc[role.name].values()) > role.count:
                self.grown.add(jid)
            self._resized(self.jobs[jid], alloc, view.now)
            self.expansions += 1

    def _grow_gain(self, view, jv, role, alloc, free):
        """(relative speed-up of one more GPU, node) on the best node with room: one the job is
        on first (no new machine), else the one with the most room."""
        fit = tasks_per_node(free, role.demand)
        fit = np.where(view.cluster.up, fit, 0)
        if fit.max(initial=0) < 1:
            return None
        on = [n for n in alloc.get(role.name, {}) if fit[n] > 0]
        node = min(on, key=lambda n: (-fit[n], n)) if on else int(np.argmax(fit))
        cur = self._rate(jv, alloc)
        more = {r: dict(t) for r, t in alloc.items()}
        more[role.name][node] = more[role.name].get(node, 0) + 1
        return ((self._rate(jv, more) - cur) / cur if cur > 0 else 0.0), node

    # ------------------------------------------------------------------ straggler removal (EDL §5.3)
    def _remove_stragglers(self, view, allocs, planned) -> None:
        """A running elastic job whose slowest worker runs below ``straggler_speed`` of the others
        (per-worker step times, ``JobView.slowest_task``) drops that worker: a scale-in by one on
        its node, by the run's mechanism (stop-free: the others keep training). Expansion gives
        the job a healthy worker back once the exit is done. The policy declares
        ``decides_on_slowdown``: the engine decides when a job's slowdown changes, so a straggler
        is seen as it appears; a seen straggler that cannot be dropped yet (its job reconfiguring,
        or changed by this decision) is looked at again ``straggler_check_s`` later. No straggler, no wake-up."""
        for jid, jv in view.running.items():
            role = gpu_role(jv)
            if role is None or jid not in planned:
                continue
            slow = jv.slowest_task
            if slow is None or slow[0] != role.name or slow[2] >= self.straggler_speed:
                continue
            n = sum(planned[jid].get(role.name, {}).values())
            if n <= role.min_count:
                continue
            if jid in allocs or jv.reconfiguring:
                self._later(self.straggler_check_s)
                continue
            new = {r: dict(t) for r, t in planned[jid].items()}
            new[role.name][slow[1]] -= 1
            if not new[role.name][slow[1]]:
                del new[role.name][slow[1]]
            allocs[jid] = planned[jid] = new
            self._resized(self.jobs[jid], new, view.now)
            self._dropped.add(jid)   # not grown back in the same decision: its replacement comes later
            self.straggler_removals += 1

    # ------------------------------------------------------------------ migration (EDL §5.2)
    def _migrate(self, view, allocs, free, planned) -> None:
        """A job spread over more machines than its GPUs need moves onto the fewest that have room."""
        for jid, jv in view.running.items():
            if jid in allocs or jv.reconfiguring or len(jv.roles) != 1 or jv.roles[0].gpu <= 0:
                continue
            role = jv.roles[0]
            alloc = planned[jid]
            n = sum(alloc.get(role.name, {}).values())
            have = len(nodes_of(alloc))
            need = max(1, math.ceil(n / self.m))
            if have <= need:
                continue
            trial = free.copy()
            release(trial, jv)
            fit = np.where(view.cluster.up, tasks_per_node(trial, role.demand), 0)
            order = np.argsort(-fit, kind="stable")[:need]
            if fit[order].sum() < n:
                continue
            new, left = {}, n
            for node in order:
                t = int(min(fit[node], left))
                if t:
                    new[int(node)] = t
                    left -= t
            if len(new) >= have:
                continue
            free[:] = trial
            _take(free, jv, {role.name: new})
            allocs[jid] = planned[jid] = {role.name: new}

    # ------------------------------------------------------------------ speeds
    def _rate(self, jv: JobView, alloc) -> float:
        key = (tuple(sorted((r, tuple(sorted(t.items()))) for r, t in alloc.items())))
        cache = self.speed.setdefault(jv.job_id, {})
        r = cache.get(key)
        if r is None:
            r = cache[key] = jv.profiled.rate(alloc)
        return r

    def _packed_rate(self, jv: JobView, n: int) -> float:
        role = jv.roles[0]
        nodes = max(1, math.ceil(n / self.m))
        cache = self.speed.setdefault(jv.job_id, {})
        key = ("packed", n)
        r = cache.get(key)
        if r is None:
            r = cache[key] = jv.profiled.counts_rate({role.name: n}, nodes)
        return r

    def _curve(self, jv: JobView) -> tuple:
        """(t(p*), [S(0), S(1), .., S(top)]): the job's profiled rate packed on ⌈p/m⌉ machines
        for every p up to its largest size, and the best per-GPU rate among them. Worked out in
        one pass at the job's first E(n) (t(p*) needs every p anyway), with one ``profiled``,
        the same estimates in the same order as one at a time."""
        got = self.best.get(jv.job_id)
        if got is None:
            prof = jv.profiled
            key = prof.key   # jobs of one speed profile share the curve (its roles fix top): worked out once
            got = self._curves.get(key) if key is not None else None
            if got is None:
                role = jv.roles[0]
                top = max(role.max_count, role.count)
                name, m = role.name, self.m
                rates = [0.0] + [prof.counts_rate({name: p}, max(1, math.ceil(p / m))) for p in range(1, top + 1)]
                got = (max(rates[p] / p for p in range(1, top + 1)), rates)
                if key is not None:
                    self._curves[key] = got
            self.best[jv.job_id] = got
        return got

    def _eff(self, jv: JobView, n: int) -> float:
        """E(n) = S(n) / t(p*): n GPUs' summed per-GPU efficiency (EDL §1 fn 1, §6.3)."""
        if n <= 0:
            return 0.0
        best, rates = self._curve(jv)
        if best <= 0:
            return 0.0
        return (rates[n] if n < len(rates) else self._packed_rate(jv, n)) / best

    def _loss(self, jv: JobView, n: int) -> float:
        """Cluster efficiency lost when a job at n GPUs gives one up."""
        return self._eff(jv, n) - self._eff(jv, n - 1)

    def _resized(self, job, alloc, now: float) -> None:
        g = sum(job.view.roles[0].gpu * sum(t.values()) for t in alloc.values())
        self.size[job.view.job_id] = g
        job.version += 1
        if job.running:
            self._push_demotion(job, now)


def _take(free: np.ndarray, jv: JobView, alloc) -> None:
    for role in jv.roles:
        d = np.asarray(role.demand)
        for node, c in alloc.get(role.name, {}).items():
            free[node] -= c * d


def _fits(free: np.ndarray, jv: JobView, alloc) -> bool:
    need = np.zeros_like(free)
    for role in jv.roles:
        d = np.asarray(role.demand)
        for node, c in alloc.get(role.name, {}).items():
            need[node] += c * d
    return bool((need <= free + EPS).all())


class Planned:
    """The running jobs' allocations after a decision: each job's view allocation unless the
    decision changed it (set) or stopped it (pop); a mapping over job ids. Kept as changes over
    the view, so that a decision costs what it changes, not a copy of every running job."""

    def __init__(self, running):
        self.running = running
        self.new: dict = {}
        self.gone: set = set()

    def __contains__(self, jid) -> bool:
        return jid in self.new or (jid in self.running and jid not in self.gone)

    def __getitem__(self, jid):
        alloc = self.new.get(jid)
        if alloc is not None:
            return alloc
        if jid in self.gone:
            raise KeyError(jid)
        return self.running[jid].allocation

    def __setitem__(self, jid, alloc) -> None:
        self.new[jid] = alloc
        self.gone.discard(jid)

    def pop(self, jid) -> None:
        self.new.pop(jid, None)
        self.gone.add(jid)

    def __iter__(self):
        for jid in self.running:
            if jid not in self.gone and jid not in self.new:
                yield jid
        yield from self.new

    def __bool__(self) -> bool:
        return bool(self.new) or any(jid not in self.gone for jid in self.running)


class Overlay:
    """Per node, {donor: tasks}: the kept lists with a decision's changed nodes laid over them
    (read only; ``get`` as a dict's)."""

    def __init__(self, base: dict, over: dict):
        self.base, self.over = base, over

    def get(self, node, default=None):
        d = self.over.get(node)
        if d is None:
            d = self.base.get(node)
        return default if d is None else d

    def nodes(self):
        """The nodes that may have donors (each listed once or more; ``get`` says which do)."""
        return (*self.base, *self.over)


NO_DONORS = Overlay({}, {})   # R1's donors per node when none may give
