"""simulator/progress.py on one JobState: rates, phases, refunds and samples, worked by hand."""

import numpy as np
import pytest

from clustersim.simulator.job import JobState
from clustersim.simulator.overhead import FREE, Transition
from clustersim.simulator.progress import Next, Progress
from tests.factories import gpu_job

ALLOC = {"worker": {0: 2}}


def state(work: float = 100.0) -> JobState:
    st = JobState(gpu_job("a", 0.0, 2, work))
    st.allocation = ALLOC
    return st


def test_a_free_change_with_nothing_ahead_runs_at_once_and_loses_nothing():
    st, p = state(), Progress()
    lost, nxt = p.change(st, 2.0, FREE, 0.0, gpus=2.0)
    # 100 iterations at 2 it/s: done at 50 s; no phase
    assert (lost, nxt) == (0.0, Next(None, 50.0))
    assert (st.rate, st.steady_rate, st.phases, st.busy_until, st.gpus) == (2.0, 2.0, None, 0.0, 2.0)
    assert st.samples == [[0.0, None, 2.0, ALLOC]]   # no noise: the true rate


def test_phases_charge_what_they_lose_against_the_new_rate_and_run_in_order():
    st, p = state(), Progress()
    p.change(st, 1.0, FREE, 0.0, gpus=2.0)            # steady at 1 it/s
    lost, nxt = p.change(st, 2.0, Transition(prepare_s=10.0, pause_s=5.0), 0.0, gpus=4.0)
    # prepare 10 s at min(1, 2) = 1 it/s: 10 x (1 - 1/2) = 5 s lost; pause 5 s at 0: 5 s lost
    assert lost == 10.0
    assert (st.overhead_s, st.overhead_gpu_s) == (10.0, 40.0)   # 10 s x the 4 GPUs held from now
    assert st.phases == [(15.0, 0.0), (10.0, 1.0)] and st.busy_until == 15.0
    # in the prepare phase at 1 it/s the job would finish at 100 s, after the phase ends: no completion
    assert nxt == Next(10.0, None) and st.rate == 1.0
    st.advance(10.0)                                   # 10 iterations done
    assert p.end_phase(st, 10.0) == Next(15.0, None) and st.rate == 0.0
    st.advance(15.0)                                   # paused: still 10
    # steady at 2 it/s from 15 s: 90 iterations left, done at 15 + 45 = 60 s
    assert p.end_phase(st, 15.0) == Next(None, 60.0) and st.rate == 2.0 and st.phases is None


def test_a_change_inside_phases_refunds_them_and_charges_them_again_against_the_new_rate():
    st, p = state(), Progress()
    p.change(st, 1.0, FREE, 0.0, gpus=2.0)
    p.change(st, 2.0, Transition(prepare_s=10.0, pause_s=5.0), 0.0, gpus=4.0)   # 10 s charged, as above
    st.advance(5.0)                                    # 5 iterations at 1 it/s
    lost, nxt = p.change(st, 4.0, Transition(pause_s=3.0), 5.0, gpus=8.0)
    # refund of what is ahead at 5 s, against the old steady 2 it/s: prepare 5 s x (1 - 1/2) = 2.5,
    # pause 5 s x 1 = 5: 7.5 s (x 4 GPUs = 30 GPU-s); left charged: 2.5 s and 10 GPU-s.
    # charged again against 4 it/s: 5 x (1 - 1/4) = 3.75, 5 x 1 = 5, the new pause 3 x 1 = 3: 11.75 s
    assert lost == 11.75
    assert st.overhead_s == pytest.approx(2.5 + 11.75)
    assert st.overhead_gpu_s == pytest.approx(10.0 + 11.75 * 8)
    # the old phases keep their place (to 10 s and 15 s), the new pause follows (to 18 s)
    assert st.phases == [(18.0, 0.0), (15.0, 0.0), (10.0, 1.0)] and st.busy_until == 18.0
    assert nxt == Next(10.0, None) and st.rate == 1.0


def test_a_stop_refunds_the_phases_it_will_not_go_through():
    st, p = state(), Progress()
    p.change(st, 1.0, FREE, 0.0, gpus=2.0)
    p.change(st, 2.0, Transition(prepare_s=10.0, pause_s=5.0), 0.0, gpus=4.0)
    st.advance(10.0)
    p.end_phase(st, 10.0)
    st.advance(12.0)
    p.stop(st, 12.0)
    # 3 s of the pause were ahead (12 -> 15): refunded 3 s; kept 5 s (prepare) + 2 s of pause served
    assert st.overhead_s == 7.0 and st.overhead_gpu_s == 28.0
    assert (st.rate, st.steady_rate, st.phases, st.busy_until) == (0.0, 0.0, None, 12.0)
    assert st.progress == 10.0


def test_a_completion_inside_a_phase_comes_before_its_end():
    st, p = state(work=12.0), Progress()
    p.change(st, 1.0, FREE, 0.0, gpus=2.0)
    st.advance(4.0)                                    # 4 of 12 iterations
    _, nxt = p.change(st, 2.0, Transition(prepare_s=20.0), 4.0, gpus=4.0)
    # prepare at 1 it/s: 8 left, done at 12 s, before the phase's end at 24 s
    assert nxt == Next(24.0, 12.0)


def test_rescale_scales_every_rate_ahead():
    st, p = state(), Progress()
    p.change(st, 1.0, FREE, 0.0, gpus=2.0)
    p.change(st, 2.0, Transition(prepare_s=10.0), 0.0, gpus=4.0)   # phases [(10, 1.0)], steady 2
    st.advance(4.0)                                    # 4 iterations
    nxt = p.rescale(st, 0.5, 4.0)
    assert st.phases == [(10.0, 0.5)] and st.steady_rate == 1.0 and st.rate == 0.5
    # 96 left at 0.5 it/s: 196 s, after the phase's end
    assert nxt == Next(10.0, None)


def test_samples_close_at_each_change_and_carry_the_noise_drawn_in_blocks():
    rng_draws = np.random.default_rng(7).standard_normal(1024)
    st, p = state(), Progress(noise=0.1, kept=2, rng=np.random.default_rng(7))
    p.change(st, 2.0, FREE, 0.0, gpus=2.0)
    p.change(st, 4.0, FREE, 10.0, gpus=4.0)
    p.change(st, 8.0, FREE, 20.0, gpus=8.0)
    # measured = rate x (1 + 0.1 z), z the block's draws in order; only the last 2 intervals kept
    assert [s[:2] for s in st.samples] == [[10.0, 20.0], [20.0, None]]
    assert st.samples[0][2] == pytest.approx(4.0 * (1 + 0.1 * rng_draws[1]))
    assert st.samples[1][2] == pytest.approx(8.0 * (1 + 0.1 * rng_draws[2]))
    p.stop(st, 25.0)
    assert st.samples[-1][:2] == [20.0, 25.0]


def test_a_phase_end_with_the_work_done_ends_the_job():
    st, p = state(work=10.0), Progress()
    p.change(st, 1.0, FREE, 0.0, gpus=2.0)
    p.change(st, 1.0, Transition(prepare_s=10.0), 0.0, gpus=2.0)   # completion at 10 = the phase end
    st.advance(10.0)
    assert p.end_phase(st, 10.0) is None
    p.finish(st, 10.0)
    assert (st.progress, st.rate, st.phases) == (10.0, 0.0, None)
