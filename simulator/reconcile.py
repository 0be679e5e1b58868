"""A policy's wanted allocations against the actual ones: what changes, and at what cost.

``reconcile`` validates every wanted allocation (roles, gang bounds, integer task counts, grants),
classifies each change (``overhead.Change``), asks the overhead model for its ``Transition``, and
moves the resources in the cluster: every changed job releases, then every changed job takes, so a
decision may swap resources between jobs. Tasks a scale-in removes keep their resources for the
transition's ``release_s`` (a graceful exit); where the same decision gave those resources to
another job, that job waits for the exit on those nodes instead.

It raises ``PolicyError`` naming the policy and the job for a wanted allocation that is not valid
(and ``CapacityError`` from the cluster where the allocations do not fit), and applies nothing to
the jobs: the engine turns each ``JobChange`` into the job's new state and events.
"""

from __future__ import annotations

import math
from functools import partial
from types import MappingProxyType
from typing import Mapping, NamedTuple

from clustersim.simulator.cluster import CapacityError, Cluster
from clustersim.simulator.errors import PolicyError
from clustersim.simulator.job import EMPTY, Allocation, JobSpec, JobState, Tasks, nodes_of, task_counts
from clustersim.simulator.overhead import (FREE, MIGRATE, RESCALE, RESIZE, RESUME, SCALE_IN, SCALE_OUT, START, STOP, STOPS,
                                           Change, OverheadModel, Transition)


class JobChange(NamedTuple):
    """One job's change of allocation, its resources already moved in the cluster."""

    state: JobState
    new: Allocation          # EMPTY: the job stops
    kind: Change
    transition: Transition   # with the wait for handed-over resources added
    gpus: float              # GPUs ``new`` holds
    lingering: Allocation | None = None   # a scale-in's removed tasks, held ``transition.release_s`` more


# ``_job_change((state, new, kind, transition, gpus, lingering))``: a JobChange made by tuple's own
# ``__new__``, every field given, without the Python frame of NamedTuple's generated ``__new__``
# (a change each per started, stopped or reshaped job)
_job_change = partial(tuple.__new__, JobChange)


def reconcile(wanted: Mapping[str, Allocation | None], states: Mapping[str, JobState], active,
              cluster: Cluster, overhead: OverheadModel, who: str) -> list[JobChange]:
    """The changes ``wanted`` makes (job id -> wanted allocation; None or empty: stop), in its
    order. ``active``: whether a job id is pending or running (no other job may be changed);
    ``who`` names the policy in errors."""
    planned = []   # the changes as they would be with nothing handed over or lingering
    transition = overhead.transition
    holding = False   # some changed job holds resources now
    for job_id, alloc in wanted.items():
        st = states.get(job_id)
        if st is None or not active(job_id):
            raise PolicyError(f"{who}: job {job_id!r} is not pending or running")
        new, gpus = validated(st.spec, alloc, who)
        if new != st.allocation:
            change = classify(st, new)
            tr = FREE if change in STOPS else transition(st.spec, change, st.allocation, new)
            planned.append(_job_change((st, new, change, tr, gpus, None)))
            holding = holding or bool(st.allocation)
    if not holding:
        # the common decision: only jobs that hold nothing start or resume. Nothing is released,
        # scaled in or handed over, so the changes are known once every job has taken its own.
        for c in planned:
            cluster.take(c.state.spec, c.new, who)
        return planned
    for c in planned:
        if c.state.allocation:
            cluster.release(c.state.spec, c.state.allocation)
    for c in planned:
        if c.new:
            cluster.take(c.state.spec, c.new, who)
    lingering, handed = _exit_gracefully(planned, cluster, who)
    out = []
    for st, new, change, tr, gpus, _ in planned:
        if new and handed:
            wait = max((handed.get(n, 0.0) for n in nodes_of(new) - nodes_of(st.allocation)), default=0.0)
            tr = _after(tr, wait)
        out.append(_job_change((st, new, change, tr, gpus, lingering.get(st.spec.job_id))))
    return out


