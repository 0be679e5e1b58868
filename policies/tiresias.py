"""Tiresias (Gu et al., NSDI'19): discretized two-dimensional attained service.

A job's attained service is the GPU-seconds it has held (2D: GPUs x time). Jobs sit in
queues Q0..Qk separated by service thresholds; a new job enters Q0 and moves down as its
service crosses each threshold (Tiresias §3.2, 2DAS with priority discretization). At
every arrival, completion and queue change the plan is rebuilt: queues are scanned from Q0, each job runs
at its requested size if it still fits, all-or-nothing, and a running job that no longer fits
is preempted (§3.2, and the Tiresias simulator's ``dlas_sim_jobs``). Smaller jobs further
down may run past a blocked one.

Inside a queue the order is FIFO as the simulator keeps it: jobs that ran in the last plan
stay ahead of those that waited, a preempted job goes to the front of the waiting part, a
newly arrived or demoted job to the back. With ``gittins`` the order is instead the Gittins
index of the job's attained service under a GPU-time distribution (§3.2, Discretized
2D-Gittins; the simulator's ``dlas-gpu-gittins``), highest first.

``queue_order`` chooses the order inside a FIFO queue, where peers differ (docs/policies/tiresias.md):
``clustersim`` (default, above); ``tiresias``, the Tiresias simulator exactly: a job demoted and
preempted in the same decision stays where the demotion put it, at the back of the waiting part
(``dlas_sim_jobs`` appends a demoted job to the next queue, then moves pending jobs behind
running ones keeping their order); ``pollux``, the Pollux simulator's Tiresias (petuum/adaptdl
osdi21-artifact ``simulator/tiresias.py``): a queue is a list in the order jobs entered it
(arrival, demotion, promotion) with no running part, so a job that entered earlier and waits
preempts a later one that runs.

``starvation_knob`` K promotes a waiting job back to Q0 once it has waited K times as long as
it ran since its last promotion (§3.2, PROMOTEKNOB; the simulator's ``solve_starvation``; 0 =
off as in its plain ``dlas-gpu``). Models whose tensor sizes are skewed must be consolidated
on the fewest nodes (§3.3, placement); the others take the configured placement.
"""

from __future__ import annotations

import heapq
from operator import attrgetter
from typing import Annotated, Literal
from bisect import bisect_left, bisect_right, insort

import numpy as np

from clustersim.policies.admission import GpuSizes, admit, budget
from clustersim.policies.base import Decision, JobView, Policy, View, arrival, register
from clustersim.simulator.params import Increasing, Length, NonNegative, Positive, Rule, rules
from clustersim.policies.placement import (_NO_NODES, PlacementName, consolidate, held_rows, keep_rows, min_nodes,
                                          release_rows, strategy)
from clustersim.simulator.errors import ConfigError, TraceError
from clustersim.simulator.job import nodes_of

EPS = 1e-6  # seconds: a threshold reached within a microsecond counts as reached

# Queue thresholds (GPU-s): positive and increasing, one per queue boundary (§3.2); at most 16
# boundaries (choice: the paper uses 1 or 2, and each boundary is a queue the policy keeps)
Thresholds = Annotated[list[Positive], Increasing(), Length(1, 16)]
# the queue-order variants order Tiresias's own FIFO queues; the Gittins index replaces that order
GITTINS_ORDER = Rule(("queue_order", "gittins"), lambda order, gittins: not gittins or order == "clustersim",
                     "queue_order orders the FIFO queues; with gittins: true leave it 'clustersim'")


class _Job:
    __slots__ = ("view", "jid", "index", "demand", "counts", "queue", "key", "offset", "running", "pend_since",
                 "waited", "version", "consolidate", "mark", "jumped", "alloc", "held")

    def __init__(self, view: JobView, consolidate: bool):
        self.view = view
        self.jid = view.job_id   # read in the hot loops: the view's properties are calls,
        self.index = view.index  # and a job's id and trace index never change
        self.demand = view.requested_demand()
        self.counts = view.requested_counts()
        self.queue = 0
        self.key: tuple = ()
        self.offset = 0.0        # attained service at the last promotion
        self.running = False
        self.pend_since = None   # when it last stopped, if it has run before
        self.waited = 0.0        # seconds waited since it first ran (or was last promoted)
        self.version = 0
        self.consolidate = consolidate
        self.mark = -1           # the plan that admitted it last
        self.jumped = -1         # the plan right after its last demotion
        self.alloc = None        # the allocation ``held`` was worked out from (_rows)
        self.held: dict = {}     # what it holds per node at ``alloc``: (GPUs, cores, GB), placement.held_rows

    @property
    def service(self) -> float:
        """GPU-seconds since the last promotion: what the queue thresholds compare."""
        return self.view.attained_service - self.offset


