"""Elastic-Tiresias (EDL §5.1) on hand-made states: expansion (R2), compaction (R1), reclaim,
and the trace transform that makes GPU jobs elastic."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from clustersim import policies
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import task_counts
from clustersim.simulator.overhead import ConstantOverhead
from clustersim.traces.transform import elastic
from tests.factories import cluster, gpu_job, jobs


class TableSpeed:
    """Iterations/s by job and GPU count (placement-blind)."""

    def __init__(self, curves):
        self.curves = curves

    def rate(self, spec, alloc, cluster=None):
        n = sum(sum(t.values()) for t in alloc.values())
        return self.curves[spec.job_id](n)


class Watch:
    """Records every job's GPU count after each decision."""

    def __init__(self, inner):
        self.inner, self.name, self.oracle = inner, inner.name, inner.oracle
        self.decides_on_slowdown = inner.decides_on_slowdown   # what the policy declares to the engine
        self.log = []

    def reset(self, view):
        self.inner.reset(view)

    def decide(self, view):
        d = self.inner.decide(view)
        counts = {j: sum(task_counts(v.allocation).values()) for j, v in view.running.items()}
        counts.update({j: sum(task_counts(a or {}).values()) for j, a in d.allocations.items()})
        self.log.append((view.now, counts))
        return d


def run(specs, speed, cl, until=None, **params):
    pol = Watch(policies.make("elastic_tiresias", **params))
    rec = Engine(specs, cl, pol, speed=speed, overhead=ConstantOverhead(), until=until).run()
    return pol, rec


def test_expansion_gives_gpus_one_at_a_time_by_relative_speedup():
    """Idle 4 GPUs, X and Y at 2: X's speed saturates at 3 GPUs, Y's is linear. Gains by hand:
    X 2->3 = 0.5 (tie with Y, X first by index), Y 2->3 = 0.5, Y 3->4 = 1/3, X 3->4 = 0 (stops),
    Y 4->5 = 1/4: X ends with 3 GPUs, Y with 5."""
    specs = jobs(gpu_job("x", 0, 2, 1e6, work=1e6, min_gpus=1, max_gpus=8),
                 gpu_job("y", 0, 2, 1e6, work=1e6, min_gpus=1, max_gpus=8))
    speed = TableSpeed({"x": lambda n: float(min(n, 3)), "y": lambda n: float(n)})
    pol, _ = run(specs, speed, cluster(nodes=1, gpus=8), thresholds=[1e9, 2e9])
    t, first = pol.log[0]
    assert t == 0 and first == {"x": 3, "y": 5}   # started at their requests, grown in the same decision


def compacting(compaction_threshold: int, c_work: float):
    """Two 4-GPU machines: A and B (4 GPUs, elastic 2..4) from t = 0, then C (``c_work``), D and E
    (2 GPUs, elastic 1..2) at t = 30; S(n) = sqrt(n); thresholds 1 and 100 GPU-s; no expansion."""
    specs = jobs(gpu_job("a", 0, 4, 1e6, work=1e6, min_gpus=2, max_gpus=4),
                 gpu_job("b", 0, 4, 1e6, work=1e6, min_gpus=2, max_gpus=4),
                 gpu_job("c", 30, 2, c_work, work=c_work, min_gpus=1, max_gpus=2),
                 gpu_job("d", 30, 2, 1e6, work=1e6, min_gpus=1, max_gpus=2),
                 gpu_job("e", 30, 2, 1e6, work=1e6, min_gpus=1, max_gpus=2))
    speed = TableSpeed({j: math.sqrt for j in "cdeab"})
    pol, _ = run(specs, speed, cluster(nodes=2, gpus=4), thresholds=[1.0, 100.0],
                 compaction_threshold=compaction_threshold, expansion=False)
    return pol


def test_compaction_starts_waiting_jobs_on_freed_and_idle_gpus():
    """Two 4-GPU machines, thresholds 1 and 100 GPU-s. A and B (4 GPUs, elastic 2..4) run first and
    reach G2 (t = 25); C, D, E (elastic 1..2) arrive at t = 30 in G0 and preempt them, then drop to
    G1 (t = 30.5), so A and B wait behind them: more than N = 1 jobs wait, C, D, E may give GPUs. S(n) = sqrt(n), so E(n) = sqrt(n). For A,
    machine 1 holds E (2 GPUs) and 2 idle GPUs: p = 2 from idle gains sqrt(2) = 1.414; p = 3 adds
    one of E's (loss sqrt(2) - 1) for 1.732 - 0.414 = 1.318; machine 0 (C and D) gives at best
    0.586. So A starts on machine 1's two idle GPUs, below its request, before anything ends."""
    pol = compacting(compaction_threshold=1, c_work=1e6)
    assert any(t == 30 and c.get("a") == 0 and c.get("b") == 0 for t, c in pol.log)   # preempted by G0
    restarted = [(t, c) for t, c in pol.log if t > 30 and c.get("a")]
    assert restarted, "A never started again"
    t, counts = restarted[0]
    assert t < 100 and counts["a"] == 2
    for _, c in pol.log:   # victims never below ceil(r * requested) = 1 (C, D, E) and no job over its request
        assert all(c.get(j, 1) >= 1 for j in "cde") and all(c.get(j, 0) <= 2 for j in "cde")


