"""Optimus (seed 004): Eq. 9 gains and Algorithm 1 on a two-job state worked out by hand, Theorem 1
placement on a hand-made cluster, the online fitters on synthetic ground truth, and end to end."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from clustersim import policies
from clustersim.policies.optimus import Estimate, NodeSet, Plan, _next, allocate, place, optimus_rate
from clustersim.simulator.convergence import LossCurve, LossFitter, epochs_to_converge
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobSpec, RoleSpec
from clustersim.simulator.overhead import ConstantOverhead
from clustersim.simulator.speed import OptimusSpeed
from tests.factories import cluster

PS = RoleSpec("ps", 1, 0.0, 2.0, 4.0, 1, 4)
WORKER = RoleSpec("worker", 1, 1.0, 2.0, 4.0, 1, 4)


def job(name: str, submit: float, roles=(PS, WORKER)):
    return SimpleNamespace(job_id=name, submit_time=submit, index=int(submit), roles=roles)


def two_jobs():
    """A: Q = 12, f = 1/(1/w + 1/(2p)) (compute and PS-bound parts); B: Q = 6, f = w (PS does not help).
    Cluster totals: 4 GPUs, 20 cores, 100 GB, so a PS's dominant share is 2/20 = 0.1 and a worker's 1/4 = 0.25."""
    a = Plan(job("a", 0.0), Estimate(12.0, lambda p, w: 1.0 / (1.0 / w + 1.0 / (2.0 * p))), 0)
    b = Plan(job("b", 1.0), Estimate(6.0, lambda p, w: float(w)), 1)
    return a, b


CAPACITY = np.array([4.0, 20.0, 100.0])
SEQ2SEQ = (0.21, 1.07, 0.07)   # Optimus Fig. 5


def test_eq9_gains_by_hand():
    a, b = two_jobs()
    heap = []
    for plan in (a, b):
        plan.ups, plan.wup = (0.1, PS.demand, 4), (0.25, WORKER.demand, 4)
        plan.p, plan.w = 1, 1
        plan.t = plan.est.time(1, 1)
        heap.append(_next(plan))
    # A at (1,1): t = 12 * 1.5 = 18; one more PS: 12 * 1.25 = 15, gain 3 / 0.1 = 30;
    # one more worker: 12 * 1.0 = 12, gain 6 / 0.25 = 24 -> A's best is a PS, 30.
    # B at (1,1): t = 6; one more worker: 3, gain 3 / 0.25 = 12; a PS gains nothing.
    got = sorted((round(-g, 9), plan.job.job_id, "ps" if is_ps else "worker") for g, _, _, plan, is_ps in heap)
    assert got == [(12.0, "b", "worker"), (30.0, "a", "ps")]
    assert (a.nxt, b.nxt) == (15.0, 3.0)   # the remaining time after the queued task


@pytest.mark.parametrize("mode, expect", [("skip", {"a": (4, 2), "b": (1, 2)}), ("stop", {"a": (3, 2), "b": (1, 2)})])
def test_algorithm1_by_hand(mode, expect):
    """Both start at (1,1) (2 GPUs, 8 cores used). Then by gain: A ps 30 -> A (2,1); A worker
    6/0.25 = 24 -> (2,2); B worker 12 -> B (1,2), GPUs used up; A ps 1/0.1 = 10 -> (3,2); A worker
    (gain 8) does not fit: ``stop`` ends here; ``skip`` blocks A's workers and goes on: A ps
    0.5/0.1 = 5 -> (4,2), A at its PS bound; B worker does not fit; B's PS gains 0: the end."""
    a, b = two_jobs()
    got = allocate([a, b], CAPACITY, on_no_fit=mode)
    assert {p.job.job_id: p.pw() for p in got} == expect


def test_algorithm1_keeps_each_job_within_its_cpu_quota():
    """The same two jobs with ``job_cpu_cap`` = 8 cores (every task 2 cores): A starts at (1,1),
    4 cores; A ps (gain 30) -> (2,1), 6 cores; A worker (24) -> (2,2), 8 cores: A is full; B worker
    (12) -> (1,2), 6 cores, GPUs used up; B ps gains nothing. Without the quota A went on to (3,2)."""
    a, b = two_jobs()
    got = allocate([a, b], CAPACITY, job_cpu_cap=8.0)
    assert {p.job.job_id: p.pw() for p in got} == {"a": (2, 2), "b": (1, 2)}
    assert a.cpu == 8.0 and b.cpu == 6.0


