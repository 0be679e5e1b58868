"""Nodes, their capacity and what is placed on them.

Capacity and free resources are ``(n_nodes, 3)`` arrays over (GPUs, CPU cores, memory GB).
The cluster never over-commits: ``take`` checks every node it touches.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Annotated, Callable

import numpy as np

from clustersim.simulator.errors import ConfigError, PolicyError
from clustersim.simulator.job import Allocation, JobSpec, task_demand
from clustersim.simulator.params import Count, NonNegative, Range, check_params

RESOURCES = ("gpu", "cpu", "mem")
EPS = 1e-9
MAX_NODES = 100_000  # a cluster larger than this is a config or trace error, refused before any node is built
MAX_TASKS_PER_NODE = 2**31 - 1  # tasks_per_node's cap (a role's count is int32): sums over nodes stay in int64


class CapacityError(PolicyError):
    """An allocation does not fit: names the job, the node and the resource."""


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``count`` identical nodes."""

    count: Count
    gpus: NonNegative
    cpus: NonNegative
    mem: NonNegative
    gpu_type: str = "generic"
    nodes_per_rack: Count = 0  # 0: all nodes of the group in one rack


@dataclass(frozen=True, slots=True)
class AutoNodes:
    """``cluster.auto``: nodes of ``gpus_per_node`` GPUs, as many as ``load_factor`` x the
    trace's mean busy GPUs (and at least its largest job)."""

    gpus_per_node: Annotated[float, Range(gt=0)]
    load_factor: Annotated[float, Range(gt=0)] = 1.2
    cpus_per_node: NonNegative = 0.0
    mem_per_node: NonNegative = 0.0
    gpu_type: str = "generic"
    nodes_per_rack: Count = 0


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """The keys of a cluster config: node groups, or ``auto`` sized from the trace, or both."""

    name: str | None = None
    groups: list[dict] | None = None
    auto: dict | None = None


def check_config(cfg) -> None:
    """A cluster config's keys and types; errors name ``cluster.<key>``."""
    check_params(ClusterConfig, cfg, "cluster.{}")
    for i, g in enumerate(cfg.get("groups") or []):
        check_params(NodeGroup, g, f"cluster.groups[{i}].{{}}")
        missing = [k for k in ("count", "gpus", "cpus", "mem") if k not in g]
        if missing:
            raise ConfigError(f"cluster.groups[{i}].{missing[0]}: required (a group needs count, gpus, cpus, mem)")
    if cfg.get("auto"):
        check_params(AutoNodes, cfg["auto"], "cluster.auto.{}")
        if "gpus_per_node" not in cfg["auto"]:
            raise ConfigError("cluster.auto.gpus_per_node: required")
    elif not cfg.get("groups"):
        raise ConfigError("cluster: give node groups (cluster.groups) or cluster.auto")
    nodes = sum(int(g.get("count", 0)) for g in cfg.get("groups") or [])
    if nodes > MAX_NODES:
        raise ConfigError(f"cluster.groups: {nodes:,} nodes, more than the limit of {MAX_NODES:,}")
    if nodes == 0 and not cfg.get("auto"):
        raise ConfigError("cluster.groups: no nodes (every group's count is 0); a cluster needs at least one")


