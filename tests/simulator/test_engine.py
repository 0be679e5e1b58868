"""The engine's timing is exact: completions are computed from piecewise-constant rates."""

import math

import pytest

from clustersim.policies.base import Decision, OracleError, Policy, PolicyError
from clustersim.policies.fifo import Fifo
from clustersim.policies.placement import strategy
from clustersim.simulator.cluster import CapacityError
from clustersim.simulator.engine import Engine, RunawayError
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster, gpu_job, jobs

EXACT = dict(rel=1e-12, abs=1e-9)


class Scripted(Policy):
    """Applies ``plan[t] = {job_id: alloc}`` at the first decision at or after t."""

    name = "scripted"

    def __init__(self, plan: dict[float, dict]):
        self.plan = sorted(plan.items())

    def decide(self, view):
        d = Decision()
        while self.plan and self.plan[0][0] <= view.now:
            d.allocations.update(self.plan.pop(0)[1])
        if self.plan:
            d.wakeup = self.plan[0][0] - view.now
        return d


def run(specs, policy, **kw):
    engine = Engine(specs, kw.pop("cl", None) or cluster(), policy, progress=False, **kw)
    rec = engine.run()
    return {s.spec.job_id: s for s in rec.states}, rec


def test_single_job_finishes_in_exactly_its_duration():
    states, rec = run(jobs(gpu_job("a", 10.0, 2, 164.0, work=606.0)), Fifo())
    a = states["a"]
    assert a.first_start == 10.0
    assert a.end_time == pytest.approx(174.0, **EXACT)
    assert a.service == pytest.approx(2 * 164.0, **EXACT)
    assert rec.summary()["jct_mean"] == pytest.approx(164.0, **EXACT)


@pytest.mark.parametrize("overhead, end, lost", [
    (ConstantOverhead(), 70.0, 0.0),                                  # 40 done at 1/s, 60 left at 2/s
    (ConstantOverhead(rescale_s=10.0), 80.0, 10.0),                   # stop-resume: 10 s without progress
    (ConstantOverhead(rescale_s=10.0, stop_free=True), 75.0, 5.0),    # stop-free: 10 s at the old rate
    (ConstantOverhead(rescale_s=10.0, stop_free=True, pause_s=2.0), 77.0, 7.0),
])
def test_mid_run_rate_change_gives_exact_piecewise_completion(overhead, end, lost):
    spec = gpu_job("a", 0.0, 2, 100.0, min_gpus=1, max_gpus=4)   # 1 iteration/s on its 2 requested GPUs
    plan = {0.0: {"a": {"worker": {0: 2}}}, 40.0: {"a": {"worker": {0: 4}}}}
    states, rec = run(jobs(spec), Scripted(plan), overhead=overhead)
    a = states["a"]
    assert a.end_time == pytest.approx(end, **EXACT)
    assert a.overhead_s == pytest.approx(lost, **EXACT)
    assert a.overhead_gpu_s == pytest.approx(4 * lost, **EXACT)
    assert a.rescales == 1
    assert a.service == pytest.approx(2 * 40 + 4 * (end - 40), **EXACT)
    kinds = rec.events().column("kind").to_pylist()
    assert kinds == ["start", "scale_out", "finish"]


def test_preempted_job_keeps_its_progress_and_pays_the_resume_cost():
    spec = gpu_job("a", 0.0, 1, 100.0)
    plan = {0.0: {"a": {"worker": {0: 1}}}, 30.0: {"a": None}, 50.0: {"a": {"worker": {0: 1}}}}
    states, _ = run(jobs(spec), Scripted(plan), overhead=ConstantOverhead(resume_s=5.0))
    a = states["a"]
    # 30 s done, 20 s stopped, 5 s restoring, 70 s more
    assert a.end_time == pytest.approx(30 + 20 + 5 + 70, **EXACT)
    assert (a.preemptions, a.overhead_s, a.first_start) == (1, 5.0, 0.0)
    assert a.service == pytest.approx(30 + 75, **EXACT)


