"""The users' manual configuration: every job runs at exactly what its owner requested, in
arrival order, wherever it fits (Kubernetes schedules any pod that fits: backfilling), never
resized. The "w/o DLRover" baseline of DLRover-RM §6 (Kubeflow TFJob with the users' own
resources, seed 002) and the TFJob side of DLRover §6.4 (seed 000); a job that fails or runs out
of memory is relaunched at the same configuration.
"""

from __future__ import annotations

from clustersim.policies.base import register
from clustersim.policies.fifo import Fifo
from clustersim.policies.placement import PlacementName


@register
class Manual(Fifo):
    name = "manual"
    tags = frozenset({"multi-resource", "ps"})

    def __init__(self, placement: PlacementName = "spread", backfill: bool = True):
        super().__init__(placement, backfill)
