"""The conformance suite for scheduling policies, in the spirit of scikit-learn's ``check_estimator``.

``check_policy(policy_cls)`` runs a policy on varied inputs drawn with hypothesis (random
heterogeneous clusters, rigid GPU jobs, and, as the policy's tags claim, elastic jobs, PS
jobs and CPU/memory demands; zero-length and tiny jobs, simultaneous arrivals; the model
zoo's speeds, mechanism overheads, node failures) and raises ``ConformanceError`` naming the
policy, the check, the input and why, at the first violation. Every check instruments a
real run (the policy, the engine's recorder and the engine's state are observed; nothing the
engine does is changed):

- ``capacity``: no node holds more than its capacity, and free == capacity - used after every decision
- ``gang bounds``: every role of a running job holds min_count..max_count tasks (rigid: its count)
- ``down nodes``: no task on a node that is down
- ``progress``: each job's progress never decreases and never passes its work
- ``gpu-seconds``: the jobs table's GPU-seconds equal the integral of the timeline's GPUs in use
- ``jct``: no job finishes faster than it would alone (its ``duration``; for elastic policies,
  its work at the fastest rate its bounds allow)
- ``completes``: every job finished, or is listed in the summary's ``unfinished_jobs`` with a
  reason; since every input fits the cluster and every failed node comes back, every job must finish
- ``determinism``: outputs (jobs, timeline, events, summary) are byte-identical across two
  processes with different ``PYTHONHASHSEED``
- ``nondeterminism``: a second instance given the very same views decides the same, at every
  decision (unseeded randomness, wall-clock time, object identity fail it)
- ``class state``: a run changes no attribute of the policy's classes or module (state shared
  by every instance leaks from one run into the next)
- ``reset``: the same instance run again on the same input decides the same (``reset`` must
  clear what a run leaves behind)
- ``views unchanged``: a policy never changes what it was given
- ``hidden truth``: a non-oracle never reads ground truth (``OracleError``), and at every
  decision of the whole run, a shadow instance given a twin view, equal in every observable but
  with every job's hidden size rescaled and no path to the engine's private state
  (``JobView._state.spec``, the clock's event queue), decides the same
- ``event budget``: the run stays within an event budget scaled to the input (a livelocking
  or constantly waking policy "runs away")
- ``declared capability``: a policy that declares ``decides_only_when_waiting`` returns, at every
  decision with no job pending, no allocations and no wakeup; one that declares
  ``decides_only_when_freed``, at every decision after one that left jobs pending with nothing
  ended, stopped or freed since; one that declares ``waits_for_gpus``, at every decision with fewer
  GPUs free than its previous decision declared, no job stopped and no node changed since (the
  engine skips those decisions)
- ``decide raises`` / ``valid decision``: decide returns a valid ``Decision`` without raising

Tags (``Policy.tags``, from ``base.TAGS``) choose the inputs: every policy gets rigid GPU jobs;
``elastic`` adds elastic jobs (min < count < max), ``ps`` multi-role PS/worker jobs,
``multi-resource`` CPU and memory demands; ``oracle`` (or ``oracle = True``) allows ground truth.
``check_policy(..., faults=True)`` runs every input with a fault model (``FAULTS``: node and task
failures, OOM, stragglers, hot PS, checkpoints): jobs may end failed, progress may go back to a
checkpoint at a failure, and every job must end finished or failed.
docs/policies/conformance.md describes the suite.
"""

from __future__ import annotations

import importlib
import itertools
import types
import json
import math
import os
import pickle
import re
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass, field, fields, replace
from functools import cached_property as _CACHED
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from clustersim.policies.base import TAGS, Policy
from clustersim.simulator import faults as faults_mod
from clustersim.simulator import overhead as overhead_mod
from clustersim.simulator.cluster import EPS, CapacityError, Cluster, NodeGroup, tasks_per_node
from clustersim.simulator.engine import Engine, Limits, RunawayError
from clustersim.simulator.errors import OracleError, PolicyError
from clustersim.simulator.job import JobSpec, JobState, RoleSpec, Status, Tasks, task_demand
from clustersim.simulator.view import ClusterView, Decision, JobView, Observer, View, read_only

__all__ = ["ConformanceError", "check_policy", "Case", "NodeFailure", "cases", "run_case", "EXAMPLES"]

EXAMPLES = 20          # hypothesis examples per policy by default
REL = 1e-9             # relative tolerance of progress and JCT
GPU_S_REL = 1e-6       # relative tolerance of the GPU-seconds balance
SHADOW_EXAMPLES = 4    # random inputs after the fixed one also run with shadow instances, and twice
OUTPUTS = ("jobs.parquet", "timeline.parquet", "events.parquet", "summary.json")


class ConformanceError(AssertionError):
    """A policy broke the contract: the message names the policy, the check, the input and why."""

    def __init__(self, message: str, *, policy: str = "", check: str = "", where: str = ""):
        super().__init__(message)
        self.policy, self.check, self.where = policy, check, where


class _Violation(Exception):
    """Raised inside a run by the harness: ``check`` failed for ``why``."""

    def __init__(self, check: str, why: str):
        super().__init__(f"{check}: {why}")
        self.check, self.why = check, why


class _Raised(Exception):
    """The policy's own ``decide`` or ``reset`` raised ``error``."""

    def __init__(self, error: BaseException, where: str):
        super().__init__(repr(error))
        self.error, self.where = error, where


# ---------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class NodeFailure:
    at: float
    node: int
    repair_after: float


@dataclass(frozen=True)
class Case:
    """One input: a cluster, jobs, the speed model (zoo or linear), an overhead config, failures."""

    label: str
    groups: tuple[NodeGroup, ...]
    jobs: tuple[JobSpec, ...]
    zoo: bool = False
    overhead: dict | None = field(default=None, hash=False)
    failures: tuple[NodeFailure, ...] = ()
    faults: dict | None = field(default=None, hash=False)   # a ``faults`` config (simulator/faults.py)

    def describe(self) -> str:
        nodes = " + ".join(f"{g.count}x({g.gpus:g} GPU, {g.cpus:g} cores, {g.mem:g} GB)" for g in self.groups)
        kinds = {"rigid": 0, "elastic": 0, "ps": 0}
        for j in self.jobs:
            kinds["ps" if len(j.roles) > 1 else "rigid" if j.rigid else "elastic"] += 1
        jobs = ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
        ov = (self.overhead or {}).get("kind", "none") if self.overhead else "none"
        fails = "; ".join(f"node {f.node} down at {f.at:g} s for {f.repair_after:g} s" for f in self.failures)
        return (f"{self.label}: cluster {nodes}; {len(self.jobs)} jobs ({jobs}); speed "
                f"{'zoo' if self.zoo else 'linear'}; overhead {ov}" + (f"; failures: {fails}" if fails else "")
                + (f"; faults {self.faults}" if self.faults else ""))


