"""Placement strategies shared by policies: where the tasks of a job go.

Every strategy takes the free-resource matrix a policy plans on (``Cluster.free_copy()``),
the job's roles and the task count wanted per role; it returns an allocation
(``{role: {node: tasks}}``) and deducts it from ``free``, or returns ``None`` and leaves
``free`` untouched when the job does not fit.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from simulator.cluster import tasks_per_node
from simulator.job import RoleSpec

Placement = Callable[[np.ndarray, Sequence[RoleSpec], Mapping[str, int]], "dict | None"]


def _fill(free: np.ndarray, role: RoleSpec, count: int, order: np.ndarray) -> dict[int, int] | None:
    """Fill nodes in ``order``, each with as many tasks as fit, until ``count`` are placed."""
    fit = tasks_per_node(free[order], role.demand)
    cum = np.cumsum(fit)
    if len(cum) == 0 or cum[-1] < count:
        return None
    last = int(np.searchsorted(cum, count))
    take = fit[: last + 1].copy()
    take[last] -= cum[last] - count
    placed = {int(order[i]): int(t) for i, t in enumerate(take) if t > 0}
    demand = np.asarray(role.demand)
    for node, t in placed.items():
        free[node] -= t * demand
    return placed


def _place(free, roles, counts, order_fn) -> dict | None:
    backup = free.copy() if len(roles) > 1 else None
    alloc = {}
    for role in roles:
        n = counts.get(role.name, 0)
        if n == 0:
            continue
        placed = _fill(free, role, n, order_fn(free, role))
        if placed is None:
            if backup is not None:
                free[:] = backup
            return None
        alloc[role.name] = placed
    return alloc


def first_fit(free: np.ndarray, roles: Sequence[RoleSpec], counts: Mapping[str, int]) -> dict | None:
    """Nodes in index order, each filled as far as it goes."""
    return _place(free, roles, counts, lambda f, r: np.arange(len(f)))


STRATEGIES: dict[str, Placement] = {"first_fit": first_fit}


def strategy(name: str) -> Placement:
    if name not in STRATEGIES:
        raise KeyError(f"unknown placement {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]