def test_a_start_that_cannot_be_placed_at_its_planned_counts_starts_smaller():
    """Algorithm 1 plans against the cluster's totals, so a pending job's counts may not pack onto
    its nodes (seed 0 of the single W&D job waited for good: a livelock); the plan then drops one
    task at a time, of the role furthest above its minimum, until it is placed or at its minimum."""
    from clustersim.policies.optimus import _shrink
    roles = (RoleSpec("ps", 1, 0.0, 4.0, 1.0, 1, 4), RoleSpec("worker", 1, 0.0, 2.0, 1.0, 1, 4))
    counts = {"ps": 4, "worker": 3}
    j = job("x", 0.0, roles)
    # the PS role is 3 above its minimum, the workers 2: a PS goes first, then (2 and 2 above) a worker
    assert _shrink(j, counts) and counts == {"ps": 3, "worker": 3}
    assert _shrink(j, counts) and counts == {"ps": 3, "worker": 2}
    counts = {"ps": 1, "worker": 1}
    assert not _shrink(j, counts) and counts == {"ps": 1, "worker": 1}   # the gang minimum: nothing to drop


def test_algorithm1_minimums_in_arrival_order_and_no_gain_no_task():
    """Gang minimums go first in arrival order, a job whose minimum does not fit the totals gets
    nothing (it waits); a job whose gains are all zero stays at its minimum."""
    flat = [Plan(job(f"j{i}", float(i)), Estimate(5.0, lambda p, w: 1.0), i) for i in range(5)]
    got = allocate(flat, CAPACITY)
    assert [p.job.job_id for p in got] == ["j0", "j1", "j2", "j3"]   # 4 GPUs: 4 minimums
    assert all(p.pw() == (1, 1) for p in got)


# ---------------------------------------------------------------------------- growth step (DLRover §6.3)
CPU_PS = RoleSpec("ps", 1, 0.0, 2.0, 4.0, 1, 8)
CPU_WORKER = RoleSpec("worker", 1, 0.0, 1.0, 2.0, 1, 16)
CPU_ONLY = np.array([0.0, 20.0, 100.0])


def _stepped(start, cap=None):
    """One CPU job, Q = 12, f = min(w, 2p) (workers bound until 2 per PS); PS 2 cores (share
    2/20 = 0.1), worker 1 core (1/20 = 0.05); a step of 2 PS or 4 workers from ``start``."""
    plan = Plan(job("s", 0.0, (CPU_PS, CPU_WORKER)), Estimate(12.0, lambda p, w: float(min(w, 2 * p))), 0,
                step=(2, 4), start=start)
    got = allocate([plan], CPU_ONLY, **({} if cap is None else {"job_cpu_cap": cap}))
    return got[0]


def test_growth_step_one_role_a_round_by_hand():
    """Round 1 at (1,1): t = 12/1 = 12. 2 PS -> (3,1): f = 1, t = 12, gain 0; 4 workers -> (1,5):
    f = 2, t = 6, gain 6 / (4 x 0.05) = 30: the workers, and nothing more this round (Algorithm 1
    would go on while gains are positive). Round 2 at (1,5): t = 6. 2 PS -> (3,5): f = 5, t = 2.4,
    gain 3.6 / (2 x 0.1) = 18; 4 workers -> (1,9): f = 2, gain 0: the PS."""
    first = _stepped(None)
    assert first.pw() == (1, 5) and first.cpu == 2.0 + 5.0
    second = _stepped({"ps": 1, "worker": 5})
    assert second.pw() == (3, 5) and second.cpu == 6.0 + 5.0