@lru_cache(maxsize=1)
def _zoo():
    from clustersim.simulator import profiles
    return profiles.load()


def _size(spec: JobSpec, cluster: Cluster, zoo: bool, profile_pick: int = 0) -> JobSpec:
    """Give the job its work: with the zoo, ``duration`` x its profile's rate at the requested
    allocation placed packed (as simulator/workload.py does); else ``duration`` iterations."""
    if not zoo:
        return replace(spec, total_work=spec.duration, profile=None)
    from clustersim.simulator.workload import family_of, packed
    z = _zoo()
    names = z.names(family_of(spec.roles))
    for k in range(len(names)):
        name = names[(profile_pick + k) % len(names)]
        s = replace(spec, profile=name, model=name)
        rate = z.speed.rate(s, packed(s, cluster), cluster)
        if rate > 0 and math.isfinite(rate):
            return replace(s, total_work=spec.duration * rate)
    raise ValueError(f"no {family_of(spec.roles)} profile gives job {spec.job_id!r} a speed")


def _fits(roles: tuple[RoleSpec, ...], cluster: Cluster) -> bool:
    return cluster.fits(JobSpec(0, "probe", 0.0, roles, 1.0))


def _fit(roles: list[RoleSpec], cluster: Cluster) -> tuple[RoleSpec, ...]:
    """Shrink a job until its requested allocation fits the empty cluster (the engine rejects
    jobs that cannot ever fit): fewer tasks first, then no CPU/memory, then one GPU task."""
    roles = list(roles)
    while not _fits(tuple(roles), cluster):
        k = max(range(len(roles)), key=lambda i: roles[i].count)
        r = roles[k]
        if r.count > 1:
            c = r.count - 1
            lo, hi = (c, c) if not r.elastic else (min(r.min_count, c), r.max_count)
            roles[k] = replace(r, count=c, min_count=lo, max_count=hi)
            continue
        if any(x.cpu or x.mem for x in roles):
            roles = [replace(x, cpu=0.0, mem=0.0) for x in roles]
            continue
        return (RoleSpec("worker", 1, 1.0, 0.0, 0.0, 1, 1),)
    return tuple(roles)


def cases(tags: frozenset[str]):
    """The hypothesis strategy of inputs for a policy with ``tags``."""
    from hypothesis import strategies as st

    multi, ps, elastic = "multi-resource" in tags, "ps" in tags, "elastic" in tags
    kinds = ["rigid"] + ["elastic"] * elastic + ["ps"] * ps

    @st.composite
    def case(draw) -> Case:
        groups = []
        for _ in range(draw(st.integers(1, 6))):
            groups.append(NodeGroup(count=draw(st.integers(1, 3)), gpus=draw(st.sampled_from([0, 1, 2, 4, 8])),
                                    cpus=draw(st.sampled_from([4, 16, 32, 96])),
                                    mem=draw(st.sampled_from([16, 64, 256, 768])),
                                    gpu_type=draw(st.sampled_from(["v100", "a100", "k80"])),
                                    nodes_per_rack=draw(st.sampled_from([0, 1, 2]))))
        if not any(g.gpus for g in groups):
            groups[0] = replace(groups[0], gpus=4)
        cluster = Cluster(groups)
        zoo = draw(st.booleans())
        t, jobs = 0.0, []
        demand = st.sampled_from([0.0, 1.0, 2.0, 4.0]) if multi else st.just(0.0)
        memory = st.sampled_from([0.0, 2.0, 8.0, 16.0]) if multi else st.just(0.0)
        for i in range(draw(st.integers(1, 12))):
            if not (i and draw(st.booleans())):          # else: arrives with the job before it
                t = round(t + draw(st.sampled_from([0.0, 1e-6, 1.0]) | st.floats(0, 900)), 3) if i else 0.0
            duration = draw(st.sampled_from([1e-6, 1e-3, 0.5]) | st.floats(1, 3000).map(lambda x: round(x, 1)))
            kind = draw(st.sampled_from(kinds))
            if kind == "ps":
                p, w = draw(st.integers(1, 3)), draw(st.integers(1, 4))
                pb = (1, p + draw(st.integers(0, 2))) if elastic else (p, p)
                wb = (draw(st.integers(1, w)), w + draw(st.integers(0, 3))) if elastic else (w, w)
                roles = [RoleSpec("ps", p, 0.0, draw(st.sampled_from([1.0, 2.0, 4.0])),
                                  draw(st.sampled_from([2.0, 8.0])), *pb),
                         RoleSpec("worker", w, 1.0, draw(st.sampled_from([1.0, 2.0])),
                                  draw(st.sampled_from([4.0, 8.0])), *wb)]
            elif kind == "elastic":
                c = draw(st.integers(2, 6))
                roles = [RoleSpec("worker", c, 1.0, draw(demand), draw(memory), draw(st.integers(1, c - 1)),
                                  c + draw(st.integers(1, 4)))]
            else:
                c = draw(st.sampled_from([1, 2, 3, 4, 8]))
                roles = [RoleSpec("worker", c, 1.0, draw(demand), draw(memory), c, c)]
            spec = JobSpec(index=i, job_id=f"j{i}", submit_time=t, roles=_fit(roles, cluster),
                           total_work=duration, duration=duration, tenant=f"t{draw(st.integers(0, 2))}",
                           user=f"u{i % 4}", model=draw(st.sampled_from(["vgg16", "resnet50", None])))
            jobs.append(_size(spec, cluster, zoo, draw(st.integers(0, 20))))
        overhead = draw(st.sampled_from([
            None,
            {"kind": "constant", "start_s": 0.0, "resume_s": 30.0, "rescale_s": 10.0},
            {"kind": "constant", "start_s": 5.0, "resume_s": 5.0, "rescale_s": 20.0, "stop_free": True,
             "pause_s": 1.0},
            {"kind": "stop_resume"},
            {"kind": "stop_free"},
        ]))
        failures = tuple(NodeFailure(round(draw(st.floats(0, t + 600)), 3), draw(st.integers(0, cluster.num_nodes - 1)),
                                     round(draw(st.floats(1, 1800)), 3))
                         for _ in range(draw(st.integers(0, 2))))
        return Case("", tuple(groups), tuple(jobs), zoo, overhead, failures)

    return case()


