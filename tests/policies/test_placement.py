"""Placement strategies: where each puts a job's tasks, and that a failure changes nothing; admission by totals."""

import numpy as np
import pytest

from clustersim.policies.placement import STRATEGIES, keep_in_place, merge, min_nodes, release, shrink, strategy
from clustersim.simulator.job import RoleSpec

WORKER = RoleSpec("worker", 1, 1.0, 2.0, 8.0, 1, 1)
PS = RoleSpec("ps", 1, 0.0, 4.0, 10.0, 1, 1)


def free(*gpus, cpu=32.0, mem=256.0):
    return np.array([[g, cpu, mem] for g in gpus], dtype=float)


def place(name, f, n, roles=(WORKER,), **counts):
    return strategy(name, f.copy())(f, roles, counts or {"worker": n})


def test_first_fit_fills_nodes_in_index_order():
    assert place("first_fit", free(2, 4, 4), 5) == {"worker": {0: 2, 1: 3}}


def test_first_fit_skips_nodes_short_of_any_resource_and_deducts_what_it_places():
    # a worker task needs 1 GPU, 2 cores, 8 GB. Node 0: no GPU; node 1: 3 GPUs but 3 cores, room for
    # floor(3 / 2) = 1; node 2: 4 GPUs but 16 GB, room for floor(16 / 8) = 2; node 3: room for 8.
    # Four tasks: 1 on node 1, 2 on node 2, the last on node 3
    f = np.array([[0, 32, 256], [3, 3, 256], [4, 32, 16], [8, 32, 256]], dtype=float)
    assert place("first_fit", f, 4) == {"worker": {1: 1, 2: 2, 3: 1}}
    # node 1: 3 - 1, 3 - 2, 256 - 8; node 2: 4 - 2, 32 - 4, 16 - 16; node 3: 8 - 1, 32 - 2, 256 - 8
    assert f.tolist() == [[0, 32, 256], [2, 1, 248], [2, 28, 0], [7, 30, 248]]


def test_first_fit_finds_the_nodes_of_a_role_without_gpus_by_its_first_need():
    # a PS task needs no GPU, 4 cores and 10 GB: node 0 has 3 cores (none fits), node 1 8 cores
    # (floor(8 / 4) = 2, floor(256 / 10) = 25: 2 fit), node 2 32 cores; three tasks: 2 + 1
    f = np.array([[0, 3, 256], [0, 8, 256], [0, 32, 256]], dtype=float)
    assert place("first_fit", f, 0, roles=(PS,), ps=3) == {"ps": {1: 2, 2: 1}}
    assert f.tolist() == [[0, 3, 256], [0, 0, 236], [0, 28, 246]]
    assert place("first_fit", f, 0, roles=(PS,), ps=8) is None   # 0 + 7 tasks fit: nothing placed
    assert f.tolist() == [[0, 3, 256], [0, 0, 236], [0, 28, 246]]


def test_consolidate_takes_the_tightest_node_that_holds_the_whole_role():
    assert place("consolidate", free(2, 4, 3), 3) == {"worker": {2: 3}}


def test_consolidate_uses_the_fewest_nodes_when_none_holds_it_all():
    assert place("consolidate", free(2, 3, 1, 3), 6) == {"worker": {1: 3, 3: 3}}


def test_spread_balances_tasks_over_the_roomiest_nodes():
    assert place("spread", free(4, 4, 4), 5) == {"worker": {0: 2, 1: 2, 2: 1}}
    assert place("spread", free(1, 4, 3), 3) == {"worker": {1: 2, 2: 1}}


def test_best_fit_fills_the_tightest_nodes_first():
    assert place("best_fit", free(4, 1, 2), 3) == {"worker": {1: 1, 2: 2}}


def test_align_prefers_nodes_with_more_of_what_the_task_needs():
    f = np.array([[4.0, 2.0, 16.0], [4.0, 32.0, 256.0]])
    assert place("align", f, 1) == {"worker": {1: 1}}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_deducts_what_it_places(name):
    f = free(4, 4, 4)
    alloc = place(name, f, 5)
    assert sum(alloc["worker"].values()) == 5
    assert f[:, 0].sum() == 12 - 5 and f[:, 1].sum() == 96 - 10


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_job_that_does_not_fit_leaves_free_untouched(name):
    f = free(4, 4, cpu=8.0)  # 3 PSs and 3 workers need 18 CPUs of 16
    before = f.copy()
    assert place(name, f, 0, roles=(PS, WORKER), ps=3, worker=3) is None
    assert (f == before).all()


