"""Placement strategies shared by policies: where the tasks of a job go.

Every strategy takes the free-resource matrix a policy plans on (``Cluster.free_copy()``),
the job's roles and the task count wanted per role; it returns an allocation
(``{role: {node: tasks}}``) and deducts it from ``free``, or returns ``None`` and leaves
``free`` untouched when the job does not fit. Roles are placed one after the other, each
on the matrix the previous roles left. Ties between nodes go to the lower index, so every
strategy is deterministic.

- ``first_fit``: nodes in index order, each filled as far as it goes.
- ``consolidate``: fewest nodes. A role that fits on one node goes to the tightest such node
  (least room left over); otherwise nodes are filled from the roomiest down. Tiresias's
  consolidated placement (Gu et al., NSDI'19, §3.3) and Optimus's Theorem 1 (seed 004 §4.2).
- ``spread``: one task at a time to the node with the most room, as Kubernetes' default
  least-requested scoring balances load (the DRF baseline of Optimus, seed 004 §6.1).
- ``best_fit``: nodes with the least room for the role's tasks first, to keep large holes
  for large jobs (the classic bin-packing rule).
- ``align``: nodes whose free resources align best with the task's demand first (the dot
  product of demand and free, each resource scaled by the most any node has free): Tetris's
  packing (Grandl et al., SIGCOMM'14, §3.2).
- ``most_free``: nodes with the most room first, each filled as far as it goes: the Pollux
  simulator's Tiresias (petuum/adaptdl osdi21-artifact, ``simulator/tiresias.py``:
  ``free_gpus.most_common(1)`` until the job is placed).
- ``whole_node``: YARN-style (the Tiresias and ElasticFlow simulators' ``yarn`` scheme): a role
  that fits on one node goes whole on the first node that takes it, never split; a larger role
  takes whole free nodes (every task slot of the node free) and its remainder on one node.
  It needs the cluster's capacity to know which nodes are whole: ``strategy("whole_node",
  capacity)``; policies pass it at reset.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Literal, Mapping, Sequence

import numpy as np

from clustersim.simulator.cluster import EPS, MAX_TASKS_PER_NODE, tasks_per_node
from clustersim.simulator.job import RoleSpec, task_demand

Placement = Callable[[np.ndarray, Sequence[RoleSpec], Mapping[str, int]], "dict | None"]


def _take(free: np.ndarray, role: RoleSpec, placed: dict[int, int]) -> dict[int, int]:
    demand = np.asarray(role.demand)
    for node, t in placed.items():
        free[node] -= t * demand
    return placed


def _fill(free: np.ndarray, role: RoleSpec, count: int, fit: np.ndarray, order: np.ndarray) -> dict[int, int] | None:
    """Fill nodes in ``order``, each with as many tasks as fit, until ``count`` are placed."""
    fit = fit[order]
    cum = np.cumsum(fit)
    if len(cum) == 0 or cum[-1] < count:
        return None
    last = int(np.searchsorted(cum, count))
    take = fit[: last + 1].copy()
    take[last] -= cum[last] - count
    return _take(free, role, {int(order[i]): int(t) for i, t in enumerate(take) if t > 0})


def _first_fit_role(free, role, count) -> dict[int, int] | None:
    """Nodes in index order, each filled as far as it goes: ``tasks_per_node``'s arithmetic, in
    plain Python on the rows of the nodes that may take a task. One numpy comparison finds those
    (a superset: every node whose first needed resource has room for a task, up to rounding);
    the exact test runs per node, so a decision on a big, busy cluster reads a few rows."""
    need = role.needs   # (resource index, amount) of what a task needs
    if not need:   # a demand of nothing: every task fits on the first node
        return {0: count} if len(free) else None
    k0, x0 = need[0]
    # a byte per node, 1 where the first needed resource may have room; the candidates are found in
    # it with bytes.find, one at a time as they are tried (a call of a few hundred instructions;
    # numpy's nonzero and the list of every candidate cost ~6,000 a placement)
    room0 = (free >= x0 * (1.0 - 1e-9) - EPS).tobytes()[k0::3]   # (three resources a row)
    placed, rows, left = {}, [], count
    node = room0.find(1)
    while node != -1:
        row = free[node].tolist()
        per = (row[k0] + EPS) / x0
        for k, x in need:   # the least of them (``min`` written out: the builtin's call costs ~5x the test)
            room = (row[k] + EPS) / x
            if room < per:
                per = room
        fit = MAX_TASKS_PER_NODE if per >= MAX_TASKS_PER_NODE else math.floor(per)
        if fit > 0:
            t = placed[node] = left if left < fit else fit
            rows.append(row)
            left -= t
            if not left:
                break
        node = room0.find(1, node + 1)
    if left:
        return None
    for (node, t), row in zip(placed.items(), rows):   # the rows read are the free values: deduct from them
        for k, x in need:
            free[node, k] = row[k] - t * x
    return placed


def _consolidate_role(free, role, count) -> dict[int, int] | None:
    fit = tasks_per_node(free, role.demand)
    single = np.flatnonzero(fit >= count)
    if len(single):  # the tightest node that takes the whole role
        node = int(single[np.argmin(fit[single])])
        return _take(free, role, {node: count})
    return _fill(free, role, count, fit, np.argsort(-fit, kind="stable"))


def _best_fit_role(free, role, count) -> dict[int, int] | None:
    fit = tasks_per_node(free, role.demand)
    order = np.argsort(fit, kind="stable")
    return _fill(free, role, count, fit, order[fit[order] > 0])


def _spread_role(free, role, count) -> dict[int, int] | None:
    fit = tasks_per_node(free, role.demand)
    if fit.sum() < count:
        return None
    heap = [(-f, i) for i, f in enumerate(fit.tolist()) if f > 0]
    heapq.heapify(heap)
    placed: dict[int, int] = {}
    for _ in range(count):  # water-filling: each task to the node with the most room left
        f, node = heapq.heappop(heap)
        placed[node] = placed.get(node, 0) + 1
        if f < -1:
            heapq.heappush(heap, (f + 1, node))
    return _take(free, role, dict(sorted(placed.items())))


def _align_role(free, role, count) -> dict[int, int] | None:
    """Nodes by alignment score, highest first (ties: the lower index), each filled as far as it
    goes. Only the nodes whose first needed resource may have room for a task (``_first_fit_role``'s
    superset) are ordered, and the exact count, ``tasks_per_node``'s arithmetic, runs per node in
    that order until the role is placed: most roles take the best node alone, found by an argmax.
    The scores are the whole matrix's product: numpy's matmul rounds a row differently with the
    matrix's size and the row's place, so no row is scored on its own, except where a task needs
    one resource: every other term of the product is then a zero, and each score is exactly the
    one rounded product of that column and its weight, however the matmul sums."""
    need = role.needs
    if not need:   # a demand of nothing: every score is 0, so the first node takes every task
        return {0: count} if len(free) else None
    k0, x0 = need[0]
    col = free[:, k0]
    cand = (col >= x0 * (1.0 - 1e-9) - EPS).nonzero()[0]
    if not len(cand):
        return None
    if len(need) == 1:   # the weight: the demand over the most any node has free, or over 1 if none has any
        most = np.maximum.reduce(col)   # ``col.max()`` without its Python wrapper
        top = col[cand] * (x0 / most if most > 0 else x0)
    else:
        scale = np.maximum.reduce(free, axis=0)
        top = (free @ (np.asarray(role.demand) / np.where(scale > 0, scale, 1.0)))[cand]
    best = int(cand[top.argmax()])   # the first of the highest: where the order below starts
    placed = _fill_rows(free, need, count, (best,))
    if placed is not None:   # the best node takes the whole role (most placements)
        return placed
    # a stable sort of the candidates (in index order) keeps the whole order's ties: the lower index
    return _fill_rows(free, need, count, cand[(-top).argsort(kind="stable")].tolist())


def _fill_rows(free, need, count, order) -> dict[int, int] | None:
    """Fill the nodes in ``order``, each with as many tasks as fit, until ``count`` are placed:
    ``tasks_per_node``'s count and ``_take``'s deduction in plain Python on the rows read (the
    same IEEE operations: a floor of the least ``(free + EPS) / amount``, capped; ``free - t x
    amount``), so that a placement reads only the rows it tries. ``None``, ``free`` untouched,
    when the nodes in ``order`` cannot take ``count`` tasks."""
    k0, x0 = need[0]
    placed, rows, left = {}, [], count
    for node in order:
        row = free[node].tolist()
        per = (row[k0] + EPS) / x0
        for k, x in need:   # the least of them (``min`` written out: the builtin's call costs ~5x the test)
            room = (row[k] + EPS) / x
            if room < per:
                per = room
        fit = MAX_TASKS_PER_NODE if per >= MAX_TASKS_PER_NODE else math.floor(per)
        if fit > 0:
            t = placed[node] = left if left < fit else fit
            rows.append(row)
            left -= t
            if not left:
                break
    if left:
        return None
    for (node, t), row in zip(placed.items(), rows):   # the rows read are the free values: deduct from them
        for k, x in need:
            free[node, k] = row[k] - t * x
    return placed


def _per_role(place_role) -> Placement:
    def place(free: np.ndarray, roles: Sequence[RoleSpec], counts: Mapping[str, int]) -> dict | None:
        backup = free.copy() if len(roles) > 1 else None
        alloc = {}
        for role in roles:
            n = counts.get(role.name, 0)
            if n == 0:
                continue
            placed = place_role(free, role, n)
            if placed is None:
                if backup is not None:
                    free[:] = backup
                return None
            alloc[role.name] = placed
        return alloc
    place.__name__ = place_role.__name__.strip("_").removesuffix("_role")
    return place


def _most_free_role(free, role, count) -> dict[int, int] | None:
    fit = tasks_per_node(free, role.demand)
    return _fill(free, role, count, fit, np.argsort(-fit, kind="stable"))


def whole_node(capacity: np.ndarray) -> Placement:
    """The YARN-style strategy on a cluster of ``capacity`` (see the module docstring)."""
    capacity = np.asarray(capacity, dtype=np.float64)

    def _whole_node_role(free, role, count) -> dict[int, int] | None:
        fit = tasks_per_node(free, role.demand)
        one = np.flatnonzero(fit >= count)
        if len(one):
            return _take(free, role, {int(one[0]): count})
        slots = tasks_per_node(capacity, role.demand)
        whole = np.flatnonzero((fit == slots) & (slots > 0))     # nodes this role would have all of
        placed, need = {}, count
        for node in whole:
            if need == 0 or need < slots[node]:
                break
            placed[int(node)] = int(slots[node])
            need -= int(slots[node])
        if need:   # the remainder on one node (lowest index) that takes it, not already used
            rest = [int(n) for n in np.flatnonzero(fit >= need) if int(n) not in placed]
            if not rest:
                return None
            placed[rest[0]] = need
        return _take(free, role, dict(sorted(placed.items())))

    _whole_node_role.__name__ = "_whole_node_role"
    return _per_role(_whole_node_role)


first_fit = _per_role(_first_fit_role)
most_free = _per_role(_most_free_role)
consolidate = _per_role(_consolidate_role)
spread = _per_role(_spread_role)
best_fit = _per_role(_best_fit_role)
align = _per_role(_align_role)

STRATEGIES: dict[str, Placement] = {"first_fit": first_fit, "consolidate": consolidate, "spread": spread,
                                    "best_fit": best_fit, "align": align, "most_free": most_free,
                                    "whole_node": whole_node}
NEEDS_CAPACITY = {"whole_node"}
_NO_NODES = np.zeros((0, 3))      # a stand-in capacity to check a name before the cluster is known   # strategies made for one cluster: STRATEGIES holds their factory


PlacementName = Literal["first_fit", "best_fit", "consolidate", "spread", "align", "most_free", "whole_node"]
# the strategies a policy that picks its strategy before it knows the cluster may use (all but whole_node)
PlacementAnyCluster = Literal["first_fit", "best_fit", "consolidate", "spread", "align", "most_free"]


def strategy(name: str, capacity: np.ndarray | None = None) -> Placement:
    """The strategy called ``name``; ``whole_node`` needs the cluster's ``capacity``."""
    if name not in STRATEGIES:
        raise KeyError(f"unknown placement {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    if name in NEEDS_CAPACITY:
        if capacity is None:
            raise ValueError(f"placement {name!r} needs the cluster's capacity: this policy does not support it")
        return STRATEGIES[name](capacity)
    return STRATEGIES[name]


def min_nodes(capacity: np.ndarray, roles: Sequence[RoleSpec], counts: Mapping[str, int]) -> int:
    """The nodes ``consolidate`` uses for the job on an empty cluster of ``capacity`` rows: the bar a
    consolidated placement must meet. Being the strategy's own result on the empty cluster, the bar
    can always be met once enough nodes are free, on mixed node sizes and multi-role jobs too."""
    alloc = consolidate(np.array(capacity, dtype=np.float64), roles, counts)
    if alloc is None:
        return 1 << 30
    return len({n for nodes in alloc.values() for n, c in nodes.items() if c})


def held_rows(job) -> dict[int, list[float]]:
    """What a running job (a JobView) holds on each of its nodes: (GPUs, cores, GB), summed over
    its roles in role order. Only the touched rows: a whole-matrix scratch array costs more than
    the job's few nodes."""
    need: dict[int, list[float]] = {}
    alloc = job.allocation
    for role in job.roles:
        tasks = alloc.get(role.name)
        if not tasks:
            continue
        g, c, m = task_demand(role, tasks)
        for node, t in tasks.items():
            row = need.get(node)
            if row is None:
                need[node] = [t * g, t * c, t * m]
            else:
                row[0] += t * g
                row[1] += t * c
                row[2] += t * m
    return need


def release(free: np.ndarray, job) -> dict[int, list[float]]:
    """Give the resources a running job (a JobView) holds back to ``free``, to plan as if it stopped.
    Returns what it held per node, for ``keep_in_place`` to take back without working it out again."""
    held = held_rows(job)
    release_rows(free, [held])
    return held


def keep_in_place(free: np.ndarray, job, held: dict[int, list[float]] | None = None) -> bool:
    """Take a running job's current nodes back out of ``free`` if they are all still there.
    ``held``: what ``release`` returned for the job, if it was released on this matrix."""
    return keep_rows(free, [held_rows(job) if held is None else held])[0]


def release_rows(free: np.ndarray, held: list[dict]) -> None:
    """``release`` of several jobs, given what each holds (``held_rows``), in order: per node the
    same float additions in the same order, on the node's row read once and written once however
    many of the jobs share it. Rows are added as Python floats, not with ``free[node] += row``: the
    same IEEE additions without numpy's cost of turning a short list into an array (a fancy-indexed
    read or write of the few nodes costs more than several single-row ones)."""
    now: dict = {}
    for rows in held:
        for node, row in rows.items():
            f = now.get(node)
            if f is None:
                f = now[node] = free[node].tolist()
            f[0] += row[0]
            f[1] += row[1]
            f[2] += row[2]
    for node, f in now.items():
        free[node] = f


def keep_rows(free: np.ndarray, held: list[dict]) -> list[bool]:
    """``keep_in_place`` of several released jobs, given what each held (``held_rows``), in order:
    whether each is kept, i.e. all it held is still free on its nodes, which it then takes back;
    each node's row read once, when first needed, and written once at the end."""
    now: dict = {}
    kept = []
    for rows in held:
        fits = True
        for node, row in rows.items():
            f = now.get(node)
            if f is None:
                f = now[node] = free[node].tolist()
            if row[0] > f[0] + EPS or row[1] > f[1] + EPS or row[2] > f[2] + EPS:
                fits = False
                break
        if fits:
            for node, row in rows.items():
                f = now[node]
                f[0] -= row[0]
                f[1] -= row[1]
                f[2] -= row[2]
        kept.append(fits)
    for node, f in now.items():
        free[node] = f
    return kept


def shrink(alloc, counts: Mapping[str, int]) -> dict:
    """``alloc`` cut down to ``counts`` tasks per role, dropping tasks from the nodes that hold the
    fewest of the role first (ties: higher index first), so that the job stays consolidated."""
    out = {}
    for role, nodes in alloc.items():
        keep = counts.get(role, 0)
        placed = dict(nodes)
        drop = sum(placed.values()) - keep
        for node in sorted(placed, key=lambda n: (placed[n], -n)):
            if drop <= 0:
                break
            k = min(drop, placed[node])
            placed[node] -= k
            drop -= k
        placed = {n: c for n, c in placed.items() if c > 0}
        if placed:
            out[role] = placed
    return out


def merge(a, b) -> dict:
    """The union of two allocations of the same job."""
    if not a:   # a job placed from nothing (most placements): the union is a copy of ``b``
        return {role: dict(nodes) for role, nodes in b.items()}
    out = {role: dict(nodes) for role, nodes in a.items()}
    for role, nodes in b.items():
        mine = out.setdefault(role, {})
        for node, c in nodes.items():
            mine[node] = mine.get(node, 0) + c
    return out