def _examples(tags: frozenset[str], n: int, seed: int) -> list[Case]:
    """``n`` inputs drawn deterministically (hypothesis with a fixed seed, no database)."""
    return list(_drawn(frozenset(tags), n, seed))


@lru_cache(maxsize=32)
def _drawn(tags: frozenset[str], n: int, seed: int) -> tuple[Case, ...]:
    if n <= 0:
        return []
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed
    out: list[Case] = []

    @fixed_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(cases(tags))
    def draw(case):
        out.append(case)

    draw()
    return tuple(replace(c, label=f"seed={seed} example {i + 1}/{n}") for i, c in enumerate(out[:n]))


def contention_case(tags: frozenset[str]) -> Case:
    """A fixed input where order matters: more jobs at the same instant than the cluster holds,
    distinct sizes, a zero-length job and a node failure (the determinism check runs on it)."""
    groups = (NodeGroup(1, 4, 32, 128, "v100"), NodeGroup(1, 2, 16, 64, "k80"))
    cluster = Cluster(list(groups))
    multi = "multi-resource" in tags
    specs = []
    for i in range(10):
        g = 1 + i % 2
        specs.append(((RoleSpec("worker", g, 1.0, 2.0 * multi, 4.0 * multi, g, g),), 0.0 if i < 7 else 50.0,
                      [1e-6, 300.0, 40.0, 170.0, 95.0, 260.0, 15.0, 120.0, 75.0, 210.0][i]))
    if "elastic" in tags:
        specs.append(((RoleSpec("worker", 2, 1.0, 0.0, 0.0, 1, 4),), 0.0, 230.0))
        specs.append(((RoleSpec("worker", 3, 1.0, 0.0, 0.0, 2, 6),), 50.0, 140.0))
    if "ps" in tags:
        e = "elastic" in tags
        specs.append(((RoleSpec("ps", 1, 0.0, 2.0, 8.0, 1, 2 if e else 1),
                       RoleSpec("worker", 2, 1.0, 1.0, 4.0, 1 if e else 2, 3 if e else 2)), 0.0, 180.0))
    jobs = tuple(_size(JobSpec(index=i, job_id=f"c{i}", submit_time=t, roles=r, total_work=d, duration=d,
                               tenant=f"t{i % 3}", user=f"u{i % 2}", model="resnet50"), cluster, False)
                 for i, (r, t, d) in enumerate(specs))
    return Case("contention", groups, jobs, False, {"kind": "constant", "resume_s": 10.0, "rescale_s": 5.0},
                (NodeFailure(60.0, 0, 45.0),))


# ---------------------------------------------------------------------------- running
def budget(case: Case) -> int:
    """Events a run of ``case`` may take: generous for any reasonable policy (a replay takes a
    few events per job), small enough that a runaway policy fails in well under a second."""
    return 1_000 + 200 * (len(case.jobs) + len(case.failures)) + (10_000 + 400 * len(case.jobs) if case.faults else 0)


# Faults for ``check_policy(..., faults=True)``: far more often than real clusters fail, so that
# inputs of minutes meet every kind (node and task failures, OOM, stragglers, hot PS) and some
# jobs run out of retries; every job must then end finished or failed.
FAULTS = {"enabled": True, "retries": 2, "checkpoint": {"interval_s": 120.0, "flash_interval_s": 30.0},
          "node": {"mtbf_h": 1.0, "repair_s": 300.0, "repair": "exponential"},
          "task": {"per_pod_day": 0.99}, "oom": {"after_s": 10.0, "underprovisioned": 0.2},
          "straggler": {"per_pod_hour": 2.0, "factor": 3.0, "duration_s": 300.0},
          "hot_ps": {"fraction": 0.5, "skew": 2.0}}


def _engine(case: Case, policy, max_events: int | None = None) -> Engine:
    cluster = Cluster(list(case.groups))
    zoo = _zoo() if case.zoo else None
    ov = overhead_mod.make(case.overhead, zoo.costs_of if zoo else None) if case.overhead else None
    fm = faults_mod.make(case.faults, 0, costs_of=zoo.costs_of if zoo else None) if case.faults else None
    engine = Engine(list(case.jobs), cluster, policy, speed=zoo.speed if zoo else None, overhead=ov,
                    progress=False, limits=Limits(max_events=max_events or budget(case)),
                    usage=zoo.usage if zoo else None, seed=0, faults=fm)
    for f in case.failures:
        engine.fail_node(f.at, f.node, f.repair_after)
    return engine


def _canon_alloc(alloc) -> tuple:
    if not alloc:
        return ()
    return tuple((role, tuple(sorted((int(n), int(c)) for n, c in tasks.items() if c)),
                  getattr(tasks, "cpu", None), getattr(tasks, "mem", None)) for role, tasks in alloc.items())


def _snapshot(view) -> tuple:
    """Everything a policy is given, as values: JobViews' observable fields, the cluster's arrays,
    the observer's settings and the view's own fields."""
    def job(j) -> tuple:
        return (j.job_id, j.status, _canon_alloc(j.allocation), j.gpus, j.attained_service, j.iterations_done,
                j.first_start, j.reconfiguring, j.preemptions, j.rescales, j.failures, j.stop_reason, j.waited,
                tuple((s.start, s.end, s.rate, _canon_alloc(s.allocation)) for s in j.throughput_samples), j.roles)

    c, clock = view.cluster, view.clock
    return (
        view.now,
        tuple(job(j) for j in view.pending.values()), tuple(job(j) for j in view.running.values()),
        tuple(job(j) for j in view.arrived), tuple(job(j) for j in view.finished),
        tuple(job(j) for j in view.stopped),
        c.capacity.tobytes(), c.free.tobytes(), c.up.tobytes(), c.total.tobytes(), c.gpu_type, c.rack,
        (id(clock.speed), id(clock.usage), id(clock.cluster), clock.profiled_error, clock.seed),
        (id(view.pending), id(view.running), id(view.cluster), id(view.clock)),
    )