def test_reconfiguring_again_while_paused_waits_for_the_first_pause():
    spec = gpu_job("a", 0.0, 2, 100.0, min_gpus=1, max_gpus=4)
    plan = {0.0: {"a": {"worker": {0: 2}}}, 10.0: {"a": {"worker": {0: 4}}}, 15.0: {"a": {"worker": {0: 3}}}}
    states, _ = run(jobs(spec), Scripted(plan), overhead=ConstantOverhead(rescale_s=10.0))
    a = states["a"]
    # paused 10..20 by the first rescale, the second adds its own 10 s: paused until 30, then 90 left at 1.5/s
    assert a.end_time == pytest.approx(30 + 90 / 1.5, **EXACT)
    assert a.overhead_s == pytest.approx(20.0, **EXACT)


def test_over_allocation_is_refused_naming_policy_job_and_node():
    specs = jobs(gpu_job("a", 0.0, 3, 10.0), gpu_job("b", 0.0, 2, 10.0))
    plan = {0.0: {"a": {"worker": {0: 3}}, "b": {"worker": {0: 2}}}}
    with pytest.raises(CapacityError, match=r"policy 'scripted': job 'b' .* asks for 2 gpu on node 0, which has 1 free"):
        run(specs, Scripted(plan))


def test_gang_and_unknown_jobs_are_refused():
    specs = jobs(gpu_job("a", 0.0, 4, 10.0))
    with pytest.raises(PolicyError, match=r"job 'a' role 'worker' gets 2 tasks; it must run with 4..4 \(gang\)"):
        run(specs, Scripted({0.0: {"a": {"worker": {0: 2}}}}))
    with pytest.raises(PolicyError, match=r"job 'zz' is not pending or running"):
        run(specs, Scripted({0.0: {"zz": {"worker": {0: 1}}}}))
    with pytest.raises(PolicyError, match=r"job 'a' has no role 'ps'"):
        run(specs, Scripted({0.0: {"a": {"worker": {0: 4}, "ps": {0: 1}}}}))


def test_a_job_larger_than_the_cluster_is_a_clear_error():
    with pytest.raises(ValueError, match=r"job 'big' asks for more than the whole cluster "
                                         r"\(8 GPUs of 4; requested: worker 8 x 1 GPU"):
        Engine(jobs(gpu_job("big", 0.0, 8, 10.0)), cluster(), Fifo(), progress=False)


def test_capacity_is_never_exceeded_and_accounting_balances():
    import numpy as np
    specs = jobs(*(gpu_job(f"j{i}", i * 3.0, g, 50.0 + 7 * i) for i, g in enumerate([1, 2, 4, 8, 1, 2, 8, 4] * 5)))
    cl = cluster(nodes=3, gpus=8)
    states, rec = run(specs, Fifo(), cl=cl)
    tl = rec.timeline()
    assert max(tl.column("gpu_used").to_pylist()) <= cl.total_gpus
    assert np.all(cl.free == cl.capacity)  # everything released at the end
    gpu_s = sum(s.service for s in states.values())
    assert gpu_s == pytest.approx(sum(s.num_gpus * s.duration for s in specs), rel=1e-9)


def test_the_timeline_keeps_one_row_per_instant_after_its_decision_and_integrates_to_the_gpu_seconds():
    # 4 GPUs, FIFO, a decision at every event: a (2 GPUs, 100 s) and b (2 GPUs, 50 s) start at 0;
    # c (4 GPUs, 30 s) arrives at 10 and waits for both: b ends at 50 (c still cannot fit), a at
    # 100 (c starts at once, the same instant), c ends at 130. A finish whose decision follows at
    # its instant leaves that instant one row, as the decision leaves it.
    specs = jobs(gpu_job("a", 0.0, 2, 100.0), gpu_job("b", 0.0, 2, 50.0), gpu_job("c", 10.0, 4, 30.0))
    states, rec = run(specs, Fifo())
    t = rec.timeline()
    rows = list(zip(*(t.column(c).to_pylist() for c in ("time", "gpu_used", "running", "pending"))))
    assert rows == [(0.0, 4.0, 2, 0), (10.0, 4.0, 2, 1), (50.0, 2.0, 1, 1), (100.0, 4.0, 1, 0), (130.0, 0.0, 0, 0)]
    times = [r[0] for r in rows] + [rec.end_time]
    area = sum(r[1] * (b - a) for r, a, b in zip(rows, times, times[1:]))
    # 4 x 10 + 4 x 40 + 2 x 50 + 4 x 30 = 420 = 2 x 100 + 2 x 50 + 4 x 30, the jobs' GPU-seconds
    assert area == sum(s.service for s in states.values()) == 420.0


