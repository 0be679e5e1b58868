"""FIFO: rigid gang scheduling in arrival order, no preemption, no backfilling.

The reference policy. The job at the head of the queue starts as soon as all its tasks fit
(placed by first-fit unless configured otherwise); jobs behind it wait, as in the FIFO
baseline of Tiresias (Gu et al., NSDI'19, §5) and of most cluster simulators.
"""

from __future__ import annotations

from collections import deque

from clustersim.policies.base import Decision, Policy, View, arrival, register
from clustersim.policies.placement import _NO_NODES, PlacementName, strategy
from clustersim.simulator.cluster import EPS


@register
class Fifo(Policy):
    name = "fifo"
    tags = frozenset({"multi-resource", "ps"})
    decides_only_when_waiting = True   # its queue holds exactly the pending jobs: empty, it returns Decision()
    decides_only_when_freed = property(lambda self: not self.backfill)  # arrivals join behind a blocked head

    def __init__(self, placement: PlacementName = "first_fit", backfill: bool = False):
        self.placement = placement
        self.place = strategy(placement, _NO_NODES)   # checks the name; bound to the cluster at reset
        self.backfill = backfill
        self.queue: deque = deque()

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)
        self.queue.clear()

    def decide(self, view: View) -> Decision:
        arrived = view.arrived   # in arrival order from the engine; one alone needs no sort
        self.queue.extend(sorted(arrived, key=arrival) if len(arrived) > 1 else arrived)
        if view.stopped:  # jobs a node failure put back in the queue keep their place
            self.queue = deque(sorted({j.job_id: j for j in (*self.queue, *view.stopped)}.values(), key=arrival))
        decision = Decision()
        if not self.queue:
            return decision
        free = None
        free_gpus = view.cluster.free_gpus
        blocked = []
        while self.queue:
            job = self.queue[0]
            if job.num_gpus <= free_gpus + EPS:
                if free is None:
                    free = view.cluster.free_copy()
                alloc = self.place(free, job.roles, job.requested_counts())
                if alloc is not None:
                    self.queue.popleft()
                    decision.allocations[job.job_id] = alloc
                    free_gpus -= job.num_gpus
                    continue
            if not self.backfill:
                break
            blocked.append(self.queue.popleft())
        self.queue.extendleft(reversed(blocked))
        return decision

    def waits_for_gpus(self) -> float | None:
        """Declared to the engine (Policy.waits_for_gpus): without backfilling, nothing starts
        before the head does, and ``decide`` starts the head only once ``num_gpus <= free_gpus +
        EPS``; arrivals join behind it. With backfilling an arrival may fit a gap: no bound."""
        if self.backfill or not self.queue:
            return None
        return self.queue[0].num_gpus