def test_growth_step_is_cut_to_the_quota():
    """At (3,5) with a 12-core quota the job holds 3 x 2 + 5 x 1 = 11 cores: 2 PS (4 cores) do not
    fit and no PS does; 4 workers are cut to the 1 that fits -> (3,6): f = 6, t = 2 against 2.4,
    gain 0.4 / (1 x 0.05) = 8 > 0."""
    plan = _stepped({"ps": 3, "worker": 5}, cap=12.0)
    assert plan.pw() == (3, 6) and plan.cpu == 12.0


def test_remaining_work_of_a_job_that_declares_its_steps():
    """A DLRM job reports no loss; it trains a fixed number of steps ([RM] §6: 200,000). Declared,
    Q is what is left: 200,000 - 50,000 = 150,000; undeclared, the steps done (50,000); never below 1."""
    pol = policies.make("optimus")
    pol.cache = {}
    dlrm = SimpleNamespace(job_id="d", iterations_done=50_000.0, iterations_per_epoch=None, declared_iterations=200_000.0)
    assert pol.remaining(dlrm) == 150_000.0
    assert pol.remaining(SimpleNamespace(**{**vars(dlrm), "declared_iterations": None})) == 50_000.0
    assert pol.remaining(SimpleNamespace(**{**vars(dlrm), "iterations_done": 200_000.0})) == 1.0


def test_mode_async_fits_eq3_to_a_job_named_without_async():
    """Samples of an asynchronous job, f = w / (0.1 + 0.05 w/p) (Eq. 3, a0 = 0.1, a1 = 0.05), at the
    five pre-run settings: ``mode: async`` recovers f(3, 20) = 20 / (0.1 + 0.05 x 20/3) = 46.15; the
    model name ("wide_deep") makes it sync by default, and Eq. 4 then has f fall with more workers
    where the job speeds up."""
    truth = lambda p, w: w / (0.1 + 0.05 * w / p)   # noqa: E731
    pts = [((p, w), truth(p, w)) for p, w in ((1, 1), (1, 4), (4, 4), (4, 10), (10, 10))]
    wd = SimpleNamespace(model="wide_deep", roles=(CPU_PS, CPU_WORKER), batch_size=512)
    f_async = policies.make("optimus", mode="async")._fit(wd, pts)
    assert f_async(3, 20) == pytest.approx(20 / (0.1 + 0.05 * 20 / 3), rel=1e-3)
    f_name = policies.make("optimus")._fit(wd, pts)
    assert f_name(3, 40) < f_name(3, 20) and truth(3, 40) > truth(3, 20)


def test_optimus_rate_matches_the_fitted_model():
    for mode, theta in (("sync", [0.01, 0.3, 0.2, 0.02, 0.001]), ("async", [0.5, 0.3, 0.02, 0.01])):
        m = OptimusSpeed(mode, 32.0, theta)
        f = optimus_rate(mode, theta, 32.0)
        for p, w in ((1, 1), (2, 5), (7, 3)):
            assert f(p, w) == pytest.approx(float(m.predict((p, w))[0]))


# ---------------------------------------------------------------------------- Theorem 1
def _testbed_state():
    """Nodes 0-1: CPU servers (16 cores, 80 GB), node 1 with 6 cores in use; nodes 2-4: GPU
    servers (2 GPUs, 8 cores, 48 GB), node 4 with one GPU and 2 cores in use."""
    cap = np.array([[0, 16, 80], [0, 16, 80], [2, 8, 48], [2, 8, 48], [2, 8, 48]], dtype=float)
    free = cap.copy()
    free[1] -= [0, 6, 10]
    free[4] -= [1, 2, 8]
    return NodeSet(free, np.ones(5, dtype=bool), cap)


def test_theorem1_fewest_servers_even_spread():
    nodes = _testbed_state()
    gpu_job = job("g", 0.0, (RoleSpec("ps", 2, 0.0, 3.0, 9.0, 1, 8), RoleSpec("worker", 4, 1.0, 2.0, 8.0, 1, 8)))
    # 4 workers need 4 GPUs: two GPU servers at least; each then takes 2 workers (4 cores) and 1 PS (3 cores)
    alloc = place(nodes, gpu_job, {"ps": 2, "worker": 4})
    assert alloc == {"worker": {2: 2, 3: 2}, "ps": {2: 1, 3: 1}}
    cpu_job = job("c", 1.0, (RoleSpec("ps", 1, 0.0, 3.0, 9.0, 1, 8), RoleSpec("worker", 3, 0.0, 2.0, 8.0, 1, 8)))
    # CPU-only: the CPU server with the most free cores holds it whole (one server)
    assert place(nodes, cpu_job, {"ps": 1, "worker": 3}) == {"ps": {0: 1}, "worker": {0: 3}}
    assert nodes.rows[0] == [0.0, 7.0, 47.0] and nodes.rows[2] == [0.0, 1.0, 23.0]


