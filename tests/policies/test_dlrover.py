"""DLRover's three stages on hand-made states: warm start from a seeded history, the NNLS fit,
the cross-job greedy, each instability reaction; the history persisting across runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.policies.dlrover import DLRover, Track
from clustersim.policies.dlrover_history import Config, History, Record, smooth
from clustersim.policies.dlrover_search import Candidate, greedy
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


def make_view(now, cluster, running=(), pending=(), stopped=(), usage=None):
    obs = Observer(now=now, usage=usage, cluster=cluster)
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
    h.add(record("c", "xdeepfm", "u1/t0", "u1", 8, 2))        # table + user: 0.5
    h.add(record("d", "wide_deep", "u2/t0", "u1", 30, 6))     # model + user: 0.7
    h.add(record("e", "deepfm", "u3/t3", "u3", 50, 9))        # nothing: 0
    got = h.similar("wide_deep", "u1/t0", "u1", k=3, min_similarity=0.5)
    # least similar first; "b" and "c" tie at 0.5: the more recent row ("c") counts as more similar
    assert [r.job_id for r in got] == ["c", "d", "a"]
    cfg = smooth([r.config for r in got], mu=0.5)
    # Eq. 10: 0.5·A(a) + 0.25·A(d) + 0.25·A(c): workers 0.5·20 + 0.25·30 + 0.25·8 = 19.5 -> 20
    assert cfg.workers == 20 and cfg.ps == round(0.5 * 8 + 0.25 * 6 + 0.25 * 2)


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
    alloc = {"ps": Tasks({0: cfg.ps}, cpu=cfg.ps_cpu, mem=cfg.ps_mem),
             "worker": Tasks({1: cfg.workers}, cpu=cfg.worker_cpu, mem=cfg.worker_mem)}
    st = JobState(spec, status=Status.RUNNING, allocation=alloc, progress=progress, since=now, first_start=0.0)
    st.samples = [[a, b, r, alloc] for a, b, r in samples]
    return st, alloc


def setup_running(usage, samples, cfg=Config(4, 2, 4.0, 16.0, 8.0, 8.0), now=1000.0, **params):
    pol = DLRover(**params)
    cl = big_cluster()
    spec = ps_job()
    st, alloc = running_state(spec, cfg, samples, now)
    cl.take(spec, alloc, "test")
    pol.reset(make_view(0.0, cl))
    pol.tracks[spec.job_id] = Track(config=cfg, last_change=0.0)
    pol.order[spec.job_id] = 0
    pol.next_round = now
    view = make_view(now, cl, running=[st], usage=lambda s, a: usage)
    return pol, view, spec


def test_oom_prevention_grows_memory_before_the_need_passes_the_grant():
    use = {"worker": (4.0, 9.0), "ps": (16.0, 8.0 * 0.5)}   # a worker needs 9 GB of its 8
    pol, view, spec = setup_running(use, [(100.0, 900.0, 50.0)])
    d = pol.decide(view)
    alloc = d.allocations[spec.job_id]
    assert alloc["worker"].mem == math.ceil(9.0 * 1.2)            # need plus the 20 % margin
    assert alloc["ps"].mem == 8.0 and dict(alloc["worker"]) == {1: 4}   # same tasks, same nodes: a resize


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


def test_hot_ps_is_replaced_by_a_larger_ps():
    use = {"worker": (4.0, 8.0), "ps": (16.0, 8.0)}            # PS at 100 % of its 16 cores
    samples = [(100.0, 500.0, 100.0), (500.0, 900.0, 100.0), (900.0, 1000.0, 50.0)]
    pol, view, spec = setup_running(use, samples)
    d = pol.decide(view)
    alloc = d.allocations[spec.job_id]
    assert alloc["ps"].cpu == 32.0 and sum(alloc["ps"].values()) == 2   # 16 x 100/50, a pod at most


def test_worker_straggler_gets_smaller_shards_without_a_restart():
    use = {"worker": (4.0, 8.0), "ps": (6.0, 8.0)}             # PS at 37 %: not hot
    samples = [(100.0, 500.0, 100.0), (500.0, 900.0, 100.0), (900.0, 1000.0, 50.0)]
    pol, view, spec = setup_running(use, samples)
    d = pol.decide(view)
    assert spec.job_id not in d.allocations
    assert pol.shard_batches(spec.job_id) == 128
    assert pol.tracks[spec.job_id].slow_after == 900.0           # the slow interval stays out of fits


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
    assert jcts[1] < 0.7 * jcts[0]     # the warm start skips the cold start's scaling steps