_JOB_FIELDS = ("job_id", "status", "allocation", "gpus", "attained_service", "iterations_done", "first_start",
               "reconfiguring", "preemptions", "rescales", "failures", "stop_reason", "waited",
               "throughput_samples", "roles")
_SNAP_FIELDS = ("now", "pending jobs", "running jobs", "arrived jobs", "finished jobs", "stopped jobs",
                "cluster.capacity", "cluster.free", "cluster.up", "cluster.total", "cluster.gpu_type",
                "cluster.rack", "view.clock (observer settings)", "the view's own fields")


def _diff(a: tuple, b: tuple) -> str:
    for name, x, y in zip(_SNAP_FIELDS, a, b):
        if x != y:
            if name.endswith("jobs"):
                for jx, jy in zip(x, y):
                    if jx != jy:
                        k = next(k for k, (u, v) in enumerate(zip(jx, jy)) if u != v)
                        return f"{name}: job {jx[0]!r}'s {_JOB_FIELDS[k]} changed from {jx[k]!r} to {jy[k]!r}"
                return f"{name}: the jobs listed changed from {[j[0] for j in x]} to {[j[0] for j in y]}"
            return f"{name} changed"
    return "something changed"


class _Harness:
    """Wraps the policy under test: snapshots its view around every decision, logs decisions,
    and checks the engine's state after each one (through the recorder's sample hook)."""

    def __init__(self, inner, engine_oracle: bool, shadows: tuple[_Shadow, ...] = (), policy_cls=None,
                 shared: dict | None = None):
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.oracle = engine_oracle
        self.shadows, self.policy_cls, self.shared = shadows, policy_cls, shared
        # the engine sees the harness, which declares nothing: it runs every decision, and those
        # with nothing pending check the policy's declaration (Policy.decides_only_when_waiting)
        self.lazy = bool(getattr(inner, "decides_only_when_waiting", False))
        self.lazy_freed = bool(getattr(inner, "decides_only_when_freed", False))
        self.waits = getattr(inner, "waits_for_gpus", None)   # Policy.waits_for_gpus
        self._waiting: tuple | None = None   # (GPUs the last decision declared it waits for, nodes up then)
        self._left: set = set()        # jobs the last decision left pending
        self._after: tuple | None = None   # (free, up) once the last decision was applied
        self._decided = False
        self.log: list[tuple] = []
        self.engine: Engine | None = None
        self._progress: dict[str, float] = {}
        self._failures: dict[str, int] = {}   # a failure takes progress back to a checkpoint

    def _guarded(self, call: str, view, when: str):
        """``inner.<call>(view)``: its own exceptions reported as such, and the view unchanged."""
        before = _snapshot(view)
        try:
            out = getattr(self.inner, call)(view)
        except (OracleError, _Violation):
            raise
        except Exception as e:
            raise _Raised(e, call) from e
        after = _snapshot(view)
        if before != after:
            raise _Violation("views unchanged", f"{call}{when} changed what it was given: {_diff(before, after)}")
        return out

    def reset(self, view) -> None:
        self._guarded("reset", view, "")
        for sh in self.shadows:
            _, err = sh.call("reset", view)
            if err is not None:
                self._diverged(sh, "reset", view, None, None, err)

    def decide(self, view) -> Decision:
        decision = self._guarded("decide", view, f" at t={view.now:g} s")
        if self.lazy and not view.pending and isinstance(decision, Decision) and (
                decision.allocations or decision.wakeup is not None):
            raise _Violation("declared capability", f"it declares decides_only_when_waiting, yet with no job pending "
                                                    f"at t={view.now:g} s it decided {_canon_decision(decision)}: the "
                                                    "engine skips such decisions, so the run would differ")
        if self.lazy_freed and isinstance(decision, Decision):
            self._check_freed(view, decision)
        if self.waits is not None and isinstance(decision, Decision):
            self._check_waits(view, decision)
        mine = _canon_decision(decision)
        if isinstance(decision, Decision):
            self.log.append((view.now, *mine))
        for sh in self.shadows:
            theirs, err = sh.call("decide", view)
            if err is not None or _canon_decision(theirs) != mine:
                self._diverged(sh, "decide", view, mine, None if err else _canon_decision(theirs), err)
        return decision

    def _check_freed(self, view, decision: Decision) -> None:
        """``decides_only_when_freed``: a decision that follows one which left jobs pending, with
        nothing ended, stopped, freed or changed in the cluster since (jobs at most arrived),
        changes nothing. The state after each decision is taken when the engine records it."""
        unchanged = (self._left and not view.finished and not view.stopped and self._after is not None
                     and np.array_equal(self._after[0], view.cluster.free) and np.array_equal(self._after[1],
                                                                                        view.cluster.up))
        if unchanged and (decision.allocations or decision.wakeup is not None):
            raise _Violation("declared capability", f"it declares decides_only_when_freed, yet at t={view.now:g} s, "
                                                    "with jobs left pending by its previous decision and nothing freed "
                                                    f"since (only arrivals), it decided {_canon_decision(decision)}: "
                                                    "the engine skips such decisions, so the run would differ")
        self._left = set(view.pending) - {j for j, a in decision.allocations.items() if a}
        self._decided = True

    def _check_waits(self, view, decision: Decision) -> None:
        """``waits_for_gpus``: after a decision that asked for no wakeup and declared G, with no
        job stopped and no node gone down or up since, a decision with free GPUs + EPS below G
        changes nothing (whatever arrived or ended). Then what this decision declares is read,
        as the engine reads it."""
        w = self._waiting
        if (w is not None and not view.stopped and np.array_equal(w[1], view.cluster.up)
                and view.cluster.free_gpus + EPS < w[0] and (decision.allocations or decision.wakeup is not None)):
            raise _Violation("declared capability", f"it declares waits_for_gpus, yet at t={view.now:g} s, with "
                                                    f"{view.cluster.free_gpus:g} GPUs free, fewer than the {w[0]:g} "
                                                    "its previous decision said it waits for, and no job stopped since, "
                                                    f"it decided {_canon_decision(decision)}: the engine skips such "
                                                    "decisions, so the run would differ")
        g = self.waits() if decision.wakeup is None else None
        self._waiting = None if g is None else (g, view.cluster.up.copy())

    def _diverged(self, sh: _Shadow, call: str, view, mine, theirs, err) -> None:
        """A shadow decided otherwise: say why, shared state first (it makes any two instances
        differ), then what the shadow was given."""
        at = f"at t={view.now:g} s (decision {len(self.log)})"
        if self.shared is not None:
            leak = _state_change(self.shared, self.policy_cls)
            if leak:
                raise _Violation("class state", f"{leak}; a second instance decided otherwise {at}")
        got = (f"raised {type(err).__name__}: {err}" if err is not None else f"decided {theirs}")
        if sh.twin is None:
            raise _Violation("nondeterminism", f"a second instance given the very same views {got} {at}, where the "
                                               f"first decided {mine}: unseeded randomness, wall-clock time or "
                                               "object identity?")
        raise _Violation("hidden truth", f"a shadow instance given views equal in every observable, with only the jobs' "
                                         f"hidden sizes rescaled and no engine behind them, {got} {at}, where the "
                                         f"policy decided {mine}: it reads ground truth around its view (private "
                                         "attributes such as JobView._state or the clock's event queue)")

    # --- the engine's state after every decision
    def install(self, engine: Engine) -> None:
        self.engine = engine
        engine.recorder.watch(self.after_decision)

    def after_decision(self, now: float) -> None:
        eng = self.engine
        cl = eng.cluster
        if self._decided:   # the decision just applied: what the next one must find unchanged
            self._after, self._decided = (cl.free.copy(), cl.up.copy()), False
        held = np.zeros_like(cl.capacity)
        for st in eng.states.values():
            jid = st.spec.job_id
            parts = [st.allocation] + [a for a, _ in eng._lingering.get(jid, ())]
            if st.status is Status.RUNNING and not st.allocation:
                raise _Violation("gang bounds", f"job {jid!r} is running with no tasks at t={now:g} s")
            if st.status is not Status.RUNNING and st.allocation:
                raise _Violation("capacity", f"job {jid!r} is {st.status.value} but holds {dict(st.allocation)} "
                                             f"at t={now:g} s")
            if st.allocation:
                counts = {r: sum(t.values()) for r, t in st.allocation.items()}
                for r in st.spec.roles:
                    n = counts.get(r.name, 0)
                    if not r.min_count <= n <= r.max_count:
                        raise _Violation("gang bounds", f"job {jid!r} role {r.name!r} holds {n} tasks at t={now:g} s;"
                                                        f" its bounds are {r.min_count}..{r.max_count}")
            for alloc in parts:
                for role, tasks in alloc.items():
                    d = np.asarray(task_demand(st.spec.role(role), tasks))
                    for node, c in tasks.items():
                        if c and not cl.up[node]:
                            raise _Violation("down nodes", f"job {jid!r} role {role!r} has {c} task(s) on node "
                                                           f"{node}, which is down, at t={now:g} s")
                        held[node] += c * d
            p = st.progress + st.rate * (now - st.since) if st.status is Status.RUNNING else st.progress
            work = st.spec.total_work
            # times are floats: a completion lands within a few ulps of its instant, at the job's rate
            if p > work * (1 + REL) + 1e-12 + 4 * st.rate * math.ulp(now):
                raise _Violation("progress", f"job {jid!r} has done {p!r} iterations of {work!r} at t={now:g} s")
            p = min(p, work)   # a completion time rounded in floating point lands a hair past the work
            last = self._progress.get(jid, 0.0)
            if eng.faults is not None and st.failures != self._failures.get(jid, 0):
                self._failures[jid] = st.failures
                last = min(last, p)
            if p < last - REL * max(work, 1e-300):
                raise _Violation("progress", f"job {jid!r}'s progress went back from {last!r} to {p!r} "
                                             f"iterations at t={now:g} s")
            self._progress[jid] = max(p, last)
        over = held - cl.capacity
        if (over > EPS).any():
            node, k = np.unravel_index(int(np.argmax(over)), over.shape)
            raise _Violation("capacity", f"node {node} holds {held[node, k]:g} {('GPUs', 'cores', 'GB')[k]} of "
                                         f"{cl.capacity[node, k]:g} at t={now:g} s")
        if not np.allclose(cl.capacity - cl.free, held, rtol=0, atol=1e-6):
            node = int(np.argmax(np.abs(cl.capacity - cl.free - held).max(axis=1)))
            raise _Violation("capacity", f"free != capacity - used on node {node} at t={now:g} s: free "
                                         f"{cl.free[node].tolist()}, capacity {cl.capacity[node].tolist()}, held by "
                                         f"jobs {held[node].tolist()}")
        if not np.allclose(cl.used, held.sum(axis=0), rtol=0, atol=1e-6):
            raise _Violation("capacity", f"the cluster counts {cl.used.tolist()} in use at t={now:g} s but jobs "
                                         f"hold {held.sum(axis=0).tolist()}")


