"""Largest job first (LJF): pending jobs start in decreasing order of the GPUs they request, ties
in arrival order; no preemption. Placing the largest pieces first is the first-fit-decreasing
rule of bin packing (Johnson et al., SIAM J. Comput. 3(4), 1974): it keeps a large job from
waiting behind many small ones that fragment the free GPUs, at the price of small jobs' waits.
"""

from __future__ import annotations

from clustersim.policies.base import Decision, Policy, View, arrival, register
from clustersim.policies.placement import PlacementName, strategy


@register
class LargestJobFirst(Policy):
    """Largest job first: the most GPUs first, no preemption, optional backfill."""

    name = "ljf"

    def __init__(self, placement: PlacementName = "first_fit", backfill: bool = True):
        self.placement = placement
        self.backfill = backfill   # false: a job that does not fit blocks the smaller ones behind it

    def reset(self, view: View) -> None:
        self.place = strategy(self.placement, view.cluster.capacity)

    def decide(self, view: View) -> Decision:
        free = view.cluster.free_copy()
        decision = Decision()
        for job in sorted(view.pending.values(), key=lambda j: (-j.num_gpus, arrival(j))):
            alloc = self.place(free, job.roles, job.requested_counts())
            if alloc is not None:
                decision.allocations[job.job_id] = alloc
            elif not self.backfill:
                break
        return decision