@register
class Tiresias(Policy):
    name = "tiresias"

    @rules(GITTINS_ORDER)
    def __init__(self, thresholds: Thresholds = (3250.0, 7200.0), starvation_knob: NonNegative = 0.0,
                 gittins: bool = False, gittins_distribution: str = "bundled:tiresias/yarn-gput1000.csv",
                 gittins_delta: Positive = 3250.0, placement: PlacementName = "first_fit",
                 consolidate_models: list[str] = ("vgg11", "vgg16", "vgg19", "alexnet"),
                 queue_order: Literal["clustersim", "tiresias", "pollux"] = "clustersim"):
        self.thresholds = [float(t) for t in thresholds]   # checked by their annotation (simulator/params.py)
        self.knob = float(starvation_knob)
        try:
            self.gittins = GittinsIndex.from_file(gittins_distribution, gittins_delta) if gittins else None
        except TraceError:   # names the file, line and field already
            raise
        except (ValueError, OSError) as e:   # a file that is unreadable or holds no samples
            raise ConfigError(f"policy.gittins_distribution: {e}") from None
        self.placement = placement
        self.place = strategy(placement, _NO_NODES)   # checks the name; bound to the cluster at reset
        self.consolidate_models = {m.lower() for m in consolidate_models}
        self.queue_order = queue_order

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)
        self.jobs: dict[str, _Job] = {}
        self.queues: list[list] = [[] for _ in range(len(self.thresholds) + 1)]
        self.running: list[dict[str, _Job]] = [{} for _ in self.queues]  # running jobs, per queue
        self.gpu_sizes = GpuSizes()
        self.demote_at: list = []                # (time, seq, job, version) of running jobs
        self.promote_at: list = []               # the same for waiting jobs, with starvation_knob > 0
        self.seq = 0
        self.front = 0                           # keys below every waiting job: a preempted job's place
        self.plan = 0
        self.need_nodes: dict = {}
        self.up = view.cluster.up.tobytes()      # which nodes are up, to see a change at a glance
        self.budget = budget(view.cluster)       # their totals, while they stay up
        n = len(self.queues)
        # the running part of each FIFO queue (keys (0, ..)): its length and total demand; and how
        # much of it the last plan admitted as one block (the rest was scanned job by job)
        self.count0, self.sum0, self.prefix = [0] * n, [[0.0, 0.0, 0.0] for _ in range(n)], [0] * n
        self.loose: set = set()                  # running jobs outside any running part
        self.tail_sizes = [GpuSizes() for _ in self.queues]  # GPUs requested past each running part

    # ------------------------------------------------------------------ decisions
    def decide(self, view: View) -> Decision:
        now = view.now
        arrived, finished, stopped = view.arrived, view.finished, view.stopped
        changed = bool(arrived or finished)
        up = view.cluster.up.tobytes()
        if up != self.up:
            changed = True
            self.up, self.budget = up, budget(view.cluster)
        for jv in finished:
            self._finish(self.jobs.pop(jv.job_id))
        if arrived:
            self._arrive(arrived)
        for jv in stopped:  # a node failure stopped it: it waits, first of the waiting part
            job = self.jobs.get(jv.job_id)
            if job is not None and job.running:
                changed = True
                self._preempted([job], now)
        due = now + 1e-9
        if self.demote_at and self.demote_at[0][0] <= due or self.promote_at and self.promote_at[0][0] <= due:
            changed |= self._queue_jumps(now)   # a queue change is due
        if not changed:
            return Decision(wakeup=self._next_jump(now))
        allocations = self._replan(view, now)
        return Decision(allocations, self._next_jump(now))

    def _arrive(self, arrived) -> None:
        consolidate_models = self.consolidate_models
        for jv in sorted(arrived, key=arrival):
            job = _Job(jv, (jv.model or "").lower() in consolidate_models)
            self.jobs[jv.job_id] = job
            self.gpu_sizes.add(job.demand[0])
            self._enqueue(job, 0, self._tail())

    def _replan(self, view: View, now: float) -> dict:
        self.plan += 1
        admitted = self._admit(view)
        starting = [j for j in admitted if not j.running]
        if not starting:
            # nothing to place: a running job the plan did not admit would be released and then
            # kept in place on the same free rows (keep_in_place), so nothing stops either
            if self.loose:   # (else no admitted job is outside its running part: none to join)
                self._join_running_part(admitted)
            return {}
        plan = self.plan
        stops = [j for j in self.loose if j.mark != plan] if self.loose else []
        for q, queue in enumerate(self.queues):  # the running part past its block admitted at once
            if self.prefix[q] < self.count0[q]:
                stops.extend(j for _, _, j in queue[self.prefix[q]:self.count0[q]] if j.mark != plan)
        stops.sort(key=_rank)
        started = []
        free = view.cluster.free_copy()
        released = self._release(free, stops) if stops else None
        for job in starting:
            alloc = self._placed(job, free, view)
            if alloc is not None:
                started.append((job, alloc))
        if stops:   # kept: nothing admitted needed its nodes
            stops = [j for j, kept in zip(stops, self._keep(free, stops, released)) if not kept]
        allocations: dict = {j.jid: None for j in stops}
        for job, alloc in started:
            allocations[job.jid] = alloc
        self._started([j for j, _ in started], now)
        if stops:
            self._preempted(stops, now)
        if self.loose:
            self._join_running_part(admitted)
        return allocations

    def _join_running_part(self, admitted: list[_Job]) -> None:
        """Admitted jobs that run join the running part of their FIFO queue, in scan order.
        A new key (0, n) is the largest of the part and below every waiting job's (1, ..): the
        job goes right after the part's ``count0`` jobs, with no search. Called when ``loose``
        is not empty: in a FIFO queue a running job outside its running part is in it."""
        if self.gittins is None and self.queue_order != "pollux":
            queues, count0, sum0, tail_sizes, loose = self.queues, self.count0, self.sum0, self.tail_sizes, self.loose
            for job in admitted:
                if job.running and job.key[0] == 1:
                    q = job.queue
                    queue = queues[q]
                    g, c, m = job.demand
                    del queue[bisect_left(queue, (job.key, job.index), count0[q])]   # _remove, from the part past it
                    tail_sizes[q].remove(g)
                    self.seq += 1   # _count
                    job.key = (0, self.seq)
                    queue.insert(count0[q], (job.key, job.index, job))
                    count0[q] += 1
                    total = sum0[q]
                    total[0] += g
                    total[1] += c
                    total[2] += m
                    loose.discard(job)   # a running part counts it now

    def _admit(self, view: View) -> list[_Job]:
        """Scan the queues in priority order; admit each job whose request fits what is left.
        The jobs of a running part that are admitted as one block are not listed (nor marked)."""
        if self.gittins is not None:
            self._rerank_running()
        left = list(self.budget)
        smallest = self.gpu_sizes.smallest()
        plan = self.plan
        admitted = []
        prefix = self.prefix = [0] * len(self.queues)
        count0, sum0, tail_sizes = self.count0, self.sum0, self.tail_sizes
        for q, queue in enumerate(self.queues):
            if left[0] < smallest:
                break
            if not queue:   # (a scan of nothing admits nothing)
                continue
            # the running part ran in the last plan: admitted whole when it fits, else its longest head
            tail = start = count0[q]
            if tail:
                total = sum0[q]
                if total[0] <= left[0] and total[1] <= left[1] and total[2] <= left[2]:  # admission.admit, inline
                    left[0] -= total[0]
                    left[1] -= total[1]
                    left[2] -= total[2]
                else:
                    start = self._block(q, left)
            prefix[q] = start
            if start < tail and not _scan(queue, start, tail, left, smallest, plan, admitted):
                return admitted
            # past the running part: skipped when its smallest job wants more GPUs than are left
            if tail < len(queue) and left[0] >= tail_sizes[q].smallest() and not _scan(
                    queue, tail, len(queue), left, smallest, plan, admitted):
                return admitted
        return admitted

    def _block(self, q: int, left: list[float]) -> int:
        """Admit the longest head of queue ``q``'s running part (which ran in the last plan) that fits
        ``left`` as one block, as the scan job by job would, when the whole part does not fit;
        return its length. Found from the back: the jobs past it are the ones the scan must look
        at one by one anyway."""
        k = self.count0[q]
        total = self.sum0[q]
        over = [total[r] - left[r] for r in range(3)]
        tail = [0.0, 0.0, 0.0]
        queue = self.queues[q]
        while k and (tail[0] < over[0] or tail[1] < over[1] or tail[2] < over[2]):
            k -= 1
            g, c, m = queue[k][2].demand
            tail[0] += g
            tail[1] += c
            tail[2] += m
        if k:
            admit(left, [total[r] - tail[r] for r in range(3)])
        return k

    def _release(self, free: np.ndarray, stops: list[_Job]):
        """Give what the running jobs ``stops`` hold back to ``free``, to plan as if they stopped; the
        result is what ``_keep`` needs to take it back."""
        held = [_rows(job) for job in stops]
        release_rows(free, held)
        return held

    def _keep(self, free: np.ndarray, stops: list[_Job], released) -> list[bool]:
        """Whether each of ``stops`` (rank order) keeps its nodes once the plan's jobs are placed."""
        return keep_rows(free, released)

    def _placed(self, job: _Job, free: np.ndarray, view: View):
        if not job.consolidate:
            return self.place(free, job.view.roles, job.counts)
        backup = free.copy()
        alloc = consolidate(free, job.view.roles, job.counts)
        if alloc is not None and len(nodes_of(alloc)) > self._min_nodes(job, view):
            free[:] = backup
            return None
        return alloc

    def _min_nodes(self, job: _Job, view: View) -> int:
        key = job.view.roles
        if key not in self.need_nodes:
            self.need_nodes[key] = min_nodes(view.cluster.capacity, job.view.roles, job.counts)
        return self.need_nodes[key]

    # ------------------------------------------------------------------ state changes
    def _started(self, jobs: list[_Job], now: float) -> None:
        running, loose, fifo = self.running, self.loose, self.gittins is None
        for job in jobs:
            job.running = True
            if job.pend_since is not None:
                job.waited += now - job.pend_since
                job.pend_since = None
            job.version += 1
            running[job.queue][job.jid] = job
            if fifo and job.key[0] == 0:   # counted by its running part, else loose (as _insert keeps it)
                loose.discard(job)
            else:
                loose.add(job)
            self._push_demotion(job, now)

    def _preempted(self, jobs: list[_Job], now: float) -> None:
        """Stop ``jobs`` (in priority order); in the FIFO queues they go, in that order, to the
        front of the waiting part, as the simulator moves its pending jobs behind running ones."""
        self.front -= len(jobs)
        for i, job in enumerate(jobs):
            job.running = False
            job.pend_since = now
            job.version += 1
            del self.running[job.queue][job.jid]
            self.loose.discard(job)   # it runs no more
            if self.gittins is None and self.queue_order == "clustersim" or (
                    self.queue_order == "tiresias" and job.jumped != self.plan):
                self._rekey(job, (1, self.front + i))
            self._push_promotion(job, now)

    def _queue_jumps(self, now: float) -> bool:
        moved = False
        while self.demote_at and self.demote_at[0][0] <= now + 1e-9:
            _, _, job, version = heapq.heappop(self.demote_at)
            if version != job.version or not job.running:
                continue
            q = self._level(job)
            if q > job.queue:
                self._remove(job)
                self._enqueue(job, q, self._tail())
                job.jumped = self.plan + 1
                moved = True
            job.version += 1
            self._push_demotion(job, now)
        while self.promote_at and self.promote_at[0][0] <= now + 1e-9:
            _, _, job, version = heapq.heappop(self.promote_at)
            if version != job.version or job.running:
                continue
            job.offset = job.view.attained_service
            job.waited, job.pend_since = 0.0, None  # waiting counts again once it has run
            job.version += 1
            self._remove(job)
            self._enqueue(job, 0, self._tail())
            moved = True
        return moved

    def _level(self, job: _Job) -> int:
        """The queue of a job's service; a threshold less than a microsecond away counts as reached."""
        service = job.view.attained_service - job.offset   # job.service, inline: read at every demotion check
        return bisect_right(self.thresholds, service + job.demand[0] * EPS)

    def _push_demotion(self, job: _Job, now: float) -> None:
        g = job.demand[0]
        if job.queue < len(self.thresholds) and g > 0:
            service = job.view.attained_service - job.offset   # job.service, inline: read at every start
            t = now + max((self.thresholds[job.queue] - service) / g, EPS)
            self.seq += 1   # _count
            heapq.heappush(self.demote_at, (t, self.seq, job, job.version))

    def _push_promotion(self, job: _Job, now: float) -> None:
        if self.knob > 0 and job.queue > 0:
            ran = job.service / job.demand[0] if job.demand[0] > 0 else 0.0
            if ran > 0:
                t = now + max(self.knob * ran - job.waited, EPS)
                heapq.heappush(self.promote_at, (t, self._count(), job, job.version))

    def _next_jump(self, now: float) -> float | None:
        """Seconds to the soonest queue change still due (a demotion of a running job, a promotion
        of a waiting one); entries a later change made stale are dropped on the way."""
        heap = self.demote_at
        while heap and (heap[0][3] != heap[0][2].version or not heap[0][2].running):
            heapq.heappop(heap)
        soonest = heap[0][0] if heap else None
        heap = self.promote_at
        while heap and (heap[0][3] != heap[0][2].version or heap[0][2].running):
            heapq.heappop(heap)
        if heap and (soonest is None or heap[0][0] < soonest):
            soonest = heap[0][0]
        return None if soonest is None else max(soonest - now, 1e-6)

    # ------------------------------------------------------------------ queues
    def _count(self) -> int:
        self.seq += 1
        return self.seq

    def _tail(self) -> tuple:
        self.seq += 1   # _count
        return (1, self.seq)

    def _enqueue(self, job: _Job, q: int, key: tuple) -> None:
        if job.running:
            self.running[q][job.jid] = self.running[job.queue].pop(job.jid)
        job.queue = q
        job.key = self._gittins_key(job) if self.gittins is not None else key
        self._insert(job)

    def _insert(self, job: _Job) -> None:
        """Put ``job`` in its queue by key. In a FIFO queue (keys (0, ..) first) count it in the running
        part or in the part past it; keep ``loose``: the running jobs that no running part counts."""
        q, key = job.queue, job.key
        counted = False
        if self.gittins is None:
            g, c, m = job.demand
            if key[0] == 0:   # into the running part: the queue's first count0 entries
                insort(self.queues[q], (key, job.index, job), 0, self.count0[q])
                counted = True
                self.count0[q] += 1
                total = self.sum0[q]
                total[0] += g
                total[1] += c
                total[2] += m
            else:             # past it
                insort(self.queues[q], (key, job.index, job), self.count0[q])
                self.tail_sizes[q].add(g)
        else:
            insort(self.queues[q], (key, job.index, job))
        if job.running and not counted:
            self.loose.add(job)
        else:
            self.loose.discard(job)

    def _remove(self, job: _Job) -> None:
        """Take ``job`` out of its queue, and out of its FIFO part's counts."""
        q, key = job.queue, job.key
        queue = self.queues[q]
        if self.gittins is None:
            g, c, m = job.demand
            if key[0] == 0:   # the running part: the first count0 entries
                del queue[bisect_left(queue, (key, job.index), 0, self.count0[q])]
                self.count0[q] -= 1
                total = self.sum0[q]
                total[0] -= g
                total[1] -= c
                total[2] -= m
            else:
                del queue[bisect_left(queue, (key, job.index), self.count0[q])]
                self.tail_sizes[q].remove(g)
        else:
            del queue[bisect_left(queue, (key, job.index))]

    def _finish(self, job: _Job) -> None:
        self._remove(job)
        self.running[job.queue].pop(job.jid, None)
        self.loose.discard(job)
        self.gpu_sizes.remove(job.demand[0])
        job.version += 1

    def _rekey(self, job: _Job, key: tuple) -> None:
        self._remove(job)
        job.key = key
        self._insert(job)

    def _rerank_running(self) -> None:
        for job in [j for running in self.running for j in running.values()]:
            key = self._gittins_key(job)
            if key != job.key:
                self._rekey(job, key)

    def _gittins_key(self, job: _Job) -> tuple:
        return (-self.gittins.index(job.service), job.view.submit_time)