def test_theorem1_job_that_does_not_fit_changes_nothing():
    nodes = _testbed_state()
    before = [list(r) for r in nodes.rows]
    big = job("b", 0.0, (RoleSpec("ps", 1, 0.0, 3.0, 9.0, 1, 8), RoleSpec("worker", 6, 1.0, 2.0, 8.0, 1, 8)))
    assert place(nodes, big, {"ps": 1, "worker": 6}) is None   # 5 GPUs free
    assert nodes.rows == before and sorted(i for h in nodes.heaps for _, i in h) == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------------------- fitters
def remaining_time_errors(fractions=(0.2, 0.4, 0.6, 0.8), n_jobs=40, threshold=0.01, patience=5, seed=0):
    """Mean |predicted − true| / true of the remaining epochs (= remaining time at a fixed speed)
    after seeing a fraction of training, over jittered Eq. 1 curves with 2% observation noise."""
    rng = np.random.default_rng(seed)
    errs = {f: [] for f in fractions}
    for i in range(n_jobs):
        b = tuple(np.array([0.21, 1.07, 0.07]) * np.exp(0.2 * rng.standard_normal(3)))
        total = epochs_to_converge(b, threshold, False, patience)
        curve = LossCurve(b, 100.0, total, noise=0.02, seed=i)
        for f in fractions:
            n = max(3, int(f * total))
            fit = LossFitter().fit(curve.observations(n * 100.0))
            pred = fit.remaining_epochs(threshold, relative=False, patience=patience)
            errs[f].append(abs(pred - (total - n)) / max(total - n, 1))
    return {f: float(np.mean(v)) for f, v in errs.items()}


def test_loss_fitter_converges_on_ground_truth():
    e = remaining_time_errors()
    assert e[0.8] < e[0.2]
    assert e[0.6] < 0.35 and e[0.8] < 0.35


def test_speed_fitter_converges_on_ground_truth():
    """Eq. 3 ground truth, measured with 2% noise at the settings a job runs at: the fit's error
    over the whole (p, w) range falls as samples accumulate."""
    truth = OptimusSpeed("async", 1.0, [2.83, 3.92, 0.0, 0.11])   # Table 2's async ResNet-50 shape
    rng = np.random.default_rng(1)
    grid = [((p, w), float(truth.predict((p, w))[0])) for p in range(1, 13) for w in range(1, 13)]
    settings = [(int(rng.integers(1, 13)), int(rng.integers(1, 13))) for _ in range(30)]
    errors = []
    for n in (5, 10, 30):
        pts = [(x, float(truth.predict(x)[0]) * (1 + 0.02 * rng.standard_normal())) for x in settings[:n]]
        errors.append(OptimusSpeed("async", 1.0).fit(pts, min_samples=1).mape(grid))
    assert errors[-1] < 0.03 and errors[-1] <= errors[0]


# ---------------------------------------------------------------------------- end to end
def ps_jobs(n=12):
    roles = (RoleSpec("ps", 1, 0.0, 3.0, 9.0, 1, 6), RoleSpec("worker", 1, 1.0, 2.0, 8.0, 1, 6))
    return [JobSpec(index=i, job_id=f"j{i}", submit_time=100.0 * i, roles=roles, total_work=3000.0 * (1 + i % 3),
                    duration=3000.0 * (1 + i % 3)) for i in range(n)]