def test_node_failure_requeues_its_jobs_and_they_finish_later():
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 0.0, 4, 100.0))
    engine = Engine(specs, cluster(nodes=2, gpus=4), Fifo(), progress=False)
    engine.fail_node(at=40.0, node=0, repair_after=60.0)
    rec = engine.run()
    st = {s.spec.job_id: s for s in rec.states}
    assert st["a"].failures == 1 and st["b"].failures == 0
    # a: 40 s done on node 0, restarts on node 0 when it is repaired at t=100 (b still holds node 1)
    assert st["a"].end_time == pytest.approx(160.0, **EXACT)
    assert st["b"].end_time == pytest.approx(100.0, **EXACT)


def test_a_policy_that_never_schedules_is_stopped_by_the_livelock_guard():
    class Idle(Policy):
        name = "idle"

        def decide(self, view):
            return Decision(wakeup=10.0)

    with pytest.raises(RunawayError, match=r"policy 'idle': livelock: 2,000 decisions in a row .* 1 pending, e\.g\. a"):
        run(jobs(gpu_job("a", 0.0, 1, 10.0)), Idle())


def test_a_policy_that_never_wakes_leaves_the_job_unfinished_with_its_reason():
    class Silent(Policy):
        name = "silent"

        def decide(self, view):
            return Decision()

    states, rec = run(jobs(gpu_job("a", 0.0, 1, 10.0)), Silent())
    assert states["a"].status.value == "unfinished"
    assert rec.summary()["jobs_unfinished"] == 1
    assert rec.summary()["unfinished_jobs"] == [{
        "job_id": "a", "status": "pending",
        "reason": "never started: policy 'silent' never placed it (worker 1 x (1 GPU, 0 cores, 0 GB))"}]


def test_wakeups_are_kept_while_a_job_waits():
    class Hold(Policy):
        name = "hold"

        def decide(self, view):
            if view.now < 50:
                return Decision(wakeup=50.0 - view.now)
            return Decision({j: {"worker": {0: 1}} for j in view.pending})

    states, _ = run(jobs(gpu_job("a", 0.0, 1, 10.0)), Hold())
    assert (states["a"].first_start, states["a"].end_time) == (50.0, 60.0)


def test_ground_truth_is_hidden_from_non_oracle_policies():
    seen = {}

    class Peek(Policy):
        name = "peek"

        def decide(self, view):
            for job in view.arrived:
                seen["public"] = (job.num_gpus, job.submit_time)
                with pytest.raises(OracleError):
                    job.remaining_work
                with pytest.raises(OracleError):
                    job.duration
            return Decision()

    class Oracle(Peek):
        name = "oracle-peek"
        oracle = True

        def decide(self, view):
            for job in view.arrived:
                seen["truth"] = job.remaining_work
            return Decision()

    run(jobs(gpu_job("a", 0.0, 2, 10.0, work=30.0)), Peek())
    run(jobs(gpu_job("a", 0.0, 2, 10.0, work=30.0)), Oracle())
    assert seen == {"public": (2.0, 0.0), "truth": 30.0}