# a job's priority: its queue, then its key and trace index there (the queues' own order)
_rank = attrgetter("queue", "key", "index")


def _rows(job: _Job) -> dict:
    """What a running job holds on each of its nodes (``placement.held_rows``), kept on its record while
    its allocation stays the same object: the engine's allocations are read-only, a change is a new
    one. A job a plan did not admit is released and kept at every plan that starts a job (under
    Elastic-Tiresias, each job R1 started below its request), its allocation mostly unchanged."""
    alloc = job.view.allocation
    if alloc is not job.alloc:
        job.alloc, job.held = alloc, held_rows(job.view)
    return job.held


def _scan(queue: list, lo: int, hi: int, left: list[float], smallest: float, plan: int, admitted: list) -> bool:
    """Admit, in order, each job of ``queue[lo:hi]`` whose request fits ``left``; False once fewer
    GPUs are left than the ``smallest`` request (the scan may stop there). By index: a slice would
    copy the queue's rest, and ``islice`` steps through the ``lo`` entries before it (a running part
    of ~100 jobs, where the scan past it mostly stops after a few)."""
    for i in range(lo, hi):
        if left[0] < smallest:
            return False
        job = queue[i][2]
        g, c, m = job.demand
        if g <= left[0] and c <= left[1] and m <= left[2]:  # admission.admit, inline: the hot loop
            left[0] -= g
            left[1] -= c
            left[2] -= m
            job.mark = plan
            admitted.append(job)
    return True


