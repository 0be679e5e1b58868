"""The core contract: what a policy sees, what it may ask, and how the engine accounts for it."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.policies.base import Decision, Policy, PolicyError
from clustersim.simulator.cluster import CapacityError
from clustersim.simulator.engine import Engine, Limits, Observe, RunawayError
from clustersim.simulator.job import JobSpec, RoleSpec, StopReason, Tasks
from clustersim.simulator.overhead import Change, ConstantOverhead, StopFree, Transition
from tests.factories import OnNodeZero, cluster, gpu_job, jobs

EXACT = dict(rel=1e-9, abs=1e-9)


class Script(Policy):
    """Applies ``plan[t]`` (allocations) at the decision at time t, and asks to be woken at the next."""

    name = "script"

    def __init__(self, plan: dict[float, dict], probe=None):
        self.plan = plan
        self.probe = probe or (lambda view: None)
        self.seen = {}

    def decide(self, view):
        self.seen[view.now] = self.probe(view)
        todo = self.plan.pop(view.now, {})
        later = [t for t in self.plan if t > view.now]
        return Decision(dict(todo), wakeup=min(later) - view.now if later else None)


def run(specs, policy, **kw):
    engine = Engine(specs, kw.pop("cl", None) or cluster(), policy, progress=False, **kw)
    rec = engine.run()
    return engine, {s.spec.job_id: s for s in rec.states}, rec


def test_a_change_during_a_reconfiguration_keeps_each_leftover_phase_at_its_own_rate():
    # 100 units of work; 1 unit/s at 2 GPUs (LinearSpeed). Stop-free scaling: 10 s of preparation at the
    # slower rate, then a 2 s pause. At t=10 scale 2 -> 4 GPUs; at t=15 (mid-preparation) scale to 1 GPU.
    job = gpu_job("a", 0.0, 2, 100.0, min_gpus=1, max_gpus=4)
    policy = Script({0.0: {"a": {"worker": {0: 2}}}, 10.0: {"a": {"worker": {0: 4}}},
                     15.0: {"a": {"worker": {0: 1}}}})
    _, states, _ = run(jobs(job), policy, overhead=ConstantOverhead(rescale_s=10.0, stop_free=True, pause_s=2.0))
    a = states["a"]
    # 0-10: 10 done; 10-15 preparing at 1/s: 15; 15-20 rest of that preparation at min(1, 0.5): 17.5;
    # 20-22 its pause; 22-32 the new preparation at 0.5; 32-34 the new pause; then 77.5 left at 0.5/s
    assert a.end_time == pytest.approx(189.0, **EXACT)
    # lost against the steady rate: first change 10*(1-1/2) + 2 = 7; at t=15 the 4.5 s it had not yet
    # cost is taken back and the leftover and new phases cost 0 + 2 + 0 + 2 = 4 against 0.5/s
    assert a.overhead_s == pytest.approx(6.5, **EXACT)
    assert a.rescales == 2


def test_graceful_scale_in_holds_the_leaving_gpus_until_they_exit():
    # EDL stop-free scale-in: the two leaving workers exit for the model's scale_in_s (1.8 s default)
    job = gpu_job("a", 0.0, 4, 100.0, min_gpus=2, max_gpus=4)
    seen = {}

    class ShrinkThenReuse(Policy):
        name = "shrink"

        def decide(self, view):
            seen.setdefault(view.now, view.cluster.free_gpus)
            if view.now == 0.0:
                return Decision({"a": {"worker": {0: 4}}}, wakeup=10.0)
            if view.now == 10.0:
                return Decision({"a": {"worker": {0: 2}}})
            return Decision()

    engine, states, rec = run(jobs(job), ShrinkThenReuse(), overhead=StopFree(charge_start=False))
    assert seen[10.0] == 0.0
    (released,) = [t for t in seen if 10.0 < t < 20.0]   # the release asks for a decision once they are gone
    assert (released, seen[released]) == (pytest.approx(11.8), 2.0)
    assert states["a"].service == pytest.approx(4 * 10.0 + 4 * 1.8 + 2 * (states["a"].end_time - 11.8), **EXACT)
    # the event is the change itself, 4 -> 2 GPUs (it read 6 -> 4: the exiting pair counted on both sides)
    (shrink,) = [e for e in rec.events().to_pylist() if e["kind"] == "scale_in"]
    assert (shrink["time"], shrink["gpus_before"], shrink["gpus_after"]) == (10.0, 4.0, 2.0)

    class Grab(Policy):   # gives the leaving workers' GPUs to another job in the same decision
        name = "grab"

        def decide(self, view):
            if view.now == 0.0:
                return Decision({"a": {"worker": {0: 4}}}, wakeup=10.0)
            if view.now == 10.0:
                return Decision({"a": {"worker": {0: 2}}, "b": {"worker": {0: 2}}})
            return Decision()

    # handed over: b holds them from t=10 but starts training once a's workers have exited (11.8 s)
    engine, states, rec = run(jobs(job, gpu_job("b", 0.0, 2, 5.0)), Grab(), overhead=StopFree(charge_start=False))
    b = states["b"]
    assert (b.first_start, b.end_time) == (10.0, pytest.approx(10.0 + 1.8 + 5.0))
    assert b.overhead_s == pytest.approx(1.8) and states["a"].service == pytest.approx(
        4 * 10.0 + 2 * (states["a"].end_time - 10.0))


PS = (RoleSpec("ps", 1, 0.0, 4.0, 8.0, 1, 4), RoleSpec("worker", 2, 0.0, 4.0, 8.0, 1, 8))


def test_resizing_a_role_changes_its_grant_and_is_charged_as_a_resize():
    job = JobSpec(0, "p", 0.0, PS, total_work=100.0, duration=100.0)
    policy = Script({0.0: {"p": {"ps": {0: 1}, "worker": {0: 2}}},
                     10.0: {"p": {"ps": Tasks({0: 1}, cpu=12.0, mem=20.0), "worker": {0: 2}}}})
    engine, states, rec = run([job], policy, cl=cluster(1, gpus=0, cpus=32, mem=64),
                              overhead=ConstantOverhead(rescale_s=5.0), until=11.0)
    p = states["p"]
    assert p.resizes == 1 and p.rescales == 0
    assert p.allocation["ps"].cpu == 12.0 and p.allocation["ps"].mem == 20.0
    assert tuple(engine.cluster.used) == (0.0, 12.0 + 8.0, 20.0 + 16.0)
    assert list(rec.events().column("kind").to_pylist())[:2] == ["start", "resize"]
    assert p.overhead_s == pytest.approx(5.0)


def test_grants_and_task_counts_are_checked():
    job = JobSpec(0, "p", 0.0, PS, total_work=100.0, duration=100.0)
    for alloc, message in (({"ps": Tasks({0: 1}, cpu=-1.0), "worker": {0: 2}}, "grants cpu=-1.0"),
                           ({"ps": {0: 1.5}, "worker": {0: 2}}, "1.5 tasks on node 0")):
        with pytest.raises(PolicyError, match=message):
            run([job], Script({0.0: {"p": alloc}}), cl=cluster(1, gpus=0, cpus=32, mem=64))


def test_views_are_read_only():
    job = gpu_job("a", 0.0, 2, 100.0)
    caught = []

    class Vandal(Policy):
        name = "vandal"

        def decide(self, view):
            if view.now == 0.0:
                return Decision({"a": {"worker": {0: 2}}}, wakeup=1.0)
            if view.now != 1.0:
                return Decision()
            for attempt in (lambda: view.cluster.free.__setitem__((0, 0), 99.0),
                            lambda: view.cluster.up.__setitem__(0, False),
                            lambda: view.running["a"].allocation.__setitem__("worker", {0: 4}),
                            lambda: view.running["a"].allocation["worker"].__setitem__(0, 4),
                            lambda: view.running.pop("a")):
                with pytest.raises((TypeError, ValueError, AttributeError)):
                    attempt()
                caught.append(True)
            return Decision()

    _, states, _ = run(jobs(job), Vandal())
    assert len(caught) == 5 and states["a"].end_time == 100.0


def test_decisions_run_in_rounds_with_a_decision_interval():
    starts = []

    class Log(Policy):
        name = "log"

        def decide(self, view):
            starts.append(view.now)
            return Decision({j: {"worker": {0: 1}} for j in view.pending})

    _, states, _ = run(jobs(gpu_job("a", 3.0, 1, 10.0), gpu_job("b", 21.0, 1, 4.0)), Log(),
                       decision_interval=10.0)
    assert starts == [10.0, 20.0, 30.0, 40.0]    # arrivals at 3 and 21, a finishes at 20, b at 34 -> 40
    assert (states["a"].first_start, states["b"].first_start) == (10.0, 30.0)
    assert states["b"].end_time == 34.0


def test_measured_throughput_names_the_allocation_and_carries_seeded_noise():
    job = gpu_job("a", 0.0, 2, 100.0, min_gpus=1, max_gpus=4)
    samples = {}

    for noise in (0.0, 0.05, 0.05):
        policy = Script({0.0: {"a": {"worker": {0: 2}}}, 10.0: {"a": {"worker": {0: 4}}}, 30.0: {}},
                        probe=lambda view: view.running["a"].throughput_samples if view.now == 30.0 else None)
        run(jobs(job), policy, observe=Observe(throughput_noise=noise), seed=3)
        samples.setdefault(noise, []).append(policy.seen[30.0])
    (exact,) = samples[0.0]
    assert [(s.start, s.end, s.rate, dict(s.allocation["worker"])) for s in exact] == [
        (0.0, 10.0, 1.0, {0: 2}), (10.0, 30.0, 2.0, {0: 4})]
    noisy, again = samples[0.05]
    assert noisy == again                        # same seed, same measurements
    assert [s.rate for s in noisy] != [1.0, 2.0] and all(abs(s.rate / t - 1) < 0.25 for s, t in zip(noisy, (1, 2)))


def test_profiled_rates_are_readable_without_oracle_rights_and_stop_reasons_are_given():
    job = gpu_job("a", 0.0, 2, 100.0, min_gpus=1, max_gpus=4)
    def probe(view):
        if view.now == 20.0:
            a = view.pending["a"]
            return (a.profiled.rate({"worker": {0: 4}}), a.profiled.counts_rate({"worker": 1}), a.stop_reason,
                    a.waited)

    policy = Script({0.0: {"a": {"worker": {0: 2}}}, 10.0: {"a": None}, 20.0: {}}, probe)
    run(jobs(job), policy, until=20.5)
    assert policy.seen[20.0] == (2.0, 0.5, StopReason.PREEMPTED, 10.0)


def test_a_node_failure_stops_its_jobs_with_the_reason():
    job = gpu_job("a", 0.0, 2, 100.0)
    policy = Script({0.0: {"a": {"worker": {0: 2}}}, 50.0: {}},
                    lambda view: view.pending["a"].stop_reason if view.now == 50.0 else None)
    engine = Engine(jobs(job), cluster(2), policy, progress=False, until=50.5)
    engine.fail_node(5.0, 0)
    engine.run()
    assert policy.seen[50.0] is StopReason.NODE_DOWN
    with pytest.raises(ValueError, match="in the past"):
        engine.fail_node(1.0, 1)


def test_negative_or_endless_wakeups_are_refused():
    class Bad(Policy):
        name = "bad"

        def __init__(self, delay):
            self.delay = delay

        def decide(self, view):
            return Decision(wakeup=self.delay)

    for delay in (-1.0, 0.0, float("inf"), float("nan")):
        with pytest.raises(PolicyError, match="must be a finite number > 0"):
            run(jobs(gpu_job("a", 0.0, 1, 10.0)), Bad(delay))


def test_a_policy_waking_every_microsecond_hits_the_event_budget():
    class Busy(Policy):
        name = "busy"

        def decide(self, view):
            return Decision({j: {"worker": {0: 1}} for j in view.pending}, wakeup=1e-6)

    with pytest.raises(RunawayError, match=r"policy 'busy': the run passed its event budget \(5,000 events"):
        run(jobs(gpu_job("a", 0.0, 1, 10.0)), Busy(), limits=Limits(max_events=5000))


def test_transitions_reject_negative_times():
    with pytest.raises(ValueError, match="finite and >= 0"):
        Transition(pause_s=-1.0)
    assert StopFree().transition(gpu_job("a", 0, 2, 1.0), Change.SCALE_IN, {"worker": {0: 2}},
                                 {"worker": {0: 1}}).release_s == 1.8
    assert np.isfinite(StopFree().transition(gpu_job("a", 0, 2, 1.0), Change.RESIZE, {"worker": {0: 2}},
                                             {"worker": Tasks({0: 2}, cpu=3.0)}).pause_s)


def test_the_timeline_integrates_to_the_jobs_gpu_seconds_between_decision_rounds():
    specs = jobs(gpu_job("a", 0.0, 2, 130.0), gpu_job("b", 0.0, 2, 250.0), gpu_job("c", 30.0, 4, 70.0))
    _, states, rec = run(specs, OnNodeZero(), decision_interval=100.0)
    t = rec.timeline()
    times = t.column("time").to_pylist() + [rec.end_time]
    used = t.column("gpu_used").to_pylist()
    area = sum(u * (b - a) for u, a, b in zip(used, times, times[1:]))
    assert area == pytest.approx(sum(s.service for s in states.values()), **EXACT) == 2 * 130 + 2 * 250 + 4 * 70
