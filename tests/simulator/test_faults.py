"""Faults (simulator/faults.py): every number below is worked out by hand in the comments.

Jobs are one-GPU-per-task data-parallel jobs on the linear speed model: a job of n GPUs runs at
n/n = 1 iteration/s at its request, so iterations and seconds coincide."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from clustersim.policies.fifo import Fifo
from clustersim.policies.tiresias import Tiresias
from clustersim.simulator import faults
from clustersim.simulator.engine import Engine
from clustersim.simulator.errors import ConfigError
from clustersim.simulator.job import JobSpec, RoleSpec, Status, StopReason
from clustersim.simulator.overhead import ModelCosts
from tests.factories import cluster, gpu_job, jobs

EXACT = dict(rel=1e-9, abs=1e-9)
FREE_SAVES = lambda spec: ModelCosts(checkpoint_gb=0.0)  # noqa: E731  saving a checkpoint costs nothing


def model(cfg: dict, seed: int = 0, **kw):
    return faults.make({"enabled": True, **cfg}, seed, costs_of=kw.pop("costs_of", FREE_SAVES), **kw)


def engine(specs, fm, cl=None, policy=None, **kw):
    return Engine(specs, cl or cluster(nodes=2, gpus=4), policy or Fifo(), progress=False, faults=fm, **kw)


def by_id(rec):
    return {s.spec.job_id: s for s in rec.states}


def test_off_by_default_and_config_errors_name_the_key():
    assert faults.make(None) is None and faults.make({"name": "none", "enabled": False}) is None
    with pytest.raises(ConfigError, match=r"faults\.task\.per_pod_day"):
        model({"task": {"per_pod_day": 1.5}})
    with pytest.raises(ConfigError, match=r"faults\.node\.repair"):
        model({"node": {"mtbf_h": 1.0, "repair": "sometimes"}})
    with pytest.raises(ConfigError, match=r"faults\.bogus"):
        model({"bogus": 1})


def test_node_failure_kills_exactly_its_tasks_and_resumes_from_the_last_checkpoint():
    # a on node 0, b on node 1, 1000 s each; checkpoints every 300 s from the start: 300, 600.
    # node 0 fails at 700: a loses 700 - 600 = 100 s, waits for the repair at 800, then needs
    # 1000 - 600 = 400 s more: ends at 1200. b never notices.
    specs = jobs(gpu_job("a", 0.0, 4, 1000.0), gpu_job("b", 0.0, 4, 1000.0))
    eng = engine(specs, model({"checkpoint": {"interval_s": 300.0}}))
    eng.fail_node(at=700.0, node=0, repair_after=100.0)
    st = by_id(eng.run())
    a, b = st["a"], st["b"]
    assert (a.failures, b.failures) == (1, 0)
    assert a.lost_iterations == pytest.approx(100.0, **EXACT) and a.lost_s == pytest.approx(100.0, **EXACT)
    assert a.lost_gpu_s == pytest.approx(400.0, **EXACT)            # 100 s x 4 GPUs
    assert a.end_time == pytest.approx(1200.0, **EXACT) and b.end_time == pytest.approx(1000.0, **EXACT)
    f = a.last_failure
    assert (f.time, f.cause, f.role, f.node) == (700.0, StopReason.NODE_DOWN, "worker", 0)
    assert a.failed_by == {"node_down": 1} and a.recover_s == pytest.approx(100.0, **EXACT)
    assert eng.view_of("a").last_failure == f and eng.view_of("a").stop_reason is StopReason.NODE_DOWN
    assert a.service == pytest.approx(4 * (700 + 400), **EXACT)   # the lost work held GPUs too


def test_without_a_fault_model_a_node_failure_keeps_progress():
    specs = jobs(gpu_job("a", 0.0, 4, 1000.0), gpu_job("b", 0.0, 4, 1000.0))
    eng = engine(specs, None)
    eng.fail_node(at=700.0, node=0, repair_after=100.0)
    a = by_id(eng.run())["a"]
    assert a.end_time == pytest.approx(1100.0, **EXACT) and a.lost_iterations == 0.0


def test_flash_checkpoints_a_task_failure_restores_from_memory_a_node_failure_from_storage():
    # durable every 300 s, in memory every 50 s. A task failure at 720 s loses 720 - 700 = 20 s;
    # a node failure at 720 s loses the host's memory: 720 - 600 = 120 s.
    cfg = {"checkpoint": {"interval_s": 300.0, "flash_interval_s": 50.0}}
    for cause, lost in (("task", 20.0), ("node", 120.0)):
        fm = model(cfg)
        eng = engine(jobs(gpu_job("a", 0.0, 4, 1000.0)), fm)
        if cause == "task":
            eng.at(720.0, lambda: eng.fail_job("a", StopReason.FAILED, "worker", 0))
        else:
            eng.fail_node(720.0, 0, 0.0)
        a = by_id(eng.run())["a"]
        assert a.lost_iterations == pytest.approx(lost, **EXACT)
        assert a.end_time == pytest.approx(1000.0 + lost, **EXACT)   # resumes at once (free restart)


def test_a_failure_pays_the_overhead_models_restart_cost():
    from clustersim.simulator.overhead import ConstantOverhead
    eng = engine(jobs(gpu_job("a", 0.0, 4, 1000.0)), model({"checkpoint": {"interval_s": 300.0}}),
                 overhead=ConstantOverhead(resume_s=45.0))
    eng.at(650.0, lambda: eng.fail_job("a", StopReason.FAILED, "worker", 0))
    a = by_id(eng.run())["a"]
    # back to 600 at 650 s, 45 s restore, 400 s to go: 1095 s; recovery = 45 s (failure -> training)
    assert a.end_time == pytest.approx(1095.0, **EXACT) and a.recover_s == pytest.approx(45.0, **EXACT)


def test_retries_exhausted_end_the_job_failed_and_the_policy_sees_it_ended():
    # every 100 s of running a task fails (scheduled by hand); retries=2: the third failure ends it
    eng = engine(jobs(gpu_job("a", 0.0, 4, 1000.0), gpu_job("b", 0.0, 4, 500.0)),
                 model({"retries": 2, "checkpoint": {"interval_s": 60.0}}))
    for t in (100.0, 200.0, 300.0):
        eng.at(t, lambda: eng.fail_job("a", StopReason.FAILED, "worker", 0))
    rec = eng.run()
    a = by_id(rec)["a"]
    assert a.status is Status.FAILED and a.end_time == 300.0 and a.failures == 3
    summary = rec.summary()
    assert summary["jobs_failed"] == 1 and summary["jobs_unfinished"] == 0 and summary["completion_rate"] == 0.5
    assert summary["failures_by_cause"] == {"failed": 3, "node_down": 0, "oom": 0}
    # each failure loses 40 s (checkpoints at 60, 160 [100 + 60], 260)
    assert summary["lost_s"] == pytest.approx(120.0, **EXACT)
    assert rec.jobs().column("status").to_pylist() == ["failed", "finished"]


class Told(Fifo):
    """FIFO asked at every decision, those with nothing pending too."""

    decides_only_when_waiting = False


@pytest.mark.parametrize("policy, interval, told_b", [(Told, None, 500.0), (Told, 60.0, 540.0), (Fifo, None, 500.0)])
def test_the_policy_hears_of_the_last_end_though_the_run_halts_then(policy, interval, told_b):
    # as above: a fails for good at 300, b finishes at 500 and is the last job to end. The run
    # halts then (failures would go on), yet the decision after b's end still runs: at 500, or
    # with 60 s rounds at the next multiple, 540; a FIFO that skips decisions with nothing
    # pending (b ends with nothing pending) is asked then too, and hears of both ends at once.
    p = policy()
    eng = engine(jobs(gpu_job("a", 0.0, 4, 1000.0), gpu_job("b", 0.0, 4, 500.0)),
                 model({"retries": 2, "checkpoint": {"interval_s": 60.0}}), policy=p, decision_interval=interval)
    for t in (100.0, 200.0, 300.0):
        eng.at(t, lambda: eng.fail_job("a", StopReason.FAILED, "worker", 0))
    heard = []
    p.decide = lambda view, decide=p.decide: heard.append((view.now, sorted(j.job_id for j in view.finished))) or decide(view)
    rec = eng.run()
    assert rec.summary()["jobs_failed"] == 1 and by_id(rec)["b"].end_time == 500.0
    assert heard[-1][0] == told_b and "b" in heard[-1][1]
    assert sorted(j for _, ended in heard for j in ended) == ["a", "b"]


def ps_job(job_id: str, ps: int, workers: int, ps_mem: float, duration: float = 1000.0, **kw) -> JobSpec:
    roles = (RoleSpec("ps", ps, 0.0, 4.0, ps_mem, 1, ps + 2), RoleSpec("worker", workers, 1.0, 2.0, 4.0, 1, workers))
    return JobSpec(index=0, job_id=job_id, submit_time=0.0, roles=roles, total_work=duration, duration=duration, **kw)


def test_oom_exactly_when_the_need_exceeds_the_grant():
    # the usage model: each PS needs 8 GB; a job that grants 8 GB runs, one that grants 7.99 GB
    # runs out of memory after_s = 30 s into training, at every attempt until its retries run out
    usage = lambda spec, alloc: {r: (1.0, 8.0 if r == "ps" else 4.0) for r in alloc}  # noqa: E731
    cl = cluster(nodes=2, gpus=4, cpus=64, mem=256)
    for grant, oom in ((8.0, False), (7.99, True)):
        eng = engine(jobs(ps_job("p", 2, 2, grant)), model({"retries": 1, "oom": {"after_s": 30.0}}), cl=cl,
                     usage=usage)
        p = by_id(eng.run())["p"]
        if oom:
            assert p.status is Status.FAILED and p.failed_by == {"oom": 2} and p.end_time == pytest.approx(60.0)
            assert p.last_failure.cause is StopReason.OOM and p.last_failure.role == "ps"
        else:
            assert p.status is Status.FINISHED and p.failures == 0


def test_oom_from_the_zoo_when_ps_are_fewer_than_requested():
    # Zoo.usage: W&D's embedding tables fill 8 PSes of 8 GB (DLRover Table 2) = 64 GB by the job's
    # end, sharded over the PSes it runs: 4 PSes granted 16 GB need 64 / 4 = 16 GB each (no OOM);
    # only 2 running need 32 GB each against the same 16 GB grant: OOM (the fault model checks the
    # peak, the memory at the end of the work).
    from clustersim.simulator import profiles
    from clustersim.policies.base import Decision, Policy
    zoo = profiles.load()
    spec = ps_job("p", 4, 2, 16.0)
    spec = JobSpec(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__}, "profile": "wide_deep",
                      "model": "wide_deep"})

    class Place(Policy):
        name = "place"

        def __init__(self, ps):
            self.ps = ps

        def decide(self, view):
            return Decision({j.job_id: {"ps": {0: self.ps}, "worker": {1: 2}} for j in view.pending.values()})

    cl = cluster(nodes=2, gpus=4, cpus=64, mem=256)
    for ps, oom in ((4, False), (2, True)):
        eng = Engine([spec], cl, Place(ps), speed=zoo.speed, usage=zoo.usage, progress=False,
                     faults=model({"retries": 0, "oom": {"after_s": 0.0}}))
        p = eng.run().states[0]
        assert (p.status is Status.FAILED) is oom


def test_growing_ps_memory_runs_out_when_it_crosses_the_grant():
    # Zoo.usage: W&D's PS memory is 64 GB by the job's end (8 PSes x 8 GB, DLRover Table 2), 20 % of
    # it from the start (embedding.static_share), the rest growing with the steps done ([RM] §5.3).
    # Over 2 PSes: 6.4 + 25.6 x progress GB each. Granted 16 GB: the tables cross it at progress
    # (16 - 6.4) / 25.6 = 0.375, 375 of 1,000 steps. The speed truth at 2 workers x 2 cores, 2 PS x 4
    # cores: 2 x 12 x 2/2.5 steps/s x min(1, 8 / (2 x 5.7)) = 13.4737 steps/s, so the OOM comes
    # 375 / 13.4737 = 27.83 s into training -- not after_s (60 s) after the start, as a need already
    # above the grant would; granted 33 GB, the need (32 GB at the end) never gets there.
    from clustersim.simulator import profiles
    from clustersim.policies.base import Decision, Policy
    from dataclasses import replace
    zoo = profiles.load()

    class Place(Policy):
        name = "place"

        def decide(self, view):
            return Decision({j.job_id: {"ps": {0: 2}, "worker": {1: 2}} for j in view.pending.values()})

    cl = cluster(nodes=2, gpus=4, cpus=64, mem=256)
    for grant, oom in ((16.0, True), (33.0, False)):
        spec = replace(ps_job("p", 2, 2, grant), profile="wide_deep", model="wide_deep")
        eng = Engine([spec], cl, Place(), speed=zoo.speed, usage=zoo.usage, progress=False,
                     faults=model({"retries": 0, "oom": {"after_s": 60.0}}))
        p = eng.run().states[0]
        if oom:
            assert p.status is Status.FAILED and p.failed_by == {"oom": 1}
            assert p.end_time - p.first_start == pytest.approx(375.0 / (2 * 12.0 * 2 / 2.5 * 8 / 11.4), rel=1e-9)
        else:
            assert p.status is Status.FINISHED and p.failures == 0


def test_one_worker_straggler_per_job_when_asked():
    # role=worker, per_job=1 ([RM] §6.2 slows one worker): at 3,600 per pod-hour a straggler comes
    # within seconds; it is a worker (2 of the job's 4 tasks), and once it is over (10 s) and the
    # job restarts after a failure, no second one is drawn
    for seed in range(5):
        fm = model({"straggler": {"per_pod_hour": 3600.0, "role": "worker", "per_job": 1, "duration_s": 10.0},
                    "task": {"per_pod_day": 0.9999, "size_exponent": 4.0}, "retries": 50}, seed=seed)
        eng = engine(jobs(ps_job("p", 2, 2, 8.0, duration=2000.0)), fm, cl=cluster(nodes=2, gpus=4, cpus=64, mem=256))
        p = by_id(eng.run())["p"]
        assert p.failures > 0                       # restarts that would each draw a new straggler
        assert fm._stragglers == {"p": 1} and fm._slow_at["p"][0] == "worker"


def test_a_straggler_slows_a_synchronous_job_to_its_slowest_member():
    # 1000 s job; at 100 s one worker turns 4x slower for 200 s: 50 iterations instead of 200 in that
    # window, so 150 s of work remain late: ends at 1150 s. Throughput samples show the slow rate.
    fm = model({})
    from clustersim.simulator.engine import Observe
    eng = engine(jobs(gpu_job("a", 0.0, 4, 1000.0)), fm, observe=Observe(throughput_noise=0.0))
    eng.at(100.0, lambda: fm.slow_task("a", "worker", 4.0, 200.0))
    a = eng.run().states[0]
    assert a.end_time == pytest.approx(1150.0, **EXACT)
    assert [(s[0], s[1], s[2]) for s in a.samples] == [(0.0, 100.0, 1.0), (100.0, 300.0, 0.25), (300.0, 1150.0, 1.0)]


def test_a_slow_worker_of_an_asynchronous_ps_job_under_static_sharding_holds_its_end():
    # 4 async workers, each owning 1/4 of the data ([D] §6.3's TFJob); one 4x slower for 400 s falls
    # 400 x (1 - 1/4) = 300 s of its own work behind, and the job ends when its share is done: 300 s late
    cl = cluster(nodes=2, gpus=4, cpus=64, mem=256)
    fm = model({})
    spec = ps_job("p", 1, 4, 0.0)
    eng = engine([spec], fm, cl=cl)
    eng.at(10.0, lambda: fm.slow_task("p", "worker", 4.0, 400.0))
    p = eng.run().states[0]
    base = 1000.0   # linear speed: 4 workers at their request = 1 iteration/s
    assert p.end_time == pytest.approx(base + 400.0 * (1 - 0.25), **EXACT)


def sharded_run(sizes, duration=1e6):
    """A 1,000 s async PS job (4 workers at 1 step/s: 0.25 batches/s each) whose worker turns 4x slow
    at 10 s, under a policy with dynamic sharding whose straggler shard size is ``sizes(now)``."""
    class Sharding(Fifo):
        dynamic_sharding = True

        def shard_batches(self, job_id):
            return sizes(self.now)

        def decide(self, view):
            self.now = view.now
            return super().decide(view)

    cl = cluster(nodes=2, gpus=4, cpus=64, mem=256)
    fm = model({"straggler": {"shard_batches": 8, "heartbeat_s": 60.0}})
    pol = Sharding()
    pol.now = 0.0
    eng = engine([ps_job("p", 1, 4, 0.0)], fm, cl=cl, policy=pol)
    eng.at(10.0, lambda: fm.slow_task("p", "worker", 4.0, duration))
    eng.at(500.0, lambda: setattr(pol, "now", 500.0))
    return eng.run().states[0]


def test_dynamic_sharding_costs_the_straggler_its_share_and_the_tail_of_the_shard_it_holds():
    # from 10 s: (3 + 1/4)/4 = 0.8125 of 1 step/s, 990 steps left -> 1218.46 s; when the data runs
    # out the slow worker holds half a shard on average: (S x 4 - 8) / (2 x 0.25) s more than a
    # healthy worker's half shard of 8 batches (S = 8: 48 s; S = 2: none)
    share = 990.0 / 0.8125
    assert sharded_run(lambda t: 8).end_time == pytest.approx(10.0 + share + 48.0, **EXACT)
    assert sharded_run(lambda t: 2).end_time == pytest.approx(10.0 + share, **EXACT)
    # the policy shrinks its shards to 4 batches at 500 s, read at the next heartbeat (every 60 s
    # from 10 s: 550 s): the tail is (4 x 4 - 8) / 0.5 = 16 s from then on. The tail is spread over
    # what is left, so the 540 s before ran at 0.8125 x 1218.46 / (1218.46 + 48) = 0.781705 step/s:
    # 422.12 steps, 567.88 left at 0.8125: 698.93 s, ending at 550 + 698.93 + 16 = 1264.93 s
    early = 540.0 * 0.8125 * share / (share + 48.0)
    assert sharded_run(lambda t: 8 if t < 500.0 else 4).end_time == \
        pytest.approx(550.0 + (990.0 - early) / 0.8125 + 16.0, **EXACT)
    # a straggler that recovers before the data runs out holds no tail: 400 s at 0.8125: 75 s late
    assert sharded_run(lambda t: 8, duration=400.0).end_time == pytest.approx(1075.0, **EXACT)


def hot_ps_run(name: str, ps: int = 2):
    from clustersim.simulator import profiles
    zoo = profiles.load()
    roles = (RoleSpec("ps", ps, 0.0, 16.0, 8.0, 1, ps + 1), RoleSpec("worker", 4, 0.0, 3.0, 4.0, 1, 4))
    spec = JobSpec(0, "p", 0.0, roles, 1000.0, 1000.0, profile=name, model=name)
    fm = model({"hot_ps": {"fraction": 1.0, "skew": 2.0}})
    cl = cluster(nodes=2, gpus=4, cpus=128, mem=256)
    eng = engine([spec], fm, cl=cl, speed=zoo.speed)
    return zoo, spec, fm, cl, eng, eng.run().states[0]


def test_a_hot_ps_limits_throughput_as_if_every_ps_had_its_share_of_cpu():
    # wide_deep (DLRover-RM Eq. 3 uses PS CPU): 2 PSes of 16 cores, one with twice the mean load,
    # run as 2 PSes of 8 cores
    from clustersim.simulator.job import Tasks
    zoo, spec, fm, cl, eng, st = hot_ps_run("wide_deep")
    alloc = {"ps": Tasks({0: 2}), "worker": Tasks({0: 4})}
    expect = zoo.speed.rate(spec, {"ps": Tasks({0: 2}, 8.0), "worker": Tasks({0: 4})}, cl) / zoo.speed.rate(spec, alloc, cl)
    assert expect < 0.9
    assert fm._hot_effect(st, alloc) == pytest.approx(expect, **EXACT)
    # the job ran at that speed all along: 1000 iterations at base x factor
    alone = 1000.0 / (zoo.speed.rate(spec, st.samples[-1][3], cl) * fm._hot_effect(st, st.samples[-1][3]))
    assert st.end_time == pytest.approx(alone, rel=1e-9)
    # a change of the PS count re-partitions evenly (DLRover-RM): no hot PS on 3 PSes
    assert fm._hot_effect(st, {"ps": Tasks({0: 3}), "worker": Tasks({0: 4})}) == 1.0


def test_a_hot_ps_from_the_first_start_shows_in_per_ps_load():
    # what a policy's view shows while the job runs (JobView.slowest_task): the hot PS's node and
    # the job's speed against a balanced partition (the hot effect above), with nothing healthy in
    # its samples to compare with; after a change of the PS count, nothing
    from clustersim.simulator import profiles
    from clustersim.simulator.job import Tasks
    zoo = profiles.load()
    roles = (RoleSpec("ps", 2, 0.0, 16.0, 8.0, 1, 3), RoleSpec("worker", 4, 0.0, 3.0, 4.0, 1, 4))
    spec = JobSpec(0, "p", 0.0, roles, 1e5, 1000.0, profile="wide_deep", model="wide_deep")
    fm = model({"hot_ps": {"fraction": 1.0, "skew": 2.0}})
    eng = engine([spec], fm, cl=cluster(nodes=2, gpus=4, cpus=128, mem=256), speed=zoo.speed)
    seen = []
    eng.at(100.0, lambda: seen.append(fm.slowest_task("p")))
    st = eng.run().states[0]
    alloc = st.samples[-1][3]
    assert seen == [("ps", next(iter(alloc["ps"])), pytest.approx(fm._hot_effect(st, alloc)))] and seen[0][2] < 0.9
    assert fm._hot_task(st) is None   # ended
    st.status = Status.RUNNING
    st.allocation = {"ps": Tasks({0: 3}), "worker": Tasks({0: 4})}
    assert fm._hot_task(st) is None   # 3 PSes: re-partitioned evenly


def test_a_hot_ps_on_a_model_that_counts_ps_only_runs_as_with_p_over_skew_ps():
    # resnet50_ps (a table by PS count): 4 PSes, skew 2: as fast as 2 PSes
    from clustersim.simulator.job import Tasks
    zoo, spec, fm, cl, eng, st = hot_ps_run("resnet50_ps", ps=4)
    alloc = {"ps": Tasks({0: 4}), "worker": Tasks({1: 4})}
    two = {"ps": Tasks({0: 2}), "worker": Tasks({1: 4})}
    expect = zoo.speed.rate(spec, two, cl) / zoo.speed.rate(spec, alloc, cl)
    assert expect < 1.0
    assert fm._hot_effect(st, alloc) == pytest.approx(expect, **EXACT)


def test_task_failure_hazard_matches_dlrover_rm():
    # DLRover-RM §2.2: 1.5 % per pod-day; a 50-pod job fails within a day with 1 - 0.985^50 = 53.03 %
    t = faults.TaskFaults(per_pod_day=0.015)
    assert 1 - math.exp(-t.hazard(50) * faults.DAY) == pytest.approx(1 - 0.985 ** 50, rel=1e-12)
    assert round(1 - 0.985 ** 50, 4) == 0.5303


def random_jobs(n=30):
    return jobs(*(gpu_job(f"j{i}", 600.0 * i, [1, 2, 4, 8][i % 4], 3600.0 + 900 * (i % 5)) for i in range(n)))


HARSH = {"retries": 3, "checkpoint": {"interval_s": 900.0, "flash_interval_s": 120.0},
         "node": {"mtbf_h": 10.0, "repair_s": 1800.0, "repair": "exponential"}, "task": {"per_pod_day": 0.5},
         "straggler": {"per_pod_hour": 0.2, "factor": 3.0, "duration_s": 600.0}}


def test_with_faults_every_job_ends_finished_or_failed_and_the_same_seed_gives_the_same_failures():
    def run(seed, policy=None):
        eng = engine(random_jobs(), model(HARSH, seed), cl=cluster(nodes=4, gpus=8), policy=policy)
        rec = eng.run()
        return rec
    a, b, c = run(0), run(0), run(1)
    assert all(s.status in (Status.FINISHED, Status.FAILED) for s in a.states)
    assert a.summary()["failures"] > 5 and a.summary()["jobs_unfinished"] == 0
    assert a.events().equals(b.events()) and a.jobs().equals(b.jobs()) and a._nodes == b._nodes
    assert not a.events().equals(c.events())
    # node failures do not depend on the policy
    t = run(0, Tiresias())
    down = lambda r: [(x, n) for x, n, up in zip(r._nodes["time"], r._nodes["node"], r._nodes["up"]) if not up]  # noqa
    end = min(a.end_time, t.end_time)
    assert [d for d in down(a) if d[0] < end] == [d for d in down(t) if d[0] < end] != []


def test_replay_recorded_attempts_and_failed_status():
    # attempts of 100, 250 and 400 s. completed: the first two failed and were retried, the last one
    # ran to the end. Checkpoints every 60 s: the first failure at 100 s goes back to 60 (lost 40),
    # the second at 100 + 250 = 350 s back to 340 (lost 10, progress 60 + 240 = 300), then 700 s to
    # go: ends at 1050 s. failed: the third attempt fails too and ends the job at 350 + 400 = 750 s.
    for status in ("completed", "failed"):
        table = pa.table({"job_id": ["a"], "status": [status], "duration": [1000.0],
                          "attempts": [[{"start": 0.0, "end": 100.0}, {"start": 150.0, "end": 400.0},
                                        {"start": 500.0, "end": 900.0}]]})
        fm = model({"retries": 0, "replay": True, "checkpoint": {"interval_s": 60.0}}, table=table)
        a = engine(jobs(gpu_job("a", 0.0, 4, 1000.0)), fm).run().states[0]
        if status == "completed":
            assert a.status is Status.FINISHED and a.failures == 2
            assert a.lost_iterations == pytest.approx(50.0, **EXACT) and a.end_time == pytest.approx(1050.0, **EXACT)
        else:
            assert a.status is Status.FAILED and a.failures == 3 and a.end_time == pytest.approx(750.0, rel=1e-8)


def test_a_failed_pai_job_without_attempts_fails_at_its_recorded_duration():
    table = pa.table({"job_id": ["a", "b"], "status": ["failed", "completed"], "duration": [500.0, 500.0],
                      "attempts": pa.array([None, None], pa.list_(pa.struct([("start", pa.float64()),
                                                                            ("end", pa.float64())])))})
    fm = model({"replay": True}, table=table)
    st = by_id(engine(jobs(gpu_job("a", 0.0, 4, 500.0), gpu_job("b", 0.0, 4, 500.0)), fm).run())
    assert st["a"].status is Status.FAILED and st["b"].status is Status.FINISHED


def test_checkpoint_saving_slows_training_by_its_share_of_time():
    # 1 GB checkpoint at 0.5 GB/s every 600 s: 2 s of 602 saving; flash 1 GB at 20 GB/s every 60 s
    fm = model({"checkpoint": {"interval_s": 600.0, "flash_interval_s": 60.0, "storage_gb_per_s": 0.5,
                               "flash_gb_per_s": 20.0}}, costs_of=lambda s: ModelCosts(checkpoint_gb=1.0))
    a = engine(jobs(gpu_job("a", 0.0, 4, 1000.0)), fm).run().states[0]
    assert a.end_time == pytest.approx(1000.0 * (1 + 2.0 / 600 + 0.05 / 60), **EXACT)


class RecordingHooks:
    """A run as the fault model sees it (faults.Hooks), recording what the model asks of it."""

    def __init__(self):
        self.now, self.calls, self.due = 0.0, [], []

    def at(self, delay, fn, first=False):
        self.due.append((self.now + delay, fn))

    def fail_node(self, at, node, repair_after=None):
        self.calls.append(("fail_node", at, node, repair_after))

    def fail_job(self, job_id, cause, role=None, node=None):
        self.calls.append(("fail_job", job_id, cause))

    def refresh_rate(self, job_id):
        self.calls.append(("refresh_rate", job_id))

    def state(self, job_id):
        raise AssertionError("node failures need no job state")

    def ended(self):
        return False


def test_the_fault_model_drives_a_run_through_its_hooks_alone():
    # two nodes, MTBF 1 h, fixed 600 s repair: each node's first failure is an exponential draw of
    # mean 3600 s from the "faults.node" stream; at it, the node fails for 600 s and the next is drawn
    fm = model({"node": {"mtbf_h": 1.0, "repair_s": 600.0}}, seed=3)
    hooks = RecordingHooks()
    fm.attach(hooks, faults.World(jobs(gpu_job("a", 0.0, 4, 1000.0)), num_nodes=2), faults.Capabilities())
    draws = faults.component_rng(3, "faults.node").exponential(3600.0, size=3)
    assert [t for t, _ in hooks.due] == pytest.approx(list(draws[:2]))
    t, fn = hooks.due[0]
    hooks.now = t
    fn()
    assert hooks.calls == [("fail_node", t, 0, 600.0)]
    assert hooks.due[-1][0] == pytest.approx(t + 600.0 + draws[2])


def test_a_policy_declares_what_the_fault_model_relies_on():
    from clustersim.policies.dlrover import DLRover
    assert faults.Capabilities.of(DLRover) == faults.Capabilities(dynamic_sharding=True)
    assert faults.Capabilities.of(Fifo()) == faults.Capabilities()

    class Sharding(Fifo):
        dynamic_sharding = True

    class Checkpointing(Fifo):
        checkpoint_interval_s = 100.0

    # sharded: the fast workers take the slow one's shards, as under async PS training: one of 4
    # workers 4x slow for 200 s runs the job at (3 + 1/4)/4 = 0.8125: 200 x 0.1875 = 37.5 s late
    fm = model({})
    eng = engine(jobs(gpu_job("a", 0.0, 4, 1000.0)), fm, policy=Sharding())
    eng.at(100.0, lambda: fm.slow_task("a", "worker", 4.0, 200.0))
    assert eng.run().states[0].end_time == pytest.approx(1037.5, **EXACT)
    # the policy's own checkpoint interval: a failure at 250 s goes back to the checkpoint at 200 s
    eng = engine(jobs(gpu_job("a", 0.0, 4, 1000.0)), model({}), policy=Checkpointing())
    eng.at(250.0, lambda: eng.fail_job("a", StopReason.FAILED))
    assert eng.run().states[0].lost_iterations == pytest.approx(50.0, **EXACT)