def test_min_nodes_and_release_keep_shrink_merge():
    cap = free(4, 4, 4)
    assert min_nodes(cap, (WORKER,), {"worker": 6}) == 2

    class Held:
        roles = (WORKER,)
        allocation = {"worker": {0: 2, 1: 1}}
    f = free(2, 3, 4)
    release(f, Held)
    assert f[:, 0].tolist() == [4, 4, 4]
    assert keep_in_place(f, Held) and f[:, 0].tolist() == [2, 3, 4]
    f[0, 0] = 1
    assert not keep_in_place(f, Held)
    assert shrink({"worker": {0: 2, 1: 1, 2: 3}}, {"worker": 4}) == {"worker": {0: 1, 2: 3}}
    assert merge({"worker": {0: 1}}, {"worker": {0: 1, 2: 2}}) == {"worker": {0: 2, 2: 2}}
    placed = {"worker": {3: 1}, "ps": {}}
    union = merge({}, placed)   # from nothing: a copy, not the placement itself
    assert union == placed and union["worker"] is not placed["worker"]


def test_release_returns_what_the_job_held_and_keep_in_place_takes_exactly_that_back():
    ps = RoleSpec("ps", 1, 0.0, 4.0, 10.0, 1, 1)

    class Held:
        roles = (ps, WORKER)
        allocation = {"ps": {1: 1}, "worker": {0: 2, 1: 1}}
    f = free(0.5, 0.25, cpu=0.1, mem=0.3)
    before = f.copy()
    held = release(f, Held)
    # node 0: 2 workers (2 GPUs, 4 cores, 16 GB); node 1: the PS (0, 4, 10) then one worker (1, 2, 8)
    assert held == {0: [2.0, 4.0, 16.0], 1: [1.0, 6.0, 18.0]}
    # the same float additions free[node] += row makes: 0.1 + 4.0, 0.3 + 16.0, ...
    assert f.tolist() == [[0.5 + 2.0, 0.1 + 4.0, 0.3 + 16.0], [0.25 + 1.0, 0.1 + 6.0, 0.3 + 18.0]]
    assert keep_in_place(f, Held, held)
    assert f.tolist() == [[(0.5 + 2.0) - 2.0, (0.1 + 4.0) - 4.0, (0.3 + 16.0) - 16.0],
                          [(0.25 + 1.0) - 1.0, (0.1 + 6.0) - 6.0, (0.3 + 18.0) - 18.0]]
    assert np.allclose(f, before, atol=1e-12)
    # a node short of what the job held keeps everything as it was
    f = before.copy()
    release(f, Held)
    f[1, 1] = 5.0            # node 1 needs 6 cores back
    after = f.copy()
    assert not keep_in_place(f, Held, held) and (f == after).all()


def test_admission_takes_a_job_only_if_all_three_resources_fit_and_counts_sizes():
    from clustersim.policies.admission import GpuSizes, admit, budget
    from tests.factories import cluster

    cl = cluster(nodes=2, gpus=4, cpus=32, mem=256)
    cl.set_up(1, False)                                  # only the node that is up counts
    left = budget(cl)
    assert left == pytest.approx([4, 32, 256])
    assert not admit(left, (1.0, 40.0, 8.0))           # too many cores: nothing taken
    assert left == pytest.approx([4, 32, 256])
    assert admit(left, (4.0, 8.0, 8.0)) and left == pytest.approx([0, 24, 248], abs=1e-6)
    sizes = GpuSizes()
    for g in (4.0, 2.0, 2.0):
        sizes.add(g)
    sizes.remove(2.0)
    assert sizes.smallest() == 2.0                     # one 2-GPU job is still active
    sizes.remove(2.0)
    assert sizes.smallest() == 4.0
    sizes.remove(4.0)
    assert sizes.smallest() == 0.0


def test_gpu_sizes_smallest_follows_adds_and_removes():
    """The admission scans stop once fewer GPUs are left than the smallest request: the count must
    give the true smallest after any mix of arrivals and completions (its cached minimum included)."""
    from clustersim.policies.admission import GpuSizes

    sizes = GpuSizes()
    assert sizes.smallest() == 0.0                  # no jobs: nothing to stop on
    for g in (4.0, 8.0, 4.0, 2.0):
        sizes.add(g)
    assert sizes.smallest() == 2.0
    sizes.remove(2.0)
    assert sizes.smallest() == 4.0                  # the only 2-GPU job left
    sizes.remove(4.0)
    assert sizes.smallest() == 4.0                  # one 4-GPU job is still there
    sizes.remove(4.0)
    assert sizes.smallest() == 8.0
    sizes.add(1.0)
    assert sizes.smallest() == 1.0
    sizes.remove(1.0)
    sizes.remove(8.0)
    assert sizes.smallest() == 0.0
    sizes.add(16.0)                                 # the first job after the count went empty
    assert sizes.smallest() == 16.0