class Cluster:
    def __init__(self, groups: list[NodeGroup]):
        for g in groups:
            if not isinstance(g.count, numbers.Integral) or isinstance(g.count, bool) or g.count < 0:
                raise ValueError(f"node group {g}: count must be a whole number >= 0")
            if not all(math.isfinite(x) and x >= 0 for x in (g.gpus, g.cpus, g.mem)):
                raise ValueError(f"node group {g}: capacities must be finite numbers >= 0")
        total = sum(g.count for g in groups)
        if total <= 0:
            raise ValueError("a cluster needs at least one node")
        if total > MAX_NODES:
            raise ValueError(f"a cluster of {total:,} nodes is larger than the limit of {MAX_NODES:,} nodes")
        caps, types, racks = [], [], []
        rack = 0
        for g in groups:
            per_rack = g.nodes_per_rack or max(g.count, 1)
            for i in range(g.count):
                caps.append((g.gpus, g.cpus, g.mem))
                types.append(g.gpu_type)
                racks.append(rack + i // per_rack)
            rack = (racks[-1] + 1) if racks else rack
        self.capacity = np.array(caps, dtype=np.float64)
        self.capacity.setflags(write=False)
        self.gpu_type = tuple(types)
        self.rack = tuple(racks)
        self._free = self.capacity.copy()   # ``free``: brought up to date from _rows when read
        self._dirty: set[int] = set()       # nodes whose row changed since ``free`` was last read
        self.up = np.ones(len(caps), dtype=bool)
        self.up.setflags(write=False)     # set_up() keeps the cached totals right
        self.total = self.capacity.sum(axis=0)
        self.total.setflags(write=False)
        self.used = [0.0, 0.0, 0.0]       # plain floats: updated per touched task, read per decision
        self._rows = [list(c) for c in caps]        # free resources per node, the truth take/release update
        self._caps = [tuple(c) for c in caps]
        self._is_up = [True] * len(caps)  # plain bools: take checks them per touched node
        self._total = self.total.tolist() # plain floats: free_gpus is read at every decision
        self._down = [0.0, 0.0, 0.0]      # capacity of the nodes that are down
        self._demands: dict = {}          # (role, CPU grant, memory grant) -> its non-zero resources (take/release)

    @property
    def free(self) -> np.ndarray:
        """Free resources per node (n_nodes x 3; down nodes keep theirs: ``free_copy`` hides
        them). Take and release update plain rows; the array follows them when read, once per
        changed node, not once per task placed."""
        if self._dirty:
            free, rows = self._free, self._rows
            for node in self._dirty:
                free[node] = rows[node]
            self._dirty.clear()
        return self._free

    @property
    def num_nodes(self) -> int:
        return len(self.capacity)

    @property
    def total_gpus(self) -> float:
        return self._total[0]

    @property
    def free_gpus(self) -> float:
        return self._total[0] - self.used[0] - self._down[0]

    def set_up(self, node: int, up: bool) -> None:
        """A node goes down or comes back (its jobs must have released it before it goes down)."""
        if bool(self.up[node]) == up:
            return
        self.up.setflags(write=True)
        self.up[node] = up
        self.up.setflags(write=False)
        self._is_up[node] = up
        sign = -1.0 if up else 1.0
        self._down = [d + sign * c for d, c in zip(self._down, self._caps[node])]

    def free_copy(self) -> np.ndarray:
        """Free resources per node, for a policy to plan on; down nodes show nothing free."""
        free = self.free.copy()
        if self._down[0] or self._down[1] or self._down[2]:
            free[~self.up] = 0.0
        return free

    def up_capacity(self) -> np.ndarray:
        """Total resources of the nodes that are up."""
        return np.array([t - d for t, d in zip(self._total, self._down)])

    def fits(self, spec: JobSpec) -> bool:
        """Whether the job's requested allocation could ever fit on the whole (empty) cluster."""
        return could_fit(self.capacity, [(r.demand, r.count) for r in spec.roles])

    def release(self, spec: JobSpec, alloc: Allocation) -> None:
        used, rows, caps, dirty = self.used, self._rows, self._caps, self._dirty
        for role, nodes in alloc.items():
            held = self._held(spec, role, nodes)
            for node, count in nodes.items():
                _move(rows[node], caps[node], used, held, -count)
            dirty.update(nodes)
        self._snap_used()

    def take(self, spec: JobSpec, alloc: Allocation, who: str) -> None:
        """Place ``alloc``; raise CapacityError (naming ``who``, the job and node) if it does not fit."""
        used, rows, caps, dirty, up, n = self.used, self._rows, self._caps, self._dirty, self._is_up, len(self._rows)
        for role, nodes in alloc.items():
            held = self._held(spec, role, nodes)
            for node, count in nodes.items():
                if not (0 <= node < n) or not up[node]:
                    raise CapacityError(f"{who}: job {spec.job_id!r} placed on node {node}, which is "
                                        f"{'down' if 0 <= node < n else 'not in the cluster'}")
                row, cap = rows[node], caps[node]
                for k, x in held:
                    if count * x - row[k] > EPS:
                        self.release(spec, _placed_before(alloc, role, node))
                        raise CapacityError(
                            f"{who}: job {spec.job_id!r} role {role!r} asks for {count * x:g} {RESOURCES[k]} "
                            f"on node {node}, which has {row[k]:g} free")
                _move(row, cap, used, held, count)
            dirty.update(nodes)
        self._snap_used()

    def _held(self, spec: JobSpec, role: str, tasks) -> tuple:
        """(resource index, amount) of each resource a task of ``role`` holds under ``tasks``'
        grants: the role's own ``needs`` without grants; with them, each distinct demand worked out
        once, keyed by the role and the grants (a role's hash is kept: simulator/job.py RoleSpec)."""
        r = spec.roles[0] if spec.roles else None
        if r is None or r.name != role:   # the first role (the common case) needs no search
            r = spec.role(role)
        cpu, mem = getattr(tasks, "cpu", None), getattr(tasks, "mem", None)
        if cpu is None and mem is None:
            return r.needs
        key = (r, cpu, mem)
        held = self._demands.get(key)
        if held is None:
            held = self._demands[key] = tuple((k, x) for k, x in enumerate(task_demand(r, tasks)) if x > 0)
        return held

    def _snap_used(self) -> None:
        used = self.used   # written out: a loop over the three costs more than the tests (one per take and release)
        g, c, m = used   # (``abs(x) < EPS`` is ``-EPS < x < EPS`` for every float, a negation and a test fewer)
        if abs(g) < EPS:
            used[0] = 0.0
        if abs(c) < EPS:
            used[1] = 0.0
        if abs(m) < EPS:
            used[2] = 0.0


def _move(row: list, cap: tuple, used: list, held: tuple, count: int) -> None:
    """``count`` tasks holding ``held`` ((resource, amount) each) come onto a node (``count`` > 0,
    a take) or leave it (< 0, a release: ``row - (-n x)`` is ``row + n x`` to the bit, IEEE negation
    being exact): its free ``row`` and the cluster's ``used`` move by them, in the resources'
    order. The node's free amount has its float dust rounded away (repeated fractional takes and
    releases stay exact): nothing, or the whole capacity, when within EPS of it. One call a node,
    not one a resource: take and release run it for every node of every start and end."""
    for k, x in held:
        d = count * x
        v = row[k] - d
        if abs(v) < EPS:   # -EPS < v < EPS
            v = 0.0
        else:
            c = cap[k]
            if abs(v - c) < EPS:
                v = c
        row[k] = v
        used[k] += d


def _placed_before(alloc: Allocation, stop_role: str, stop_node: int) -> dict:
    """The part of ``alloc`` that ``take`` had placed before it hit (stop_role, stop_node)."""
    done: dict = {}
    for role, nodes in alloc.items():
        for node, count in nodes.items():
            if role == stop_role and node == stop_node:
                return done
            done.setdefault(role, {})[node] = count
    return done


def could_fit(capacity: np.ndarray, roles: list[tuple[tuple[float, float, float], int]],
              held: Callable[[tuple[float, float, float]], int] | None = None) -> bool:
    """Whether roles, given as (per-task demand, task count), fit an empty cluster of ``capacity``:
    each role's tasks on the nodes at once, and all roles together within the cluster's total
    GPUs, cores and GB. ``held(demand)`` may supply a cached count of tasks the cluster holds."""
    held = held or (lambda d: int(tasks_per_node(capacity, d).sum()))
    if any(held(d) < n for d, n in roles):
        return False
    total = capacity.sum(axis=0)
    return all(sum(n * d[k] for d, n in roles) <= total[k] + EPS for k in range(3))


def tasks_per_node(free: np.ndarray, demand) -> np.ndarray:
    """How many tasks of ``demand`` (GPU, CPU, memory) fit on each node, at most
    ``MAX_TASKS_PER_NODE`` (a demand of nothing, or of almost nothing, fits that many), so that
    sums and cumulative sums over the nodes of any cluster stay exact in int64."""
    demand = np.asarray(demand, dtype=np.float64)
    need = demand > 0
    if not need.any():
        return np.full(len(free), MAX_TASKS_PER_NODE, dtype=np.int64)
    with np.errstate(over="ignore"):
        per = np.floor((free[:, need] + EPS) / demand[need]).min(axis=1)
    return np.minimum(per, MAX_TASKS_PER_NODE).astype(np.int64)


def from_config(cfg, trace_gpus: tuple[float, float] | None = None) -> Cluster:
    """Build a cluster from its config: explicit ``groups``, or ``auto`` sized from the trace.

    ``auto`` (used by the ElasticFlow benchmark) makes nodes of ``gpus_per_node`` GPUs, as
    many as ``load_factor`` x the trace's mean busy GPUs, and at least its largest job.
    ``trace_gpus`` is (mean busy GPUs, largest job's GPUs).
    """
    groups = [NodeGroup(**dict(g)) for g in cfg.get("groups", [])]
    auto = cfg.get("auto")
    if auto:
        if trace_gpus is None:
            raise ConfigError("cluster.auto needs the trace's GPU demand")
        mean_busy, largest = trace_gpus
        per = float(auto["gpus_per_node"])
        if not (math.isfinite(per) and per > 0):
            raise ConfigError(f"cluster.auto.gpus_per_node must be a finite number > 0, got {auto['gpus_per_node']!r}")
        gpus = max(float(auto.get("load_factor", 1.2)) * mean_busy, largest)
        nodes = gpus / per - EPS
        if not nodes <= MAX_NODES:  # checked before ceil: also refuses NaN and inf
            raise ConfigError(f"cluster.auto: the trace needs {gpus:g} GPUs (largest job {largest:g}, mean busy "
                             f"{mean_busy:g} x load_factor), {nodes:,.0f} nodes of {per:g} GPUs: more than the "
                             f"limit of {MAX_NODES:,} nodes")
        count = max(1, math.ceil(nodes))
        groups.append(NodeGroup(count=count, gpus=per, cpus=float(auto.get("cpus_per_node", 0)),
                                mem=float(auto.get("mem_per_node", 0)),
                                gpu_type=str(auto.get("gpu_type", "generic")),
                                nodes_per_rack=int(auto.get("nodes_per_rack", 0))))
    return Cluster(groups)