class GittinsIndex:
    """The Gittins index of a job that has attained ``a`` GPU-seconds, for job sizes drawn
    from an empirical distribution (Tiresias §3.2; Gittins' index for M/G/1):

        G(a) = P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a]

    ``delta`` is the service quantum looked ahead (the simulator's static ``gittins_delta``).
    As in the simulator's table, the index is evaluated at the last sample point a job has
    passed, so it changes only when its service crosses a sample; beyond the largest sample
    it is 0.
    """

    def __init__(self, samples, delta: float):
        s = np.sort(np.asarray(samples, dtype=np.float64))
        if len(s) == 0 or not delta > 0:
            raise ValueError("a Gittins index needs at least one sample and a positive delta")
        self.points = s
        grid = np.concatenate(([0.0], s))
        n = len(s)
        prefix = np.concatenate(([0.0], np.cumsum(s)))
        i = np.searchsorted(s, grid, side="right")              # first sample > a
        j = np.searchsorted(s, grid + delta, side="right")      # first sample > a + delta
        alive = n - i
        done = j - i
        spent = (prefix[j] - prefix[i]) - done * grid + delta * (n - j)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where(alive > 0, (done / np.maximum(alive, 1)) / (spent / np.maximum(alive, 1)), 0.0)
        self.table = np.nan_to_num(g).tolist()

    @classmethod
    def from_file(cls, path: str, delta: float) -> "GittinsIndex":
        """Read a one-column CSV of job GPU-times (``duration``), like the simulator's yarn-gput files."""
        from clustersim.traces import resolve
        from clustersim.traces.csvrows import number, rows

        p = resolve(path)
        samples = [number(p, line, "duration", r["duration"], positive=True) for line, r in rows(p, ("duration",))]
        if not samples:
            raise ValueError(f"{p}: no samples in the Gittins distribution")
        return cls(samples, delta)

    def index(self, a: float) -> float:
        return self.table[bisect_right(self.points, a + EPS)]