def starting_on_what_is_free(**params):
    """One 4-GPU machine. A (3 GPUs, rigid) runs from t = 0; B and C (4 GPUs requested, elastic
    1..4) arrive at t = 10: two jobs wait, more than N = 1, and one GPU is idle. S(n) = sqrt(n)."""
    specs = jobs(gpu_job("a", 0, 3, 1e6, work=1e6),
                 gpu_job("b", 10, 4, 1e6, work=1e6, min_gpus=1, max_gpus=4),
                 gpu_job("c", 10, 4, 1e6, work=1e6, min_gpus=1, max_gpus=4))
    speed = TableSpeed({j: math.sqrt for j in "abc"})
    pol, _ = run(specs, speed, cluster(nodes=1, gpus=4), thresholds=[1e9, 2e9], compaction_threshold=1,
                 expansion=False, until=200.0, **params)
    return pol


def test_a_pending_job_starts_on_what_is_free():
    """EDL §5.1: the floor ⌈r·p⌉ is for shrinking running jobs. By hand: A is rigid, so it gives
    nothing; the one idle GPU is the only option. t(p) = sqrt(p)/p is best at p* = 1, so
    E_B(1) = sqrt(1)/1 = 1 > 0: B (first in arrival order) starts at t = 10 on 1 GPU, C still
    waits (no idle GPU left, no donor). With ``start_floor`` B needs ⌈0.5·4⌉ = 2 GPUs: only 1 is
    free, so neither starts."""
    log = starting_on_what_is_free().log
    at10 = [c for t, c in log if t == 10]
    assert at10 and at10[-1].get("b") == 1 and not at10[-1].get("c")
    assert max(c.get("b", 0) for _, c in log) == 1
    old = starting_on_what_is_free(start_floor=True).log
    assert all(not c.get("b") and not c.get("c") for _, c in old)


def test_no_compaction_at_or_below_the_threshold():
    """The same state with N = 10: two waiting jobs do not exceed N, so A and B wait at their
    requested sizes until GPUs come free."""
    pol = compacting(compaction_threshold=10, c_work=500)
    assert all(c.get("a", 0) in (0, 4) for _, c in pol.log)


def test_reclaim_shrinks_expanded_jobs_when_a_job_waits():
    """X grows to the whole machine while alone; when Y arrives, X goes back to its request and Y runs."""
    specs = jobs(gpu_job("x", 0, 2, 1e6, work=1e6, min_gpus=1, max_gpus=4),
                 gpu_job("y", 100, 2, 1e3, work=1e3))
    speed = TableSpeed({"x": float, "y": float})
    pol, rec = run(specs, speed, cluster(nodes=1, gpus=4), thresholds=[1e9, 2e9])
    assert max(c.get("x", 0) for t, c in pol.log if t < 100) == 4
    assert any(c.get("y") == 2 and c.get("x") == 2 for t, c in pol.log if t >= 100)
    assert rec.summary()["jobs_finished"] == 2


def test_elastic_transform_bounds():
    role = {"name": "worker", "count": 5, "gpu": 1.0, "cpu": 0.0, "mem": 0.0, "min_count": 5, "max_count": 5}
    ps = [{**role, "name": "ps", "gpu": 0.0}, role]
    t = pa.table({"roles": [[role], [{**role, "count": 1, "min_count": 1, "max_count": 1}], ps]})
    out = elastic(t, min_fraction=0.5, max_tasks=16)["roles"].to_pylist()
    assert (out[0][0]["min_count"], out[0][0]["max_count"]) == (3, 16)   # ceil(0.5 * 5) = 3
    assert (out[1][0]["min_count"], out[1][0]["max_count"]) == (1, 16)
    assert out[2] == ps                                                   # parameter-server jobs unchanged
    with pytest.raises(Exception, match="min_fraction"):
        elastic(t, min_fraction=0.0)