def test_attained_service_is_up_to_date_at_every_decision():
    samples = []

    class Watch(Scripted):
        def decide(self, view):
            for job in view.running.values():
                samples.append((view.now, job.attained_service, job.iterations_done))
            return super().decide(view)

    spec = gpu_job("a", 0.0, 2, 100.0, work=50.0)
    run(jobs(spec), Watch({0.0: {"a": {"worker": {0: 2}}}, 30.0: {}}))
    assert (30.0, pytest.approx(60.0), pytest.approx(15.0)) in samples


def test_a_job_that_finishes_exactly_as_its_preparation_ends_does_not_wait_for_the_pause():
    # stop-free rescale at t=90 with 10 s of preparation at the old rate: the job's last 10 s
    spec = gpu_job("a", 0.0, 2, 100.0, min_gpus=1, max_gpus=4)
    plan = {0.0: {"a": {"worker": {0: 2}}}, 90.0: {"a": {"worker": {0: 4}}}}
    states, _ = run(jobs(spec), Scripted(plan), overhead=ConstantOverhead(rescale_s=10.0, stop_free=True, pause_s=5))
    assert states["a"].end_time == pytest.approx(100.0, **EXACT)


def test_a_job_whose_roles_together_exceed_the_cluster_cores_is_refused():
    from clustersim.simulator.job import JobSpec, RoleSpec
    roles = (RoleSpec("ps", 1, 0.0, 24.0, 1.0, 1, 1), RoleSpec("worker", 1, 0.0, 24.0, 1.0, 1, 1))
    spec = JobSpec(index=0, job_id="ps", submit_time=0.0, roles=roles, total_work=10.0, duration=10.0)
    with pytest.raises(ValueError, match="job 'ps' asks for more than the whole cluster"):
        Engine([spec], cluster(nodes=1, cpus=32), Fifo(), progress=False)  # each role fits, both do not


class Watcher(Fifo):
    """FIFO that records, at each decision, the ended jobs it is told of and their samples, and
    whether the views of jobs it saw end earlier still hold theirs. It is given every decision,
    those with nothing pending too."""

    decides_only_when_waiting = False

    def __init__(self):
        super().__init__()
        self.told, self.earlier = {}, []
        self.seen = []

    def decide(self, view):
        self.earlier.append([len(j.throughput_samples) for j in self.seen])
        for j in view.finished:
            self.told[j.job_id] = [(s.start, s.end) for s in j.throughput_samples]
        self.seen.extend(view.finished)
        return super().decide(view)


def test_an_ended_jobs_samples_are_read_at_the_decision_that_reports_it_then_dropped():
    # a runs 0-100 and b 150-250 on the one node; c arrives at 300 so a third decision comes after b's
    from clustersim.simulator.engine import Observe
    p = Watcher()
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 150.0, 4, 100.0), gpu_job("c", 300.0, 4, 10.0))
    engine = Engine(specs, cluster(), p, progress=False, observe=Observe(throughput_noise=0.0))
    engine.run()
    assert p.told == {"a": [(0.0, 100.0)], "b": [(150.0, 250.0)], "c": [(300.0, 310.0)]}
    # decisions at 0, 100 (a reported), 150 (a's dropped), 250 (b reported), 300 (b's dropped), 310 (c)
    assert p.earlier == [[], [], [0], [0], [0, 0], [0, 0]]
    # a job's view lives while the job is pending or running; one made after the run reads the state
    assert engine.view_of("a").iterations_done == pytest.approx(100.0, **EXACT)


def test_decision_rounds_never_fall_in_the_past_when_a_time_is_a_hair_past_a_multiple():
    # 0.1 + 0.2 = 0.30000000000000004, past the round at 0.3 by rounding alone: the decision is
    # then, not 4e-17 s in the past (it failed "cannot schedule an event ... in the past")
    t = 0.1 + 0.2
    states, _ = run(jobs(gpu_job("a", t, 2, 10.0)), Fifo(), decision_interval=1e-3)
    assert states["a"].first_start == t and states["a"].end_time == pytest.approx(t + 10.0, **EXACT)


