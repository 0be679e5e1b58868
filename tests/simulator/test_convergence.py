"""Loss curves: truth decides convergence, policies see noisy epochs, the online fitter improves."""

import numpy as np
import pytest

from clustersim import traces
from clustersim.simulator.view import JobView, Observer as Clock, OracleError
from clustersim.simulator.convergence import LossCurve, LossFitter, epochs_to_converge, loss, smooth_outliers
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobState
from clustersim.simulator.workload import Assignment, build_jobs
from tests.factories import cluster

SEQ2SEQ = (0.21, 1.07, 0.07)   # Optimus Fig. 5


def brute_force(b, threshold, relative, patience):
    k = np.arange(0, 100000)
    l = loss(b, k)
    drop = (l[:-1] - l[1:]) / (l[1:] if relative else l[1])     # drop[i] is over epoch i + 1
    first = int(np.argmax(drop[1:] < threshold)) + 2
    return first + patience - 1


@pytest.mark.parametrize("threshold, relative, patience", [(0.01, False, 1), (0.03, False, 5), (0.02, False, 3),
                                                           (0.01, True, 5), (0.001, True, 1)])
def test_convergence_epoch_is_the_first_with_small_enough_drops(threshold, relative, patience):
    assert epochs_to_converge(SEQ2SEQ, threshold, relative, patience) == brute_force(SEQ2SEQ, threshold, relative,
                                                                                     patience)


def test_tighter_thresholds_and_relative_drops_take_longer():
    e = [epochs_to_converge(SEQ2SEQ, d, False, 5) for d in (0.03, 0.02, 0.01)]
    assert e[0] < e[1] < e[2]
    assert epochs_to_converge(SEQ2SEQ, 0.01, True, 5) > e[2]      # Seq2Seq: relative 1% needs ~3x the epochs


def test_observations_are_noisy_repeatable_and_stop_at_convergence():
    c = LossCurve(SEQ2SEQ, iters_per_epoch=100.0, epochs=30, noise=0.05, seed=7)
    assert len(c.observations(99.0)) == 0 and len(c.observations(250.0)) == 2
    a, b = c.observations(1000.0), c.observations(2000.0)
    assert np.array_equal(a, b[:10])                              # the same noise for the same epochs
    assert len(c.observations(1e9)) == 30
    rel = c.observations(3000.0) / loss(SEQ2SEQ, np.arange(1, 31)) - 1
    assert 0.02 < rel.std() < 0.08


def assignment(**conv):
    return Assignment.from_config({"zoo": True, "convergence": {"enabled": True, "threshold": 0.01, "patience": 5,
                                                                 "noise": 0.02, "jitter": 0.2, **conv}})


def test_jobs_carry_a_curve_whose_convergence_point_is_their_work():
    table = traces.read("elasticflow", "bundled:elasticflow/ef/195job.csv")
    a = assignment()
    specs = build_jobs(table, "ef", a, seed=3)
    plain = build_jobs(table, "ef", Assignment.from_config({"zoo": True}), seed=3)
    for s, p in zip(specs, plain):
        assert s.total_work == p.total_work                       # durations still preserved
        assert s.curve.epochs * s.curve.iters_per_epoch == pytest.approx(s.total_work)
    assert [s.curve for s in build_jobs(table, "ef", a, seed=3)] == [s.curve for s in specs]
    assert len({s.curve.b for s in specs}) == len(specs)          # per-job jitter


def test_policies_see_only_epoch_observations_up_to_their_progress():
    table = traces.read("tiresias", "bundled:tiresias/60_job.csv")
    spec = build_jobs(table, "t", assignment(), seed=0)[0]
    st = JobState(spec)
    view = JobView(st, Clock(), oracle=False)
    assert len(view.loss_observations) == 0
    st.progress = 3.5 * spec.curve.iters_per_epoch
    assert len(view.loss_observations) == 3
    assert view.iterations_per_epoch == spec.curve.iters_per_epoch
    with pytest.raises(OracleError):
        view.total_work


def test_a_job_with_a_curve_still_finishes_at_its_convergence_point():
    table = traces.read("tiresias", "bundled:tiresias/60_job.csv")
    a = assignment()
    spec = build_jobs(table, "t", a, cluster(16, 4), seed=0)[0]
    from clustersim.policies.fifo import Fifo
    (st,) = Engine([spec], cluster(16, 4), Fifo(), speed=a.zoo.speed, progress=False).run().states
    assert st.end_time - spec.submit_time == pytest.approx(spec.duration, rel=1e-9)
    assert len(spec.curve.observations(st.progress)) == spec.curve.epochs