def straggler_run(remove: bool, slow_at: float | None = 100.0):
    """EDL §5.3: a job of 8 workers over two 4-GPU machines (elastic 4..8, linear speed, 2000 s of
    work at 8 GPUs); at 100 s a worker on machine 1 turns 4x slower for 10,000 s, so the
    synchronous job runs at a quarter of its pace (``slow_at=None``: no straggler). Stop-free
    scaling (EDL Tables 2-3 defaults)."""
    from clustersim.simulator import faults, overhead

    fm = faults.make({"enabled": True})
    spec = gpu_job("a", 0.0, 8, 2000.0, work=16000.0, min_gpus=4, max_gpus=8)
    pol = Watch(policies.make("elastic_tiresias", thresholds=[1e12, 2e12], remove_stragglers=remove,
                                     straggler_check_s=60.0))
    seen = []
    inner = pol.decide

    def decide(view):
        for jv in view.running.values():
            seen.append((view.now, jv.slowest_task))
        return inner(view)

    pol.decide = decide
    eng = Engine(jobs(spec), cluster(nodes=2, gpus=4), pol, overhead=overhead.make({"kind": "stop_free"}), faults=fm)
    if slow_at is not None:
        eng.at(slow_at, lambda: fm.slow_task("a", "worker", 4.0, 10000.0, node=1))
    rec = eng.run()
    return rec, [(e["kind"], e["time"], e["gpus_after"]) for e in rec.events().to_pylist()], seen


def test_straggler_removal_drops_the_slow_worker_and_grows_back_healthy():
    rec, events, seen = straggler_run(remove=True)
    # the engine decides when the job's slowdown changes: the policy sees the slow task at 100 s
    assert (100.0, ("worker", 1, 0.25)) in seen
    # scale-in by one at 100 s (the leaving worker exits in EDL's 1.8 s), then expansion adds a
    # healthy worker back as soon as the exit is done
    assert [(k, t) for k, t, _ in events[:3]] == [("start", 0.0), ("scale_in", 100.0), ("scale_out", 101.8)]
    assert [e for e in events if e[0] == "scale_in"] == [events[1]]
    assert all(s is None for t, s in seen if t > 100.0)    # the straggler left with its worker
    # looked at while it ran: at the slowdown (100 s) and when the exit ended (101.8 s); no polling
    assert [t for t, _ in seen] == [100.0, 101.8]
    end = rec.states[0].end_time
    slow_rec, slow_events, _ = straggler_run(remove=False)
    assert [k for k, _, _ in slow_events] == ["start", "finish"]
    # kept, the straggler holds the job at 1/4 pace from 100 s; training began after the start's
    # 21 + 0.67 s (stop-free launch and pause, the default costs): 100 + (2000 - 78.33) x 4 s
    assert slow_rec.states[0].end_time == pytest.approx(100.0 + (2000.0 - (100.0 - 21.0 - 2.0 / 3.0)) * 4, rel=1e-9)
    assert end < 2200.0      # removed at 100 s: about 2000 s plus the short stop-free pauses


def test_straggler_removal_wakes_nobody_without_a_straggler():
    # no slowdown: the job's ~2000 s run is decided on at its arrival and its finish only (before,
    # the policy woke every straggler_check_s while a job ran: ~33 wake-ups at 60 s here)
    rec, events, seen = straggler_run(remove=True, slow_at=None)
    assert [k for k, _, _ in events] == ["start", "finish"]
    assert seen == []    # no decision while the job ran


def test_a_straggler_seen_while_its_job_reconfigures_is_looked_at_again():
    # slow at 5 s, while the job's start is still launching (stop-free: 21 + 0.67 s): it cannot be
    # scaled in then, so the policy wakes straggler_check_s = 60 s later (5 + 60 = 65 s) and drops it
    rec, events, seen = straggler_run(remove=True, slow_at=5.0)
    assert [t for t, _ in seen] == [5.0, 65.0, 66.8]
    assert [(k, t) for k, t, _ in events[:3]] == [("start", 0.0), ("scale_in", 65.0), ("scale_out", 66.8)]


def test_only_a_policy_that_removes_stragglers_is_asked_at_a_slowdown():
    # without remove_stragglers the policy does not declare decides_on_slowdown: the slowdown at
    # 100 s asks for no decision, and the job, held at 1/4 pace, is decided on at its start and end only
    assert policies.make("elastic_tiresias", remove_stragglers=True).decides_on_slowdown
    assert not policies.make("elastic_tiresias").decides_on_slowdown
    rec, events, seen = straggler_run(remove=False)
    assert [k for k, _, _ in events] == ["start", "finish"]
    assert seen == []