@pytest.mark.parametrize("name", ["optimus", "optimus_oracle"])
def test_runs_ps_jobs_to_completion_and_charges_the_prerun(name):
    specs = ps_jobs()
    pol = policies.make(name, interval=300.0, prerun_s=30.0)
    rec = Engine(specs, cluster(nodes=4, gpus=2, cpus=16, mem=64), pol, overhead=ConstantOverhead(resume_s=20.0),
                 progress=False).run()
    assert rec.summary()["jobs_finished"] == len(specs)
    for st in rec.states:   # no job starts before its 5 x 30 s pre-run is over
        assert st.first_start >= st.spec.submit_time + 150.0 - 1e-9
    assert max(st.rescales for st in rec.states) > 0   # it is elastic


def test_prediction_error_signs_are_seeded_per_job():
    a = policies.make("optimus_oracle", prediction_error=0.2, seed=3)
    b = policies.make("optimus_oracle", prediction_error=0.2, seed=3)
    for p in (a, b):
        p.cache = {}
    fa = [a._error_factors(job(f"j{i}", float(i))) for i in range(20)]
    assert fa == [b._error_factors(job(f"j{i}", float(i))) for i in range(20)]
    assert {x for pair in fa for x in pair} == {0.8, 1.2}


def test_speed_error_of_its_own_gives_section_6_3_1s_combined_point():
    """15% on the epochs to convergence and 6% on the speed (§6.3.1): factors 1 ± 0.15 and 1 ± 0.06,
    with the same signs as a single error size draws (the seed fixes them per job)."""
    both = policies.make("optimus_oracle", prediction_error=0.15, speed_error=0.06, seed=3)
    one = policies.make("optimus_oracle", prediction_error=0.15, seed=3)
    for p in (both, one):
        p.cache = {}
    for i in range(20):
        (q, f), (q1, f1) = both._error_factors(job(f"j{i}", float(i))), one._error_factors(job(f"j{i}", float(i)))
        assert q == q1 and q in (0.85, 1.15)
        assert f == pytest.approx(1.0 + 0.06 * (1 if f1 > 1 else -1))


def test_remaining_time_aims_at_each_jobs_own_threshold():
    """Two jobs with the same observed losses: the one whose owner set 2% has fewer epochs left than
    the 1% one; a threshold given to the policy overrides both."""
    from clustersim.simulator.job import JobState
    from clustersim.simulator.view import JobView, Observer

    def view(delta):
        curve = LossCurve(SEQ2SEQ, 100.0, 60, 0.0, 0, delta)
        st = JobState(JobSpec(index=0, job_id=f"d{delta}", submit_time=0.0, roles=(PS, WORKER),
                              total_work=6000.0, duration=6000.0, curve=curve))
        st.progress = 10 * 100.0    # 10 epochs seen
        return JobView(st, Observer(), oracle=False)

    pol = policies.make("optimus", loose_threshold=0.0)
    pol.cache = {}
    tight, loose = pol.remaining(view(0.01)), pol.remaining(view(0.02))
    fit = LossFitter().fit(view(0.01).loss_observations)
    assert tight == pytest.approx(fit.remaining_epochs(0.01, None, False, 5) * 100.0)
    assert loose == pytest.approx(fit.remaining_epochs(0.02, None, False, 5) * 100.0)
    assert loose < tight
    fixed = policies.make("optimus", loose_threshold=0.0, threshold=0.01)
    fixed.cache = {}
    assert fixed.remaining(view(0.02)) == pytest.approx(tight)


def test_the_oracle_aims_at_the_loose_threshold_first_with_true_epochs():
    """Seq2Seq's curve (Fig. 5), 100 iterations an epoch, δ = 1%, patience 5, so the job converges
    at epochs_to_converge(b, 0.01) and reaches δ' = 3% at epochs_to_converge(b, 0.03): before that
    the oracle's Q is the true work to δ' x 1.05 (§4.1), after it the true remaining work."""
    from clustersim.simulator.job import JobState
    from clustersim.simulator.view import JobView, Observer
    final, loose = epochs_to_converge(SEQ2SEQ, 0.01, False, 5), epochs_to_converge(SEQ2SEQ, 0.03, False, 5)
    assert loose < final
    curve = LossCurve(SEQ2SEQ, 100.0, final, 0.0, 0, 0.01)
    st = JobState(JobSpec(index=0, job_id="o", submit_time=0.0, roles=(PS, WORKER), total_work=final * 100.0,
                          duration=final * 100.0, curve=curve))
    pol = policies.make("optimus_oracle")
    pol.cache = {}
    st.progress = 100.0                       # one epoch done
    assert pol.remaining(JobView(st, Observer(), oracle=True)) == pytest.approx((loose - 1) * 100.0 * 1.05)
    st.progress = (loose + 1) * 100.0         # past δ'
    assert pol.remaining(JobView(st, Observer(), oracle=True)) == pytest.approx((final - loose - 1) * 100.0)
    plain = policies.make("optimus_oracle", loose_threshold=0.0)
    plain.cache = {}
    st.progress = 100.0
    assert plain.remaining(JobView(st, Observer(), oracle=True)) == pytest.approx((final - 1) * 100.0)


