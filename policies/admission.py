"""Admission by the cluster's totals, shared by the policies that rebuild their plan at every
event (Tiresias, SRTF): jobs are taken in priority order while their requested GPUs, CPU cores
and memory fit what the nodes that are up hold in all (the Tiresias simulator's ``count``
scheme); the admitted jobs are placed on real nodes afterwards.
"""

from __future__ import annotations

from clustersim.simulator.cluster import EPS


def budget(cluster) -> list[float]:
    """GPUs, CPU cores and memory of the nodes that are up, to admit jobs against."""
    return (cluster.up_capacity() + EPS).tolist()


def admit(budget: list[float], demand: tuple[float, float, float]) -> bool:
    """Take ``demand`` out of ``budget`` if all three resources fit."""
    g, c, m = demand
    if g <= budget[0] and c <= budget[1] and m <= budget[2]:
        budget[0] -= g
        budget[1] -= c
        budget[2] -= m
        return True
    return False


class GpuSizes:
    """The GPUs each active job requests, counted: once fewer GPUs are left than the smallest,
    an admission scan can stop."""

    __slots__ = ("_count", "_min")

    def __init__(self) -> None:
        self._count: dict[float, int] = {}
        self._min: float | None = None   # the smallest, while known (None: work it out again)

    def add(self, gpus: float) -> None:
        self._count[gpus] = self._count.get(gpus, 0) + 1
        if self._min is not None and gpus < self._min:
            self._min = gpus

    def remove(self, gpus: float) -> None:
        n = self._count.pop(gpus) - 1
        if n:
            self._count[gpus] = n
        elif gpus == self._min:
            self._min = None

    def smallest(self) -> float:
        if self._min is None:
            if not self._count:
                return 0.0
            self._min = min(self._count)
        return self._min