def _exit_gracefully(planned, cluster: Cluster, who: str) -> tuple[dict[str, Allocation], dict[int, float]]:
    """Tasks a scale-in removes keep their resources until they have exited (``release_s``) where
    those are still free; where the same decision gave them to another job, they are handed over.
    Returns ({job: lingering tasks}, {node: seconds a job taking resources there waits})."""
    lingering: dict[str, Allocation] = {}
    handed: dict[int, float] = {}
    for st, new, change, tr, _, _ in planned:
        if tr.release_s > 0 and change is SCALE_IN:
            leaving = _minus(st.allocation, new)
            try:
                cluster.take(st.spec, leaving, who)
                lingering[st.spec.job_id] = leaving
            except CapacityError:
                for n in nodes_of(leaving):
                    handed[n] = max(handed.get(n, 0.0), tr.release_s)
    return lingering, handed


def validated(spec: JobSpec, alloc: Allocation | None, who: str) -> tuple[Allocation, float]:
    """Normalise a wanted allocation (read-only ``Tasks`` per role, grants equal to the request
    left implicit) and check it against the job's roles, bounds and grants; with the GPUs it
    holds (``alloc_gpus``'s sum, worked out on the way)."""
    if not alloc:
        return EMPTY, 0
    new, tasks, gpus = {}, {}, 0
    roles = spec.roles
    for role, nodes in alloc.items():
        r = roles[0] if roles else None
        if r is None or r.name != role:   # the first role (the common case) needs no search
            try:
                r = spec.role(role)
            except KeyError:
                raise PolicyError(f"{who}: job {spec.job_id!r} has no role {role!r}") from None
        placed, n = {}, 0
        for node, c in nodes.items():
            i = int(c)
            if c != i or c < 0:
                raise PolicyError(f"{who}: job {spec.job_id!r} role {role!r} has {c!r} tasks on node "
                                  f"{node}; task counts are integers >= 0")
            if c:
                placed[int(node)] = i
                n += i
        if type(nodes) is dict:   # a plain dict (what placement returns) carries no grants
            cpu = mem = None
        else:
            cpu, mem = getattr(nodes, "cpu", None), getattr(nodes, "mem", None)
            if cpu is not None or mem is not None:
                for what, v in (("cpu", cpu), ("mem", mem)):
                    if v is not None and not (math.isfinite(v) and v >= 0):
                        raise PolicyError(f"{who}: job {spec.job_id!r} role {role!r} grants {what}={v!r} "
                                          "per task; it must be a finite number >= 0")
                cpu, mem = None if cpu == r.cpu else cpu, None if mem == r.mem else mem
        if placed:
            new[role] = Tasks(placed, cpu, mem)
            tasks[role] = n
            gpus += r.gpu * n
    for r in roles:
        n = tasks.get(r.name, 0)
        if not r.min_count <= n <= r.max_count:
            raise PolicyError(f"{who}: job {spec.job_id!r} role {r.name!r} gets {n} tasks; "
                              f"it must run with {r.min_count}..{r.max_count} (gang)")
    return MappingProxyType(new), gpus


def classify(st: JobState, new: Allocation) -> Change:
    """The kind of change from the job's allocation to ``new``."""
    old = st.allocation
    if not new:
        return STOP
    if not old:
        return RESUME if st.first_start is not None else START
    a, b = task_counts(old), task_counts(new)
    if a == b:
        same_nodes = all(dict(old[r]) == dict(new.get(r, {})) for r in old)
        return RESIZE if same_nodes else MIGRATE
    roles = set(a) | set(b)
    if all(b.get(r, 0) >= a.get(r, 0) for r in roles):
        return SCALE_OUT
    if all(b.get(r, 0) <= a.get(r, 0) for r in roles):
        return SCALE_IN
    return RESCALE


def _after(tr: Transition, wait: float) -> Transition:
    """``tr`` delayed by ``wait`` s: the new tasks cannot begin before the resources they take are free."""
    if wait <= 0:
        return tr
    if tr.prepare_s > 0:
        return Transition(tr.prepare_s + wait, tr.pause_s, tr.release_s)
    return Transition(tr.prepare_s, tr.pause_s + wait, tr.release_s)


def _minus(old: Allocation, new: Allocation) -> dict:
    """The tasks of ``old`` that ``new`` no longer has, per role and node (grants of ``old``)."""
    out = {}
    for role, tasks in old.items():
        keep = new.get(role, {})
        gone = {n: c - keep.get(n, 0) for n, c in tasks.items() if c > keep.get(n, 0)}
        if gone:
            out[role] = Tasks(gone, getattr(tasks, "cpu", None), getattr(tasks, "mem", None))
    return out