def test_fewest_servers_count_gpu_servers_for_gpu_jobs():
    """The testbed (§6.1): CPU servers (0 GPU, 16 cores, 80 GB), GPU servers (2 GPUs, 8 cores, 48 GB).
    1 PS (3 cores, 9 GB) + 2 workers (1 GPU, 2 cores, 8 GB): 7 cores, 25 GB -> one GPU server.
    3 PS + 2 workers: 13 cores -> ceil(13 / 8) = 2 GPU servers (the largest server per resource,
    16 cores and 2 GPUs, would say 1). A CPU-only job: 13 cores on one 16-core CPU server."""
    from clustersim.policies.optimus import _fewest_nodes, _server_sizes
    cap = np.array([[0.0, 16.0, 80.0]] * 7 + [[2.0, 8.0, 48.0]] * 6)
    sizes = _server_sizes(cap)
    roles = (RoleSpec("ps", 1, 0.0, 3.0, 9.0, 1, 6), RoleSpec("worker", 1, 1.0, 2.0, 8.0, 1, 6))
    gpu = JobSpec(index=0, job_id="g", submit_time=0.0, roles=roles, total_work=1.0, duration=1.0)
    assert _fewest_nodes(gpu, {"ps": 1, "worker": 2}, sizes) == 1
    assert _fewest_nodes(gpu, {"ps": 3, "worker": 2}, sizes) == 2
    cpu_roles = (RoleSpec("ps", 1, 0.0, 3.0, 9.0, 1, 6), RoleSpec("worker", 1, 0.0, 2.0, 8.0, 1, 6))
    cpu = JobSpec(index=1, job_id="c", submit_time=0.0, roles=cpu_roles, total_work=1.0, duration=1.0)
    assert _fewest_nodes(cpu, {"ps": 3, "worker": 2}, sizes) == 1


def test_convergence_error_is_on_the_total_epochs():
    """§6.3.1: "the true number of epochs for convergence is v ... we use v·(1+e) or v·(1−e)". A job
    of 6,000 iterations with 4,000 done and e = 0.2: the scheduler sees 6,000 x 1.2 − 4,000 = 3,200
    or 6,000 x 0.8 − 4,000 = 800 left (not 2,000 x (1 ± 0.2)); below what is done, half an epoch."""
    from clustersim.simulator.job import JobState
    from clustersim.simulator.view import JobView, Observer
    curve = LossCurve(SEQ2SEQ, 100.0, 60, 0.0, 0, 0.01)
    st = JobState(JobSpec(index=0, job_id="e", submit_time=0.0, roles=(PS, WORKER), total_work=6000.0,
                          duration=6000.0, curve=curve))
    st.progress = 4000.0

    def left(e: float) -> set[float]:   # what the scheduler sees left, over 8 seeds of the error's sign
        seen = set()
        for seed in range(8):
            pol = policies.make("optimus_oracle", prediction_error=e, error_on="convergence", loose_threshold=0.0,
                                seed=seed)
            pol.cache = {}
            pol.speed = lambda job: (lambda p, w: 1.0)
            seen.add(round(pol.estimate(JobView(st, Observer(), oracle=True), None).q, 6))
        return seen

    assert left(0.2) == {3200.0, 800.0}
    # e = 0.5: 6,000 x 1.5 − 4,000 = 5,000, or 3,000 − 4,000 < 0: 50 (half an epoch)
    assert left(0.5) == {5000.0, 50.0}