def test_a_huge_decision_interval_decides_at_its_rounds_not_in_the_past():
    # rounds every 1e300 s: a at 0 starts at the round at 0; b arriving at 30 waits for the round
    # at 1e300 (it failed at 30 s: "cannot schedule an event -30.0 s in the past")
    states, _ = run(jobs(gpu_job("a", 0.0, 2, 100.0), gpu_job("b", 30.0, 2, 50.0)), Fifo(), decision_interval=1e300)
    assert (states["a"].first_start, states["a"].end_time) == (0.0, 100.0)
    assert states["b"].first_start == 1e300


def test_until_zero_runs_nothing_and_leaves_every_job_unfinished_at_zero():
    # nothing at ``until`` itself runs: not even the arrivals at 0 (SimPy refused until=0 outright)
    states, rec = run(jobs(gpu_job("a", 0.0, 2, 10.0)), Fifo(), until=0.0)
    assert states["a"].first_start is None and rec.end_time == 0.0
    assert [u["reason"] for u in rec.unfinished] == ["still pending at until=0 s"]


def test_a_decision_interval_finer_than_a_float_at_the_time_decides_then():
    # 1e10 s / 1e-300 s overflows a float: rounds that fine are every instant (it failed converting
    # infinity to an integer)
    states, _ = run(jobs(gpu_job("a", 1e10, 2, 10.0)), Fifo(), decision_interval=1e-300)
    assert states["a"].first_start == 1e10 and states["a"].end_time == 1e10 + 10.0


class Counting(Fifo):
    """FIFO that logs (time, pending, ended jobs told of) at each decision it is given."""

    def __init__(self):
        super().__init__()
        self.log = []

    def decide(self, view):
        self.log.append((view.now, len(view.pending), [j.job_id for j in view.finished]))
        return super().decide(view)


class Eager(Counting):
    """The same, asked at every decision."""

    decides_only_when_waiting = False
    decides_only_when_freed = False
    waits_for_gpus = None


def test_a_policy_that_declares_it_skips_decisions_with_nothing_pending_and_hears_every_end():
    # one 4-GPU node: a runs 0-100, b arrives at 150 and runs 150-250, c arrives at 300 and runs
    # to 310. Nothing is pending at 100 and 250: a declaring FIFO is not asked then, hears of a
    # at 150 and of b at 300, and of c at 310, the decision after the last job ends.
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 150.0, 4, 100.0), gpu_job("c", 300.0, 4, 10.0))
    lazy, eager = Counting(), Eager()
    (s1, r1), (s2, r2) = run(specs, lazy), run(specs, eager)
    assert lazy.log == [(0.0, 1, []), (150.0, 1, ["a"]), (300.0, 1, ["b"]), (310.0, 0, ["c"])]
    assert eager.log == [(0.0, 1, []), (100.0, 0, ["a"]), (150.0, 1, []), (250.0, 0, ["b"]), (300.0, 1, []),
                         (310.0, 0, ["c"])]
    # the same run: job records, events and the timeline (a skipped decision's row is still written)
    assert r1.jobs().equals(r2.jobs()) and r1.events().equals(r2.events()) and r1.timeline().equals(r2.timeline())
    rows = r1.timeline().column("time").to_pylist()
    assert rows == [0.0, 100.0, 150.0, 250.0, 300.0, 310.0]


def test_fifo_is_not_asked_when_jobs_only_arrive_behind_a_waiting_one():
    # one 4-GPU node: a (4 GPUs) runs 0-100; b arrives at 10 and c at 20 (2 GPUs each) and wait
    # behind a. FIFO is asked at 10 (nothing waited before) and leaves b waiting; c arrives behind
    # b with nothing freed, so FIFO is not asked at 20; at 100 it hears of c's arrival and of a's
    # end, and starts b and c. The run is the same as when asked every time.
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 10.0, 2, 50.0), gpu_job("c", 20.0, 2, 50.0))
    lazy, eager = Counting(), Eager()
    (_, r1), (_, r2) = run(specs, lazy), run(specs, eager)
    assert [t for t, _, _ in lazy.log] == [0.0, 10.0, 100.0, 150.0]
    assert [t for t, _, _ in eager.log] == [0.0, 10.0, 20.0, 100.0, 150.0]
    assert r1.jobs().equals(r2.jobs()) and r1.events().equals(r2.events()) and r1.timeline().equals(r2.timeline())
    # the timeline keeps a row at each arrival: the pending count changed there
    assert r1.timeline().column("pending").to_pylist() == [0, 1, 2, 0, 0]
    # with backfilling FIFO declares nothing of the kind: an arrival may start in a gap
    assert Fifo(backfill=True).decides_only_when_freed is False