@dataclass
class Outcome:
    """What one checked run produced."""

    recorder: object
    log: list
    engine: Engine
    policy: object = None   # the instance that ran


def _instantiate(policy_cls, params: dict | None):
    try:
        return policy_cls(**(params or {}))
    except Exception as e:
        raise _Raised(e, "__init__") from e


def run_case(policy_cls, case: Case, params: dict | None = None, *, tags: frozenset[str] = frozenset(),
             shadows: bool = False, seed: int = 0, instance=None) -> Outcome:
    """Run ``case`` with every per-run check; raise ``_Violation``/``_Raised`` or the engine's error.
    ``shadows``: two more instances decide alongside (the same views; for a non-oracle, twin
    views with hidden sizes rescaled). ``instance``: run this one (already used) instead of a new one."""
    oracle = bool(getattr(policy_cls, "oracle", False))
    shared = _state_of(policy_cls)
    extra = ()
    if shadows:
        extra = (_Shadow(_instantiate(policy_cls, params), None),)
        if not oracle:
            extra += (_Shadow(_instantiate(policy_cls, params), _Twin(seed)),)
    inner = _instantiate(policy_cls, params) if instance is None else instance
    harness = _Harness(inner, oracle, extra, policy_cls, shared)
    engine = _engine(case, harness)
    harness.install(engine)
    recorder = engine.run()
    leak = _state_change(shared, policy_cls)
    if leak:
        raise _Violation("class state", leak)
    _check_outputs(recorder, case, tags)
    return Outcome(recorder, harness.log, engine, inner)


