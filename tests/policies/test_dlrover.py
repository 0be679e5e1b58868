"""DLRover's three stages on hand-made states: warm start from a seeded history, the NNLS fit,
the cross-job greedy, each instability reaction; the history persisting across runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.policies.dlrover import DLRover, Track
from clustersim.policies.dlrover_history import Config, History, Record, smooth
from clustersim.policies.dlrover_search import Candidate, greedy
from clustersim.simulator.job import task_counts
from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.job import JobSpec, JobState, RoleSpec, Status, StopReason, Tasks
from clustersim.simulator.speed import DLRoverSpeed
from clustersim.simulator.view import ClusterView, JobView, Observer, View, read_only


def ps_job(job_id="j0", index=0, model="wide_deep", user="u1", table="u1/t0", submit=0.0) -> JobSpec:
    roles = (RoleSpec("ps", 2, 0.0, 8.0, 8.0, 1, 15), RoleSpec("worker", 4, 0.0, 8.0, 8.0, 1, 60))
    return JobSpec(index, job_id, submit, roles, total_work=200_000.0, duration=1000.0, user=user,
                   tenant=table, model=model, profile=model)


def record(job_id, model, table, user, w, p, wc=3.0, pc=16.0, run="r") -> Record:
    return Record(run, job_id, model, table, user, 100.0, Config(w, p, wc, pc, 4.0, 8.0), 200.0,
                  wc, pc, 4.0, 8.0)


def make_view(now, cluster, running=(), pending=(), stopped=(), usage=None, slowest=None):
    """``slowest``: {job id: (role, node, relative speed)}, what per-task step times and loads show."""
    faults = None if slowest is None else type("Seen", (), {"slowest_task": staticmethod(slowest.get)})()
    obs = Observer(now=now, usage=usage, cluster=cluster, faults=faults)
    views = {}
    for st in (*running, *pending):
        views[st.spec.job_id] = JobView(st, obs, False)
    run = {st.spec.job_id: views[st.spec.job_id] for st in running}
    pend = {st.spec.job_id: views[st.spec.job_id] for st in pending}
    return View(obs, ClusterView(cluster), read_only(pend), read_only(run), (),
                (), tuple(views[s.spec.job_id] for s in stopped))


def big_cluster(nodes=8):
    return Cluster([NodeGroup(nodes, 0, 64, 192)])


# ---------------------------------------------------------------------------- stage 1
def test_warm_start_smooths_the_most_similar_jobs_of_a_seeded_history():
    h = History(None)
    h.add(record("a", "wide_deep", "u1/t0", "u1", 20, 8))     # model + table + user: 1.0
    h.add(record("b", "wide_deep", "u2/t9", "u2", 10, 4))     # model only: 0.5
    h.add(record("c", "xdeepfm", "u1/t0", "u1", 8, 2))        # table + user: 0.5, but another model
    h.add(record("d", "wide_deep", "u2/t0", "u1", 30, 6))     # model + user: 0.7
    h.add(record("e", "deepfm", "u3/t3", "u3", 50, 9))        # nothing: 0
    got = h.similar("wide_deep", "u1/t0", "u1", k=3, min_similarity=0.5)
    # least similar first; "c" matches as much as "b" (0.5) but trained xDeepFM: never a W&D start
    assert [r.job_id for r in got] == ["b", "d", "a"]
    cfg = smooth([r.config for r in got], mu=0.5)
    # Eq. 10: 0.5·A(a) + 0.25·A(d) + 0.25·A(b): workers 0.5·20 + 0.25·30 + 0.25·10 = 20,
    # PS 0.5·8 + 0.25·6 + 0.25·4 = 6.5 -> 7 (rounded half up)
    assert (cfg.workers, cfg.ps) == (20, 7)
    assert [r.job_id for r in h.similar("xdeepfm", "u9/t9", "u9", k=3, min_similarity=0.0)] == ["c"]


def test_policy_starts_a_job_warm_from_history_and_cold_without():
    pol = DLRover(k=2, mu=0.5)
    cl = big_cluster()
    pol.reset(make_view(0.0, cl))
    pol.history.add(record("a", "wide_deep", "u1/t0", "u1", 24, 8, wc=3.0, pc=16.0))
    pol.history.add(record("b", "wide_deep", "u1/t0", "u1", 16, 4, wc=5.0, pc=8.0))
    warm = pol.initial_config(JobView(JobState(ps_job()), Observer(), False))
    # b is the more recent of two equally similar rows: Ā = 0.5·b + 0.5·a
    assert (warm.workers, warm.ps, warm.worker_cpu, warm.ps_cpu) == (20, 6, 4.0, 12.0)
    assert warm.worker_mem == math.ceil(4.0 * 1.2) and warm.ps_mem == math.ceil(8.0 * 1.2 * 6 / 6)
    cold = pol.initial_config(JobView(JobState(ps_job(model="dcn", user="x", table="x/t")), Observer(), False))
    # [D] §4.2 sampling: one worker and one PS of a whole pod (32 cores), the requested memory
    assert (cold.workers, cold.ps, cold.worker_cpu, cold.ps_cpu) == (1, 1, 32.0, 32.0)
    assert cold.ps_mem == 16.0   # the request's 2 x 8 GB on one PS


def test_job_cpu_cap_bounds_the_warm_start():
    pol = DLRover(k=1)
    pol.reset(make_view(0.0, big_cluster()))
    pol.history.add(record("a", "wide_deep", "u1/t0", "u1", 60, 15, wc=4.0, pc=16.0))   # 480 cores
    cfg = pol.initial_config(JobView(JobState(ps_job()), Observer(), False))
    assert cfg.cpu <= 200 and cfg.workers >= 1 and cfg.ps >= 1


# ---------------------------------------------------------------------------- stage 2
def test_nnls_fit_recovers_the_coefficients():
    truth = np.array([3.0, 2.0, 0.5, 1.5, 0.8])
    model = DLRoverSpeed(truth)
    xs = [(w, p, lw, lp) for w in (2, 8, 24) for p in (1, 4, 8) for lw in (2, 8) for lp in (4, 16)]
    samples = [(x, float(model.predict(x)[0])) for x in xs]
    from clustersim.policies.dlrover_search import fit
    fitted = fit(samples, math.inf)
    np.testing.assert_allclose(fitted.theta, truth, rtol=1e-4)


def cand(key, rc, tg, rate, d_cpu, d_mem=0.0):
    c = Candidate(key, Config(1, 1, 1.0, 1.0, 1.0, 1.0), rc, tg, rate, d_cpu, d_mem)
    from clustersim.policies.dlrover_search import score
    from dataclasses import replace
    return replace(c, score=score(c, remaining=1000.0, rho=2.5))


def test_greedy_takes_the_best_re_wg_per_job_within_free_capacity():
    # job 0: RE 2 at rate 100 (WG = (1000/100)^-2.5) ; job 1: RE 4 at rate 50 ; job 2 frees cores and gains
    a = cand(0, rc=10.0, tg=20.0, rate=100.0, d_cpu=10.0)     # score 2 · 10^-2.5 = 6.3e-3
    b = cand(1, rc=10.0, tg=40.0, rate=50.0, d_cpu=10.0)      # score 4 · 20^-2.5  = 2.2e-3
    b2 = cand(1, rc=4.0, tg=10.0, rate=50.0, d_cpu=4.0)       # score 2.5 · 20^-2.5 = 1.4e-3
    c = cand(2, rc=-5.0, tg=1.0, rate=10.0, d_cpu=-5.0)       # RC < 0 < TG: first
    taken = []
    chosen = greedy([b, a, b2, c], np.array([15.0, 100.0]), lambda x: taken.append(x.key) or True)
    assert taken == [2, 0, 1] and chosen[1] is b2   # b (10 cores) no longer fits after a: b2 (4) does
    # a placement refusal moves on to the job's next candidate
    chosen = greedy([a, b, b2], np.array([100.0, 100.0]), lambda x: x is not b)
    assert chosen[1] is b2 and chosen[0] is a


# ---------------------------------------------------------------------------- stage 3
def running_state(spec, cfg: Config, samples, now, progress=50_000.0):
    per_node = int(64 // cfg.worker_cpu)   # workers from node 1 on, as many as a 64-core node holds
    workers = {1 + i // per_node: min(per_node, cfg.workers - i) for i in range(0, cfg.workers, per_node)}
    alloc = {"ps": Tasks({0: cfg.ps}, cpu=cfg.ps_cpu, mem=cfg.ps_mem),
             "worker": Tasks(workers, cpu=cfg.worker_cpu, mem=cfg.worker_mem)}
    st = JobState(spec, status=Status.RUNNING, allocation=alloc, progress=progress, since=now, first_start=0.0)
    st.samples = [[a, b, r, alloc] for a, b, r in samples]
    return st, alloc


def setup_running(usage, samples, cfg=Config(4, 2, 4.0, 16.0, 8.0, 8.0), now=1000.0, slowest=None, **params):
    pol = DLRover(**params)
    cl = big_cluster()
    spec = ps_job()
    st, alloc = running_state(spec, cfg, samples, now)
    cl.take(spec, alloc, "test")
    pol.reset(make_view(0.0, cl))
    pol.tracks[spec.job_id] = Track(config=cfg, last_change=0.0)
    pol.order[spec.job_id] = 0
    pol.next_round = now
    view = make_view(now, cl, running=[st], usage=lambda s, a: usage, slowest=slowest)
    return pol, view, spec


def test_oom_prevention_grows_memory_before_the_need_passes_the_grant():
    use = {"worker": (4.0, 9.0), "ps": (16.0, 8.0 * 0.5)}   # a worker needs 9 GB of its 8
    pol, view, spec = setup_running(use, [(100.0, 900.0, 50.0)])
    d = pol.decide(view)
    alloc = d.allocations[spec.job_id]
    assert alloc["worker"].mem == math.ceil(9.0 * 1.2)            # need plus the 20 % margin
    assert alloc["ps"].mem == 8.0 and dict(alloc["worker"]) == {1: 4}   # same tasks, same nodes: a resize


def _memory_seen():
    """One running job and ``seen(config, steps, worker_gb, ps_gb)``: DLRover observes the job at
    that configuration and progress, each task reporting those GB, and returns its OOM plan."""
    pol, _, spec = setup_running({}, [(100.0, 900.0, 50.0)])
    tr = pol.tracks["j0"]
    cl = big_cluster()

    def seen(cfg, steps, worker_gb, ps_gb):
        tr.config = cfg
        st, _ = running_state(spec, cfg, [], 0.0, progress=steps)
        view = make_view(0.0, cl, running=[st], usage=lambda s, a: {"worker": (4.0, worker_gb), "ps": (8.0, ps_gb)})
        pol._observe(view, view.running["j0"], tr)
        return pol._oom_prevention(view.running["j0"], tr)
    return seen


def test_oom_prevention_fits_per_task_memory_within_one_configuration():
    seen = _memory_seen()
    four, eight = Config(4, 2, 4.0, 16.0, 8.0, 8.0), Config(8, 2, 4.0, 16.0, 8.0, 8.0)
    assert seen(four, 10_000.0, 5.0, 4.0) is None
    # a scale-out: the workers' total went 20 -> 40 GB in 10,000 steps (read as growth, that is
    # 2e-3 GB/step x 190,000 steps left / 8 = 47.5 GB more per worker); each still needs 5 GB
    assert seen(eight, 20_000.0, 5.0, 4.0) is None
    # growth at one configuration: 5.0 -> 5.5 GB per worker from 20k to 30k steps is 5e-5 GB/step;
    # 200,000 - 30,000 = 170,000 steps left: 5.5 + 8.5 = 14 GB > 8 -> ceil(14 x 1.2) = 17 GB
    got = seen(eight, 30_000.0, 5.5, 4.0)
    assert got.worker_mem == 17.0 and got.ps_mem == 8.0 and got.workers == 8


def test_oom_prevention_follows_the_pses_total_across_a_change_of_their_count():
    # [RM] §5.3: the embedding tables grow with the samples seen and are sharded over the PSes, so
    # their total is one series whatever the PS count: 2 PS x 4 GB = 8 GB at 10,000 steps, then
    # 4 PS x 2.5 GB = 10 GB at 20,000: 2e-4 GB/step; 180,000 steps left: 10 + 36 = 46 GB, 11.5 GB a
    # PS > its 8 GB grant -> ceil(11.5 x 1.2) = 14 GB (read per task, 2.5 GB would look like a shrink)
    seen = _memory_seen()
    assert seen(Config(4, 2, 4.0, 16.0, 8.0, 8.0), 10_000.0, 4.0, 4.0) is None
    got = seen(Config(4, 4, 4.0, 16.0, 8.0, 8.0), 20_000.0, 4.0, 2.5)
    assert got.ps_mem == 14.0 and got.ps == 4 and got.worker_mem == 8.0


def test_a_plan_keeps_the_memory_granted_until_two_reports_predict_its_growth():
    # one report (PS 2 GB of the 8 granted, worker 4 of 8): no line yet, so a plan keeps the grants
    # (the PSes' 2 x 8 = 16 GB total, 8 GB a worker) rather than today's need + 20 % (4.8, 4.8 GB),
    # which the growing tables would cross before the next round
    use = {"worker": (4.0, 4.0), "ps": (16.0, 2.0)}
    pol, view, spec = setup_running(use, [(100.0, 900.0, 50.0)])
    tr = pol.tracks[spec.job_id]
    pol._observe(view, view.running[spec.job_id], tr)
    st = pol._plan_state(view, view.running[spec.job_id], tr)
    assert st.ps_mem_total == 16.0 and st.worker_mem == 8.0


def test_a_cold_start_goes_to_the_drafts_optimum_after_sampling():
    # [D] §4.1, Table 1: sampled at 1 worker and 1 PS of 32 cores, W&D's worker uses ŵ = 2.5 cores
    # and puts ŝ = 5.7 on the PS; Eqs. 10-11: N_w = floor(200 / 8.2) = 24 workers of ceil(2.5) = 3
    # cores, floor((200 - 72) / 16) = 8 PSes of 16 -- Table 2's tuned configuration, the first plan
    from clustersim.experiment import build_engine, compose
    eng = build_engine(compose(["+experiment=dlrover_single", "policy=dlrover", "progress=false", "until=200"]))
    st = eng.run().states[0]
    assert task_counts(st.allocation) == {"ps": 8, "worker": 24}
    assert st.allocation["worker"].cpu == 3.0 and st.allocation["ps"].cpu == 16.0


def test_after_an_oom_a_worker_restarts_with_double_memory_and_ps_count_doubles():
    pol = DLRover()
    cl = big_cluster()
    spec = ps_job()
    pol.reset(make_view(0.0, cl))
    cfg = Config(4, 2, 4.0, 16.0, 8.0, 8.0)
    pol.tracks[spec.job_id] = Track(config=cfg, last_change=0.0, usage={"worker": (4.0, 12.0), "ps": (16.0, 10.0)})
    pol.order[spec.job_id] = 0
    st = JobState(spec, status=Status.PENDING, first_start=0.0, stop_reason=StopReason.OOM)
    d = pol.decide(make_view(500.0, cl, pending=[st], stopped=[st]))
    alloc = d.allocations[spec.job_id]
    assert alloc["worker"].mem == 16.0                               # [D] §4.2: double
    assert sum(alloc["ps"].values()) == 4 and alloc["ps"].mem == 8.0  # [D] §4.2: twice the PSes


def test_hot_ps_gets_larger_pses_then_a_slow_machine_loses_its_ps():
    use = {"worker": (4.0, 8.0), "ps": (16.0, 8.0)}
    samples = [(100.0, 1000.0, 50.0)]          # slow from the start: no healthy sample to compare with
    slowest = {"j0": ("ps", 0, 0.5)}           # the PS on node 0 holds the job at half speed
    pol, view, spec = setup_running(use, samples, slowest=slowest)
    d = pol.decide(view)
    alloc = d.allocations[spec.job_id]
    # [D] §4.2 Adjust 2: cores / relative speed = 16 / 0.5 = 32 (a pod at most), the same 2 PSes
    assert alloc["ps"].cpu == 32.0 and sum(alloc["ps"].values()) == 2
    assert spec.job_id not in pol.queue and pol.tracks[spec.job_id].hot_fixes == 1
    # no faster after the remedy (still 0.5): not the load but the machine, its PS moves away
    # ([D] §5.4); the test cluster holds both PS on node 0, one of them goes to the emptiest node
    pol2, view2, spec2 = setup_running(use, samples, slowest=slowest)
    pol2.tracks["j0"].hot_fixes, pol2.tracks["j0"].fix_speed = 1, 0.5
    alloc2 = pol2.decide(view2).allocations["j0"]
    assert alloc2["ps"].get(0) == 1 and sum(alloc2["ps"].values()) == 2 and alloc2["ps"].cpu == 16.0
    assert dict(alloc2["worker"]) == {1: 4}
    assert pol2.tracks["j0"].moved_off == {0}
    # faster after the remedy (0.5 -> 0.7) but still slow: the load, so the remedy again: ⌈16 / 0.7⌉ = 23 cores
    pol3, view3, _ = setup_running(use, samples, slowest={"j0": ("ps", 0, 0.7)})
    pol3.tracks["j0"].hot_fixes, pol3.tracks["j0"].fix_speed = 1, 0.5
    alloc3 = pol3.decide(view3).allocations["j0"]
    assert alloc3["ps"].cpu == 23.0 and pol3.tracks["j0"].moved_off == set()
    # at the job's CPU quota (48 cores: 4 workers x 4 + 2 PS x 16) there is no room for 32-core
    # PSes: one PS more re-partitions the parameters evenly ([RM] §4.3), the PS cores shared by the
    # new set within the quota: floor((48 - 16) / 3) = 10 cores each
    pol4, view4, _ = setup_running(use, samples, slowest=slowest, job_cpu_cap=48.0)
    alloc4 = pol4.decide(view4).allocations["j0"]
    assert sum(alloc4["ps"].values()) == 3 and alloc4["ps"].cpu == 10.0 and alloc4["worker"].cpu == 4.0


def test_worker_straggler_gets_smaller_shards_without_a_restart():
    use = {"worker": (4.0, 8.0), "ps": (6.0, 8.0)}
    samples = [(100.0, 500.0, 100.0), (500.0, 900.0, 100.0), (900.0, 1000.0, 50.0)]
    pol, view, spec = setup_running(use, samples, slowest={"j0": ("worker", 1, 0.25)})
    pol.next_round = 1100.0                      # between Stage-2 rounds: the heartbeat alone
    d = pol.decide(view)
    assert spec.job_id not in d.allocations
    assert pol.shard_batches(spec.job_id) == 128
    assert d.wakeup == 60.0                      # watched at the next heartbeat ([RM] §6.2: within 1 minute)
    # Stage 2 goes on around it: a sample of the slow interval counts as the others' rate, 50 x 4/(3 + 0.25)
    st = view.running["j0"]._state
    st.samples.append([1000.0, 1030.0, 50.0, st.samples[-1][3]])
    view.running["j0"]._obs.now = 1030.0
    assert pol._samples(view.running["j0"], pol.tracks["j0"])[-1][1] == pytest.approx(50.0 * 4 / 3.25)
    assert pol.tracks[spec.job_id].slow == [[1000.0, math.inf, "worker", 0.25]]   # the slow interval, as reported
    pol.decide(view)
    assert pol.shard_batches(spec.job_id) == 128  # one step per heartbeat
    view.running["j0"]._obs.now = 1060.0
    pol.decide(view)
    assert pol.shard_batches(spec.job_id) == 64
    view.running["j0"]._obs.now = 1120.0
    pol.decide(view)
    assert pol.shard_batches(spec.job_id) == 64   # the smallest of ``shard_batches``


def test_traditional_handling_replaces_a_straggler_pod_once_per_node():
    # straggler=replace, [RM] Fig. 13's "stop-and-restart" baseline: the worker reported at 25 %
    # on node 1 (which holds all 4 workers) is relaunched elsewhere at the heartbeat, shards untouched
    use = {"worker": (4.0, 8.0), "ps": (6.0, 8.0)}
    samples = [(100.0, 500.0, 100.0), (500.0, 900.0, 100.0), (900.0, 1000.0, 50.0)]
    pol, view, spec = setup_running(use, samples, slowest={"j0": ("worker", 1, 0.25)}, straggler="replace")
    pol.next_round = 1100.0                      # between Stage-2 rounds: the heartbeat alone
    alloc = pol.decide(view).allocations[spec.job_id]
    # 3 workers stay on node 1, one goes to the least-requested node (spread): node 0 holds the 2 PS
    # (32 of 64 cores), nodes 2..7 are empty, so one of those; the grants are the same
    assert alloc["worker"][1] == 3 and sum(alloc["worker"].values()) == 4 and 0 not in alloc["worker"]
    assert (alloc["worker"].cpu, alloc["worker"].mem) == (4.0, 8.0) and dict(alloc["ps"]) == {0: 2}
    assert pol.shard_batches(spec.job_id) == 256   # no dynamic sharding in this handling
    assert pol.tracks["j0"].moved_off == {1}
    # still reported slow on node 1 (the change not applied yet): not replaced twice
    assert spec.job_id not in pol.decide(view).allocations


def test_a_slowdown_after_a_change_is_rolled_back_not_read_as_a_straggler():
    use = {"worker": (4.0, 8.0), "ps": (8.0, 8.0)}
    before = Config(4, 2, 4.0, 16.0, 8.0, 8.0)
    after = Config(8, 2, 4.0, 16.0, 8.0, 8.0)
    # 100 steps/s at ``before`` until 900 s; the plan to 8 workers ran 60 steps/s from 1000 s
    pol, view, spec = setup_running(use, [(1000.0, 1200.0, 60.0)], cfg=after, now=1200.0)
    st = view.running["j0"]._state
    st.samples = [[100.0, 900.0, 100.0, running_state(spec, before, [], 0.0)[1]]] + st.samples
    tr = pol.tracks["j0"]
    tr.last_change, tr.verify = 1000.0, (before, 100.0)
    d = pol.decide(view)
    alloc = d.allocations["j0"]
    # 60 < 100 x (1 - 0.05): back to 4 workers, and the 8-worker plan is never taken again
    assert sum(alloc["worker"].values()) == 4 and tr.config == before and tr.verify is None
    assert (8, 2, 4.0, 16.0) in tr.bad
    assert tr.slow == [] and tr.shard == 0       # no straggler: nothing slowed a task


def test_after_a_rollback_stage_2_leaves_the_job_at_its_best_measured_configuration():
    # the rollback of the test above (8 workers at 60 steps/s -> back to 4 at 100): one rollback
    # is max_rollbacks' default, so the next round plans the job no more; with max_rollbacks=2 it does
    def rolled_back(**params):
        use = {"worker": (4.0, 8.0), "ps": (8.0, 8.0)}
        before, after = Config(4, 2, 4.0, 16.0, 8.0, 8.0), Config(8, 2, 4.0, 16.0, 8.0, 8.0)
        pol, view, spec = setup_running(use, [(1000.0, 1200.0, 60.0)], cfg=after, now=1200.0, **params)
        st = view.running["j0"]._state
        st.samples = [[100.0, 900.0, 100.0, running_state(spec, before, [], 0.0)[1]]] + st.samples
        tr = pol.tracks["j0"]
        tr.last_change, tr.verify, tr.overflow = 1000.0, (before, 100.0), 3
        pol.decide(view)
        # the next round: at ``before`` since 1200 s, a healthy 100 steps/s measured there
        st.allocation = running_state(spec, before, [], 0.0)[1]
        st.samples.append([1200.0, 1500.0, 100.0, st.allocation])
        view.running["j0"]._obs.now = 1500.0
        pol.next_round = 1500.0
        planned = []
        orig = pol._plan_state
        pol._plan_state = lambda v, j, t: planned.append(j.job_id) or orig(v, j, t)
        pol.decide(view)
        return tr, planned

    tr, planned = rolled_back()
    assert tr.rollbacks == 1 and tr.overflow == 0 and planned == []   # within the cap: no overflow left
    tr, planned = rolled_back(max_rollbacks=2)
    assert tr.rollbacks == 1 and planned == ["j0"]


def test_a_plan_gives_a_worker_no_fewer_cores_than_it_is_seen_to_use():
    # [D] §4.2: "each new worker is allocated with ŵ CPU cores". xDeepFM at 8 x 20 + 2 x 16, its
    # workers seen using 19.4 of their 20 cores: the search's worker cores range over ⌈19.4⌉ = 20
    # .. the 32-core pod, PS cores over 1 .. 32; a job whose workers use all they hold keeps 1 .. 32
    use = {"worker": (19.4, 8.0), "ps": (12.0, 8.0)}
    cfg = Config(8, 2, 20.0, 16.0, 8.0, 8.0)
    pol, view, _ = setup_running(use, [(100.0, 1000.0, 47.8)], cfg=cfg)
    job, tr = view.running["j0"], pol.tracks["j0"]
    pol._observe(view, job, tr)
    assert pol._plan_state(view, job, tr).bounds[4:] == (20, 1, 32)
    pol2, view2, _ = setup_running({"worker": (20.0, 8.0), "ps": (12.0, 8.0)}, [(100.0, 1000.0, 47.8)], cfg=cfg)
    job2, tr2 = view2.running["j0"], pol2.tracks["j0"]
    pol2._observe(view2, job2, tr2)
    assert pol2._plan_state(view2, job2, tr2).bounds[4:] == (1, 1, 32)


def test_the_sanity_bound_caps_what_a_plan_is_believed_to_gain():
    from clustersim.policies.dlrover_search import Costs, JobState, evaluate
    # a fit that predicts 1 worker x 1 core (+ 1 PS x 1 core) at T = 1/1 + 0 + ... : 1/(a1 + b0) steps/s
    model = DLRoverSpeed(np.array([0.001, 0.0, 0.0, 0.0, 0.0]))   # absurd: 1,000 steps/s per worker-core
    cur = Config(43, 4, 4.0, 16.0, 8.0, 8.0)                        # 236 cores
    # measured 150 steps/s on 43 x 4 + 4 x 16 used cores = 236: 0.636 steps/s per core, x 2 = 1.27
    job = JobState(0, model, cur, 100_000.0, (1, 60, 1, 15, 1, 1, 32), 400.0, 32.0, 8.0, 2.0 * 150.0 / 236.0)
    x = np.array([[1.0, 1.0, 1.0, 1.0]])
    rc, tg, rate, cpu, _ = evaluate(job, x, Costs(), 8.0)
    assert rate[0] == pytest.approx(2 * 1.2711864, rel=1e-6)       # 2 cores x 1.27, not 1,000
    assert tg[0] < 0                                                # no gain: never a candidate


def test_idle_ps_cores_bring_more_workers_beyond_the_quota_as_preemptible_ones():
    # [D] §4.2 Adjust 1, its xDeepFM example: 8 workers of 20 cores, 2 PS of 16 cores using 27.4 of
    # their 32: ŝ = 27.4 / 8 = 3.425 per worker, ⌈32 / 3.425⌉ = ⌈9.34⌉ = 10 workers: 2 more ([D]:
    # 47.8 -> 56 steps/s). 192 + 2 x 20 = 232 cores > 200: both are overflow workers
    use = {"worker": (18.3, 8.0), "ps": (13.7, 4.0)}
    pol, view, spec = setup_running(use, [(100.0, 1000.0, 47.8)], cfg=Config(8, 2, 20.0, 16.0, 8.0, 8.0))
    pol.tracks["j0"].planned = True               # [D]: Adjust after Optimize
    alloc = pol.decide(view).allocations["j0"]
    tr = pol.tracks["j0"]
    assert sum(alloc["worker"].values()) == 10 and alloc["worker"].cpu == 20.0 and sum(alloc["ps"].values()) == 2
    assert tr.overflow == 2 and tr.verify == (Config(8, 2, 20.0, 16.0, 8.0, 8.0), 47.8)
    assert tr.idle_ps_at == (2, 16.0)             # once per PS set


def test_overflow_workers_go_when_a_pending_job_does_not_fit():
    # 4 nodes of 64 cores; the running job holds 2 PS x 16 on node 0 and 10 workers x 20 (2 of them
    # overflow): 232 cores, 24 free. A new job's cold start (2 pods of 32) and its request (2 x 8 +
    # 4 x 8 = 48 cores) do not fit; without the 2 overflow workers (40 cores) the request does
    pol = DLRover(cold_ps=1)
    cl = Cluster([NodeGroup(4, 0, 64, 192)])
    spec = ps_job("r", 0)
    cfg = Config(10, 2, 20.0, 16.0, 8.0, 8.0)
    alloc = {"ps": Tasks({0: 2}, cpu=16.0, mem=8.0), "worker": Tasks({0: 1, 1: 3, 2: 3, 3: 3}, cpu=20.0, mem=8.0)}
    st = JobState(spec, status=Status.RUNNING, allocation=alloc, progress=1000.0, since=0.0, first_start=0.0)
    cl.take(spec, alloc, "test")
    pol.reset(make_view(0.0, cl))
    pol.tracks["r"] = Track(config=cfg, last_change=0.0, overflow=2)
    pol.order["r"] = 0
    pol.next_round = 10_000.0
    new = JobState(ps_job("n", 1, model="dcn", user="x", table="x/t"))
    view = make_view(500.0, cl, running=[st], pending=[new])
    view.arrived = (view.pending["n"],)
    d = pol.decide(view)
    assert sum(d.allocations["r"]["worker"].values()) == 8 and pol.tracks["r"].overflow == 0
    assert "n" in d.allocations and pol.tracks["n"].config.cpu == 48.0   # at its request


def test_a_job_waiting_for_its_master_pod_takes_no_overflow_workers():
    """The state above, the new job arriving at 500 s: until its master pod is up (520 s) it is not
    a job that does not fit, and the running job keeps its 2 overflow workers; at 520 s they go."""
    pol = DLRover(cold_ps=1)
    cl = Cluster([NodeGroup(4, 0, 64, 192)])
    spec = ps_job("r", 0)
    alloc = {"ps": Tasks({0: 2}, cpu=16.0, mem=8.0), "worker": Tasks({0: 1, 1: 3, 2: 3, 3: 3}, cpu=20.0, mem=8.0)}
    st = JobState(spec, status=Status.RUNNING, allocation=alloc, progress=1000.0, since=0.0, first_start=0.0)
    cl.take(spec, alloc, "test")
    pol.reset(make_view(0.0, cl))
    pol.tracks["r"] = Track(config=Config(10, 2, 20.0, 16.0, 8.0, 8.0), last_change=0.0, overflow=2)
    pol.order["r"] = 0
    pol.next_round = 10_000.0
    new = JobState(ps_job("n", 1, model="dcn", user="x", table="x/t", submit=500.0))
    view = make_view(500.0, cl, running=[st], pending=[new])
    view.arrived = (view.pending["n"],)
    d = pol.decide(view)
    assert not d.allocations and pol.tracks["r"].overflow == 2
    d = pol.decide(make_view(520.0, cl, running=[st], pending=[new]))
    assert sum(d.allocations["r"]["worker"].values()) == 8 and "n" in d.allocations


def test_a_failed_job_restarts_first_at_its_last_configuration():
    pol = DLRover()
    cl = Cluster([NodeGroup(2, 0, 64, 192)])
    pol.reset(make_view(0.0, cl))
    failed, newer = ps_job("f", 0), ps_job("n", 1, submit=0.0)
    cfg = Config(6, 2, 4.0, 16.0, 8.0, 8.0)                       # 56 cores
    pol.tracks["f"] = Track(config=cfg, last_change=0.0)
    pol.order["f"] = 0
    st_f = JobState(failed, status=Status.PENDING, first_start=0.0, stop_reason=StopReason.NODE_DOWN)
    st_n = JobState(newer)
    view = make_view(600.0, cl, pending=[st_n, st_f], stopped=[st_f])
    view.arrived = (view.pending["n"],)
    d = pol.decide(view)
    alloc = d.allocations["f"]
    assert sum(alloc["worker"].values()) == 6 and alloc["worker"].cpu == 4.0 and alloc["ps"].cpu == 16.0
    assert list(d.allocations)[0] == "f"


def test_a_new_jobs_tasks_wait_for_its_master_pod_a_restart_does_not():
    """[D] §3: the job's master pod starts first and has the PS and workers launched; a pod launch
    takes about 20 s ([D] §6.3). A job arriving at 100 s: nothing at 100 s, a wake-up at 120 s, its
    tasks at 120 s. A job that ran (its master is up) restarts at once."""
    pol = DLRover()
    cl = big_cluster()
    pol.reset(make_view(0.0, cl))
    st = JobState(ps_job("n", 0, submit=100.0))
    view = make_view(100.0, cl, pending=[st])
    view.arrived = (view.pending["n"],)
    d = pol.decide(view)
    assert "n" not in d.allocations and d.wakeup == pytest.approx(20.0)
    d = pol.decide(make_view(120.0, cl, pending=[st]))
    assert "n" in d.allocations
    ran = DLRover()
    ran.reset(make_view(0.0, cl))
    ran.tracks["f"] = Track(config=Config(6, 2, 4.0, 16.0, 8.0, 8.0), last_change=0.0)
    ran.order["f"] = 0
    st_f = JobState(ps_job("f", 0, submit=100.0), status=Status.PENDING, first_start=100.0, stop_reason=StopReason.NODE_DOWN)
    assert "f" in ran.decide(make_view(105.0, cl, pending=[st_f], stopped=[st_f])).allocations


# ---------------------------------------------------------------------------- the history across runs
def test_history_persists_and_a_second_run_starts_warm(tmp_path):
    from clustersim.experiment import build_engine, compose
    path = tmp_path / "history.sqlite"
    jcts, warm = [], []
    for _ in range(2):
        engine = build_engine(compose(["+experiment=dlrover_single", "policy=dlrover", f"policy.history={path}",
                                       "progress=false"]))
        rec = engine.run()
        jcts.append(rec.jobs().to_pydict()["jct"][0])
        warm.append(engine.policy.warm_started)
        engine.policy.history.close()
    assert path.exists() and len(History(path).records) == 1
    assert warm == [0, 1]
    # the warm start skips the cold start's sampling round (180 s at 12 steps/s) and the migration
    # that follows it (seed 0: 1,388 s warm vs 1,901 s cold)
    assert jcts[1] < 0.8 * jcts[0]


def test_the_shard_sizes_dlrover_sets_shorten_a_stragglers_tail_end_to_end():
    # one W&D job cold-started on DLRover-RM's small cluster, at (12 workers, 10 PS) from 180 s at
    # ~161 steps/s: a worker turns 33.3x slow (3 % CPU, [RM] §6.2) at 1,000 s for good. The fault
    # model reads the shard size DLRover gives it at each heartbeat; the tail of the shard it holds
    # when the data runs out is (S x 33.3 - 256) / (2 x 161/12) s: 308 s at 256 batches, 70 s at 64
    # -- at most 238 s saved, less what the larger tail cost over the two heartbeats before 64
    from clustersim.experiment import build_engine, compose

    def end(sizes: str) -> float:
        eng = build_engine(compose(["+experiment=dlrover_single", "policy=dlrover", "progress=false",
                                    "faults=dlrover_cloud", "faults.task=null", "faults.oom=null", "faults.hot_ps=null",
                                    "faults.straggler.per_pod_hour=0", f"policy.shard_batches={sizes}"]))
        eng.at(1000.0, lambda: eng.faults.slow_task("dlrm-0", "worker", 33.3, 1e6))
        return eng.run().states[0].end_time

    saved = end("[256]") - end("[256,128,64]")   # [256]: no intervention
    assert 150.0 < saved < 238.0