def test_fifo_is_not_asked_when_an_end_frees_too_little_for_the_job_it_waits_for():
    # one 4-GPU node: a (2 GPUs) runs 0-100 and b (2 GPUs) 0-50; c (4 GPUs) arrives at 10 and waits.
    # b's end at 50 leaves 2 GPUs free, fewer than the 4 FIFO declared it waits for: it is not
    # asked then. At 100 it hears of both ends and starts c, which runs to 120 (the last end,
    # reported). The run is the same as when asked every time.
    specs = jobs(gpu_job("a", 0.0, 2, 100.0), gpu_job("b", 0.0, 2, 50.0), gpu_job("c", 10.0, 4, 20.0))
    lazy, eager = Counting(), Eager()
    (s1, r1), (_, r2) = run(specs, lazy), run(specs, eager)
    assert lazy.log == [(0.0, 2, []), (10.0, 1, []), (100.0, 1, ["b", "a"]), (120.0, 0, ["c"])]
    assert [t for t, _, _ in eager.log] == [0.0, 10.0, 50.0, 100.0, 120.0]
    assert (s1["c"].first_start, s1["c"].end_time) == (100.0, 120.0)
    assert r1.jobs().equals(r2.jobs()) and r1.events().equals(r2.events()) and r1.timeline().equals(r2.timeline())
    # the skipped decision's timeline row is still written: 2 GPUs in use from 50 to 100
    tl = r1.timeline().to_pydict()
    assert tl["time"] == [0.0, 10.0, 50.0, 100.0, 120.0] and tl["gpu_used"][2] == 2.0
    assert Fifo(backfill=True).waits_for_gpus() is None


class WaitsForNodes(Policy):
    """Starts what is pending (first fit) and declares that no number of free GPUs changes its
    decision: only a stop or a node change may (Policy.waits_for_gpus)."""

    name = "waits-for-nodes"

    def reset(self, view):
        self.log = []

    def decide(self, view):
        self.log.append(view.now)
        free, decision = view.cluster.free_copy(), Decision()
        for job in view.pending.values():
            alloc = strategy("first_fit")(free, job.roles, job.requested_counts())
            if alloc is not None:
                decision.allocations[job.job_id] = alloc
        return decision

    def waits_for_gpus(self):
        return math.inf


def test_a_declared_wait_for_gpus_holds_until_a_node_changes():
    # two 4-GPU nodes: a (2 GPUs, 0-10) starts at 0; b's arrival at 1 and a's end at 10 are skipped
    # (the policy declared no number of free GPUs would change anything); node 1 going down at 20
    # asks for a decision, which starts b (20-40); its repair at 30 asks again; b's end at 40, the
    # last, is reported
    specs = jobs(gpu_job("a", 0.0, 2, 10.0), gpu_job("b", 1.0, 2, 20.0))
    p = WaitsForNodes()
    engine = Engine(specs, cluster(nodes=2), p, progress=False)
    engine.fail_node(20.0, 1, repair_after=10.0)
    engine.run()
    assert p.log == [0.0, 20.0, 30.0, 40.0]
    assert (engine.states["b"].first_start, engine.states["b"].end_time) == (20.0, 40.0)