def test_fitter_recovers_a_noise_free_curve():
    k = np.arange(1, 40)
    f = LossFitter(grid=200).fit(loss(SEQ2SEQ, k) * 3.0)          # any loss scale
    assert f.predict(k) == pytest.approx(loss(SEQ2SEQ, k) * 3.0, rel=0.01)
    true_e = epochs_to_converge(SEQ2SEQ, 0.01, False, 5)
    assert abs(f.total_epochs(0.01, False, 5) - true_e) <= 1


def test_fitter_error_shrinks_as_epochs_are_observed():
    rng = np.random.default_rng(0)
    fractions = (0.2, 0.4, 0.7, 1.0)
    errors = {f: [] for f in fractions}
    for _ in range(40):
        b = tuple(np.array(SEQ2SEQ) * np.exp(0.3 * rng.standard_normal(3)))
        true_e = epochs_to_converge(b, 0.01, False, 5)
        obs = LossCurve(b, 1.0, true_e, 0.02, int(rng.integers(2**31))).observations(true_e)
        for f in fractions:
            fit = LossFitter().fit(obs[:max(3, int(f * true_e))])
            errors[f].append(abs(fit.total_epochs(0.01, False, 5) - true_e) / true_e)   # Optimus §3.1 metric
    mean = [np.mean(errors[f]) for f in fractions]
    assert mean == sorted(mean, reverse=True)
    assert mean[0] < 0.3 and mean[-1] < 0.05


def test_outliers_are_replaced_by_their_neighbours_mean():
    y = loss(SEQ2SEQ, np.arange(1, 20))
    spiky = y.copy()
    spiky[8] = 5.0
    assert smooth_outliers(spiky)[8] == pytest.approx(0.5 * (y[7] + y[9]))
    assert np.array_equal(smooth_outliers(y), y)


def test_remaining_epochs_aim_at_the_looser_threshold_first():
    obs = loss(SEQ2SEQ, np.arange(1, 4))
    f = LossFitter(grid=200).fit(obs)
    loose = f.total_epochs(0.03, False, 5)
    assert f.remaining_epochs(0.01, loose_threshold=0.03, patience=5) == loose - 3
    late = LossFitter(grid=200).fit(loss(SEQ2SEQ, np.arange(1, loose + 2)))
    assert late.remaining_epochs(0.01, loose_threshold=0.03, patience=5) == \
        late.total_epochs(0.01, False, 5) - (loose + 1)


def test_the_fit_needs_three_epochs_of_positive_losses():
    with pytest.raises(ValueError, match="at least 3 epochs"):
        LossFitter().fit([1.0, 0.9])
    with pytest.raises(ValueError, match="finite losses > 0"):
        LossFitter().fit([1.0, 0.9, 0.0])


def test_threshold_max_draws_each_jobs_own_threshold_which_its_owner_declares():
    table = traces.read("elasticflow", "bundled:elasticflow/ef/195job.csv")
    ranged = Assignment.from_config({"zoo": True, "convergence": {"enabled": True, "threshold": 0.01,
                                                                  "threshold_max": 0.02}})
    specs = build_jobs(table, "ef", ranged, seed=3)
    deltas = [s.curve.threshold for s in specs]
    assert all(0.01 <= d <= 0.02 for d in deltas) and len(set(deltas)) == len(specs)
    assert deltas == [s.curve.threshold for s in build_jobs(table, "ef", ranged, seed=3)]   # seeded
    for s in specs:   # each job converges at its own threshold
        assert s.curve.epochs == epochs_to_converge(s.curve.b, s.curve.threshold, False, 5)
    assert JobView(JobState(specs[0]), Clock(), oracle=False).convergence_threshold == deltas[0]
    fixed = build_jobs(table, "ef", assignment(), seed=3)
    assert {s.curve.threshold for s in fixed} == {0.01}
    with pytest.raises(ValueError, match="threshold_max"):
        build_jobs(table, "ef", Assignment.from_config({"zoo": True, "convergence": {
            "enabled": True, "threshold": 0.02, "threshold_max": 0.01}}), seed=3)
