"""Throughput models: iterations per second of a job on a given allocation."""

from __future__ import annotations

from typing import Protocol

from simulator.job import Allocation, JobSpec, task_counts


class SpeedModel(Protocol):
    def rate(self, spec: JobSpec, alloc: Allocation, cluster) -> float:
        """Iterations/s of ``spec`` on ``alloc`` (placed on ``cluster``)."""
        ...


def scaling_role(spec: JobSpec) -> str:
    """The role whose task count sets a job's speed: its workers, else its first role."""
    names = [r.name for r in spec.roles]
    return "worker" if "worker" in names else names[0]


class LinearSpeed:
    """Speed proportional to the scaling role's task count, placement-blind.

    At the requested allocation a job runs at ``total_work / duration``, so that a job run
    alone finishes in exactly the duration its trace records.
    """

    def rate(self, spec: JobSpec, alloc: Allocation, cluster=None) -> float:
        role = scaling_role(spec)
        n = task_counts(alloc).get(role, 0)
        if n == 0:
            return 0.0
        return spec.total_work / spec.duration * n / spec.role(role).count
