"""build_jobs draws profiles for jobs a block at a time (simulator/workload.py BlockDraws): the
numbers and the stream they leave must be those of one ``rng.integers(n)`` per job."""

import numpy as np

from clustersim.simulator.workload import BlockDraws


def _single(seed: int, bounds: list[int]) -> tuple[list[int], int]:
    rng = np.random.default_rng(seed)
    out = [int(rng.integers(n)) for n in bounds]
    return out, int(rng.integers(1 << 40))   # what the stream gives next


def _blocked(seed: int, bounds: list[int]) -> tuple[list[int], int]:
    rng = np.random.default_rng(seed)
    draws = BlockDraws(rng)
    out = [draws.integers(n) for n in bounds]
    draws.settle()
    return out, int(rng.integers(1 << 40))


def test_one_bound_gives_the_single_draws_across_blocks():
    bounds = [9] * (2 * BlockDraws.BLOCK + 17)   # past two blocks
    assert _blocked(3, bounds) == _single(3, bounds)


def test_changing_bounds_put_the_stream_back():
    # two pools of different sizes (gpu 9 profiles, ps 5), alternating in runs, and a huge bound
    bounds = [9] * 10 + [5] * 3 + [9] + [5] * 7000 + [2**31 + 5] * 2 + [9] * 4
    assert _blocked(11, bounds) == _single(11, bounds)