def _check_outputs(rec, case: Case, tags: frozenset[str]) -> None:
    jobs = rec.jobs().to_pydict()
    timeline = rec.timeline().to_pydict()
    summary = rec.summary()
    # every job finished or reported
    listed = {u["job_id"]: u for u in summary["unfinished_jobs"]}
    for jid, status in zip(jobs["job_id"], jobs["status"]):
        if status not in ("finished", "failed") and (jid not in listed or not listed[jid].get("reason")):
            raise _Violation("completes", f"job {jid!r} is {status} and summary.json does not list it with a reason")
    if "failed" in jobs["status"] and not case.faults:
        raise _Violation("completes", "a job ended failed although no fault model ran")
    if summary["jobs_finished"] + summary["jobs_failed"] + summary["jobs_unfinished"] != len(case.jobs):
        raise _Violation("completes", f"summary counts {summary['jobs_finished']} finished + {summary['jobs_failed']} "
                                      f"failed + {summary['jobs_unfinished']} unfinished of {len(case.jobs)} jobs")
    if listed:
        jid, u = next(iter(listed.items()))
        raise _Violation("completes", f"{len(listed)} job(s) never finished although every job fits the cluster "
                                      f"and every failed node came back, e.g. {jid!r}: {u['reason']}")
    # progress at the end
    for jid, p in zip(jobs["job_id"], jobs["progress"]):
        if not p <= 1 + REL:
            raise _Violation("progress", f"job {jid!r} ended with progress {p!r} of its work")
    # GPU-seconds: the jobs table against the timeline's integral
    t, used = timeline["time"], timeline["gpu_used"]
    end = rec.end_time
    area = sum(u * (b - a) for u, a, b in zip(used, t, t[1:] + [end]))
    total = math.fsum(jobs["gpu_seconds"])
    if not math.isclose(total, area, rel_tol=GPU_S_REL, abs_tol=1e-6):
        raise _Violation("gpu-seconds", f"jobs.parquet sums {total!r} GPU-seconds but the timeline's gpu_used "
                                        f"integrates to {area!r} over [{t[0] if t else 0:g}, {end:g}] s")
    if used and used[-1] > EPS:
        raise _Violation("gpu-seconds", f"the timeline ends with {used[-1]:g} GPUs in use after every job finished")
    # JCT against the job alone
    specs = {s.job_id: s for s in case.jobs}
    for jid, jct, t_end, status in zip(jobs["job_id"], jobs["jct"], jobs["end_time"], jobs["status"]):
        if status == "failed":   # ended early by its failures
            continue
        spec = specs[jid]
        grants = "multi-resource" in tags   # it may grant a task more cores than requested
        if "elastic" in tags:
            bound, what = _fastest(spec, case, True, grants), "at the fastest rate its bounds allow"
        elif grants or _typed(spec, case):   # its duration holds at its request on one GPU type
            bound, what = _fastest(spec, case, False, grants), "alone at its request at its fastest"
        else:
            bound, what = spec.duration, "alone at its request"
        # tolerance: relative to the bound, plus the rounding of end - submit at the clock's magnitude
        if jct < bound * (1 - REL) - 8 * sys.float_info.epsilon * max(abs(t_end), 1.0):
            raise _Violation("jct", f"job {jid!r} finished in {jct!r} s, faster than the {bound!r} s it takes {what}")


def _typed(spec: JobSpec, case: Case) -> bool:
    """Whether the job's speed depends on the GPU types the case's cluster has."""
    return case.zoo and bool(_zoo().profile(spec.profile).by_type) and len(_gpu_types(case)) > 1


def _gpu_types(case: Case) -> list[str]:
    return sorted({g.gpu_type for g in case.groups})


def _fastest(spec: JobSpec, case: Case, elastic: bool, grants: bool = False) -> float:
    """The job's work over its fastest rate, all on one node of any of the case's GPU types: at
    every task count its bounds allow (``elastic``), else at its request; with ``grants``, each
    task also granted the cores of the case's largest node (a multi-resource policy may grant more
    than requested, and a speed model may run faster on more cores)."""
    if case.zoo:
        speed = _zoo().speed
    else:
        from clustersim.simulator.speed import LinearSpeed
        speed = LinearSpeed()
    counts_of = (lambda r: range(r.min_count, r.max_count + 1)) if elastic else (lambda r: (r.count,))
    cores = max(g.cpus for g in case.groups) if grants else None
    best = 0.0
    for kind in _gpu_types(case):
        one_node = SimpleNamespace(gpu_type=[kind])
        for counts in itertools.product(*(counts_of(r) for r in spec.roles)):
            alloc = {r.name: Tasks({0: n}, cpu=cores) if cores else {0: n} for r, n in zip(spec.roles, counts) if n}
            best = max(best, speed.rate(spec, alloc, one_node))
    return spec.total_work / best if best > 0 else math.inf


# ---------------------------------------------------------------------------- shadows
_STATE_FIELDS = tuple(f.name for f in fields(JobState) if f.name != "spec")