class WakesAt100(Policy):
    """Starts what is pending; asks to be woken at t = 100 at every decision before it."""

    name = "wakes-at-100"

    def decide(self, view):
        self.times = getattr(self, "times", []) + [view.now]
        d = Decision({j.job_id: {"worker": {0: 1}} for j in view.pending.values()})
        if view.now < 100.0:
            d.wakeup = 100.0 - view.now
        return d


def test_a_wakeup_asked_again_for_the_same_time_is_one_event():
    # arrivals at 0, 10, 20, 30 (one GPU, 200 s each) make four decisions, each asking for
    # t = 100 (100 - 10 + 10 is exactly 100 in floats): one wake-up event, one decision at 100
    specs = jobs(*(gpu_job(f"j{i}", 10.0 * i, 1, 200.0) for i in range(4)))
    p = WakesAt100()
    engine = Engine(specs, cluster(), p, progress=False)
    popped = []   # every wake-up event in the heap is handled (a stale one too): one call each
    wake = engine._wake
    engine._wake = lambda: (popped.append(engine.now), wake())[1]
    engine.run()
    assert p.times == [0.0, 10.0, 20.0, 30.0, 100.0, 200.0, 210.0, 220.0, 230.0]
    assert popped == [100.0]


def test_a_run_gives_the_collector_its_thresholds_back_even_when_the_policy_fails():
    import gc

    class Watching(Fifo):
        def decide(self, view):
            seen.append(gc.get_threshold()[0])
            return super().decide(view)

    class Broken(Policy):
        name = "broken"

        def decide(self, view):
            return None

    before, seen = gc.get_threshold(), []
    run(jobs(gpu_job("a", 0.0, 2, 10.0)), Watching())
    assert seen and min(seen) >= 100_000 and gc.get_threshold() == before   # raised while running only
    with pytest.raises(PolicyError, match="not a Decision"):
        run(jobs(gpu_job("a", 0.0, 2, 10.0)), Broken())
    assert gc.get_threshold() == before


def test_a_job_state_is_made_at_arrival_and_jobs_never_arrived_are_reported():
    # a (t=0, 10 s on 1 GPU), b (t=5), c (t=50) and d (t=60): with until=20, a finishes at 10,
    # b at 15, c and d never arrive
    specs = jobs(gpu_job("a", 0.0, 1, 10.0), gpu_job("b", 5.0, 1, 10.0), gpu_job("c", 50.0, 1, 10.0),
                 gpu_job("d", 60.0, 1, 10.0))
    engine = Engine(specs, cluster(), Fifo(), progress=False, until=20.0)
    assert len(engine.states) == 0   # no state is held for a job before it arrives
    early = engine.states["c"]       # read early (as a fault model may): the same state serves c later
    with pytest.raises(KeyError):
        engine.states["nobody"]
    rec = engine.run()
    assert list(engine.states) == ["a", "b", "c", "d"]   # the trace's order, as arrivals make them
    assert engine.states["c"] is early and early.status.value == "unfinished"
    t = rec.jobs().to_pydict()
    assert t["status"] == ["finished", "finished", "unfinished", "unfinished"]
    assert t["end_time"][:2] == [10.0, 15.0]
    assert [u["job_id"] for u in rec.summary()["unfinished_jobs"]] == ["c", "d"]


def test_jobs_arrive_by_submit_time_then_trace_index():
    from dataclasses import replace

    from clustersim.simulator.engine import _by_arrival
    a, b, c, d = (gpu_job(x, t, 1, 1.0, index=i) for x, t, i in (("a", 0.0, 0), ("b", 5.0, 1), ("c", 5.0, 2),
                                                                  ("d", 9.0, 3)))
    in_order = [a, b, c, d]
    assert _by_arrival(in_order) == in_order and _by_arrival(in_order) is not in_order   # a copy, as sorted's
    assert _by_arrival([d, c, a, b]) == [a, b, c, d]
    late_b = replace(b, index=5)   # ties in submit time go by index: c (2) before b (5), listed either way
    assert _by_arrival([a, late_b, c, d]) == [a, c, late_b, d]
    assert _by_arrival([]) == []