class _Twin:
    """Views for a shadow instance, equal to the engine's in every observable, with every job's
    hidden size (work and duration together) scaled by its own factor, 1 to 1,000 (>= 1, so that no
    observable moves: ``iterations_done`` is capped by the work), built from copies: a twin
    job's private state holds the rescaled spec, and the twin clock is a plain ``Observer``,
    with no engine behind it. A policy that reads ground truth around its view (``_state.spec``,
    ``view.clock._env``'s event queue, ...) decides differently here, or fails."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng((seed, 0x7E57))
        self.states: dict[str, tuple[JobState, JobState]] = {}   # job -> (engine's, twin)
        self.views: dict[str, JobView] = {}
        self.clock: Observer | None = None

    def job(self, real: JobView) -> JobView:
        jid = real.job_id
        twin = self.views.get(jid)
        if twin is None:
            st = real._state
            f = float(np.exp(self.rng.uniform(0.0, np.log(1000.0))))   # 1 to 1,000x: orders of sizes change
            spec = replace(st.spec, total_work=st.spec.total_work * f,
                           duration=None if st.spec.duration is None else st.spec.duration * f)
            copy = JobState(spec)
            self.states[jid] = (st, copy)
            self._refresh(st, copy)
            twin = self.views[jid] = JobView(copy, self.clock, False, real.declared_iterations)
        return twin

    @staticmethod
    def _refresh(st: JobState, copy: JobState) -> None:
        for name in _STATE_FIELDS:
            setattr(copy, name, getattr(st, name))

    def view(self, real: View) -> View:
        c = real.clock
        if self.clock is None:
            self.clock = Observer(now=c.now, speed=c.speed, usage=c.usage, cluster=c.cluster,
                                  profiled_error=c.profiled_error, seed=c.seed, faults=c.faults)
            self.cluster = ClusterView(c.cluster)
        self.clock.now = c.now
        for st, copy in self.states.values():   # views a policy keeps see the live state, as the engine's do
            self._refresh(st, copy)
        jobs = lambda xs: tuple(self.job(j) for j in xs)   # noqa: E731
        return View(self.clock, self.cluster, read_only({k: self.job(j) for k, j in real.pending.items()}),
                    read_only({k: self.job(j) for k, j in real.running.items()}),
                    jobs(real.arrived), jobs(real.finished), jobs(real.stopped))


class _Shadow:
    """A second instance of the policy that decides alongside the one under test and never acts:
    ``twin`` None gives it the very views the engine gives (any difference is nondeterminism or
    shared state); a ``_Twin`` gives it twin views (a difference is a read of hidden truth)."""

    def __init__(self, instance, twin: _Twin | None):
        self.instance, self.twin = instance, twin
        self.check = "hidden truth" if twin is not None else "nondeterminism"

    def call(self, method: str, view):
        v = self.twin.view(view) if self.twin is not None else view
        try:
            return getattr(self.instance, method)(v), None
        except Exception as e:   # noqa: BLE001  (reported against what the tested instance did)
            return None, e


def _canon_decision(d) -> tuple:
    if not isinstance(d, Decision):
        return ("not a Decision", repr(d))
    return (tuple((k, _canon_alloc(v)) for k, v in d.allocations.items()), d.wakeup)


def _state_of(policy_cls) -> dict[str, bytes]:
    """Every plain attribute of the policy's own classes (its bases up to ``Policy``) and of
    their modules, as bytes: what instances share."""
    out: dict[str, bytes] = {}
    owners = [k for k in policy_cls.__mro__ if k not in (object, Policy) and issubclass(k, Policy)]
    spaces = [(f"{k.__module__}.{k.__qualname__}", vars(k)) for k in owners]
    spaces += [(m, vars(sys.modules[m])) for m in dict.fromkeys(k.__module__ for k in owners) if m in sys.modules]
    for where, space in spaces:
        for name, v in list(space.items()):
            if name.startswith("__") or callable(v) or isinstance(v, (property, staticmethod, classmethod,
                                                                       types.ModuleType, types.GetSetDescriptorType,
                                                                       types.MemberDescriptorType, _CACHED)):
                continue
            out[f"{where}.{name}"] = _fingerprint(v)
    return out


def _fingerprint(v) -> bytes:
    try:
        return pickle.dumps(v, protocol=4)
    except Exception:   # noqa: BLE001  (an object pickle cannot take: its repr)
        return repr(v).encode()


def _state_change(before: dict[str, bytes], policy_cls) -> str | None:
    after = _state_of(policy_cls)
    changed = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if not changed:
        return None
    k = changed[0]
    what = "added" if k not in before else "removed" if k not in after else "changed"
    return (f"{k} was {what} during a run ({len(changed)} shared attribute(s) in all): state kept on the class or "
            "module is shared by every instance and leaks from one run into the next; keep it on the instance, "
            "set in reset")



# ---------------------------------------------------------------------------- determinism
def _child(spec_path: str, out_dir: str) -> None:
    """Entry point of the determinism check's subprocesses: run the cases, write the outputs."""
    module, qualname, params, cases_ = pickle.loads(Path(spec_path).read_bytes())
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    for i, case in enumerate(cases_):
        engine = _engine(case, obj(**(params or {})))
        engine.run().write(Path(out_dir) / str(i))


def _import_path(policy_cls) -> tuple[str, str] | None:
    module, qualname = policy_cls.__module__, policy_cls.__qualname__
    if module == "__main__" or "<locals>" in qualname:
        return None
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return (module, qualname) if obj is policy_cls else None


def _first_difference(a: Path, b: Path) -> str:
    if a.suffix == ".json":
        da, db = json.loads(a.read_text()), json.loads(b.read_text())
        keys = [k for k in da if da.get(k) != db.get(k)] or ["(formatting)"]
        return f"first differing key {keys[0]!r}: {da.get(keys[0])!r} vs {db.get(keys[0])!r}"
    import pyarrow.parquet as pq
    ta, tb = pq.read_table(a).to_pydict(), pq.read_table(b).to_pydict()
    for col in ta:
        x, y = ta[col], tb.get(col)
        if x != y:
            if y is None or len(x) != len(y):
                return f"column {col!r} has {len(x)} vs {len(y or [])} rows"
            i = next(i for i, (u, v) in enumerate(zip(x, y)) if u != v)
            return f"row {i}, column {col!r}: {x[i]!r} vs {y[i]!r}"
    return "same values, different bytes"


def _check_determinism(policy_cls, params, cases_: list[Case], hash_seeds=("1", "2")) -> None:
    where = _import_path(policy_cls)
    if where is None:
        raise _Violation("determinism", f"{policy_cls.__module__}.{policy_cls.__qualname__} cannot be imported "
                                        "in a fresh process; define the policy at a module's top level")
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        spec = Path(tmp) / "input.pickle"
        spec.write_bytes(pickle.dumps((*where, params, cases_)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        code = "import sys; from clustersim.conformance import _child; _child(sys.argv[1], sys.argv[2])"
        procs = []
        for h in hash_seeds:
            out = Path(tmp) / f"hash{h}"
            procs.append((h, out, subprocess.Popen([sys.executable, "-c", code, str(spec), str(out)],
                                                   env={**env, "PYTHONHASHSEED": h}, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, text=True)))
        for h, _, p in procs:
            _, err = p.communicate()
            if p.returncode:
                raise _Violation("determinism", f"the run with PYTHONHASHSEED={h} in a fresh process failed:\n"
                                                + err[-3000:])
        (h0, out0, _), *rest = procs
        for h, out, _ in rest:
            for i, case in enumerate(cases_):
                for name in OUTPUTS:
                    a, b = out0 / str(i) / name, out / str(i) / name
                    if a.read_bytes() != b.read_bytes():
                        raise _Violation("determinism", f"{case.label}: {name} differs between PYTHONHASHSEED={h0} "
                                                        f"and PYTHONHASHSEED={h} ({_first_difference(a, b)}); "
                                                        "ties broken by hash or set order?")


# ---------------------------------------------------------------------------- the suite
def _tags_of(policy_cls, tags) -> frozenset[str]:
    declared = frozenset(getattr(policy_cls, "tags", frozenset()) if tags is None else tags)
    unknown = declared - TAGS
    if unknown:
        raise ConformanceError(f"policy {_name(policy_cls)!r} fails check 'tags': unknown tag(s) {sorted(unknown)}; "
                               f"known: {sorted(TAGS)}", policy=_name(policy_cls), check="tags")
    if "oracle" in declared and not getattr(policy_cls, "oracle", False):
        raise ConformanceError(f"policy {_name(policy_cls)!r} fails check 'tags': it is tagged 'oracle' but does "
                               "not set oracle = True, so its views refuse ground truth",
                               policy=_name(policy_cls), check="tags")
    return declared | ({"oracle"} if getattr(policy_cls, "oracle", False) else frozenset())


def _name(policy_cls) -> str:
    return getattr(policy_cls, "name", None) or policy_cls.__name__


_MUTATION = re.compile(r"read-only|does not support item|can't set|cannot set|has no setter|object is not "
                       r"writable|assignment destination|immutable|frozen")


def _explain(e: BaseException) -> tuple[str, str]:
    """(check, why) for an error a run raised."""
    if isinstance(e, _Violation):
        return e.check, e.why
    if isinstance(e, RunawayError):
        return "event budget", f"runs away: {e}"
    if isinstance(e, OracleError):
        return "hidden truth", f"a non-oracle policy read ground truth through its view: {e}"
    if isinstance(e, CapacityError) and "which is down" in str(e):
        return "down nodes", f"it placed tasks on a node that is down (the engine refused the allocation): {e}"
    if isinstance(e, CapacityError):
        return "capacity", f"it over-allocated a node (the engine refused the allocation): {e}"
    if isinstance(e, _Raised):
        inner = e.error
        tb = "".join(traceback.format_exception(inner)[-3:]).strip()
        if isinstance(inner, (ValueError, TypeError, AttributeError)) and _MUTATION.search(str(inner)):
            return "views unchanged", f"{e.where} tried to mutate what it was given: {type(inner).__name__}: {inner}\n{tb}"
        return "decide raises", f"{e.where} raised {type(inner).__name__}: {inner}\n{tb}"
    if isinstance(e, PolicyError):
        if "(gang)" in str(e):
            return "gang bounds", f"it asked for a task count outside the job's bounds: {e}"
        return "valid decision", str(e)
    tb = "".join(traceback.format_exception(e)[-4:]).strip()
    return "engine", f"the run raised {type(e).__name__}: {e}\n{tb}"


def check_policy(policy_cls, *, params: dict | None = None, examples: int = EXAMPLES, seed: int = 0,
                 tags=None, determinism: bool = True, faults: bool | dict = False) -> None:
    """Run the conformance suite on ``policy_cls`` (a ``Policy`` subclass: ``policy_cls(**params)``
    makes an instance). Raises ``ConformanceError`` at the first failing check; returns None if
    the policy conforms. ``examples`` random inputs (drawn with hypothesis from ``seed``) follow
    one fixed contention input; ``tags`` overrides the class's ``tags`` (which choose the inputs);
    ``determinism=False`` skips the cross-process check (it starts two Python processes);
    ``faults=True`` (or a ``faults`` config) runs every input with a fault model (``FAULTS``):
    jobs may then end failed, and progress may go back to a checkpoint at a failure."""
    name = _name(policy_cls)
    tags = _tags_of(policy_cls, tags)
    oracle = bool(getattr(policy_cls, "oracle", False))
    first = contention_case(tags)
    # drawn only once the fixed input passed: a policy that fails at once fails in milliseconds
    inputs = itertools.chain([first], (c for c in _examples(tags, examples, seed)))
    if faults:
        fcfg = FAULTS if faults is True else faults
        inputs = (replace(c, faults=fcfg) for c in inputs)

    def fail(check: str, why: str, case: Case | None) -> ConformanceError:
        where = case.describe() if case else f"seed={seed}"
        repro = (f"check_policy({policy_cls.__qualname__}, params={params!r}, examples={examples}, seed={seed}"
                 + (f", faults={faults!r})" if faults else ")"))
        return ConformanceError(f"policy {name!r} fails check {check!r} on input {where}: {why}\n(reproduce: {repro})",
                                policy=name, check=check, where=where)

    ran: list[Case] = []
    for k, case in enumerate(inputs):
        ran.append(case)
        try:
            checked = k <= SHADOW_EXAMPLES
            out = run_case(policy_cls, case, params, tags=tags, shadows=checked, seed=seed + k)
            if checked:   # the same instance again: its reset must start it afresh
                try:
                    again = run_case(policy_cls, case, params, tags=tags, instance=out.policy)
                except (_Violation, _Raised, RunawayError, PolicyError, CapacityError, OracleError) as e:
                    check, why = _explain(e)
                    raise _Violation("reset", f"the same instance run a second time on the same input fails check "
                                              f"{check!r}: {why}; reset(view) must clear what a run leaves behind"
                                     ) from e
                if again.log != out.log:
                    i = next((i for i, (x, y) in enumerate(zip(out.log, again.log)) if x != y),
                             min(len(out.log), len(again.log)))
                    first = out.log[i] if i < len(out.log) else "no decision"
                    second = again.log[i] if i < len(again.log) else "no decision"
                    raise _Violation("reset", f"the same instance run a second time on the same input decides "
                                              f"otherwise at decision {i + 1}: {second} vs {first} the first time; "
                                              "reset(view) must clear what a run leaves behind")
        except (ConformanceError, KeyboardInterrupt):
            raise
        except Exception as e:
            check, why = _explain(e)
            raise fail(check, why, case) from e
    if determinism:
        try:
            _check_determinism(policy_cls, params, ran[:2])
        except _Violation as e:
            raise fail(e.check, e.why, None) from None
