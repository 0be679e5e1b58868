"""``align`` and ``first_fit`` placement against the whole-matrix arithmetic (each counts and
deducts in its own plain-Python loop), bit for bit: the same allocations and the same free matrix afterwards, on random matrices built to meet its edge cases
(tied scores, a resource other than the first binding, free values just under a task's demand or a
rounding residue below zero, fractional demands, roles needing no GPU, multi-role jobs that do not
fit)."""

import numpy as np
import pytest

from clustersim.policies.placement import align, first_fit
from clustersim.simulator.cluster import tasks_per_node
from clustersim.simulator.job import RoleSpec


def whole_matrix_align(free, roles, counts, by_score=True):
    """The strategy as it was: tasks counted on every node, every node sorted by score (or, with
    ``by_score`` False, first fit's index order), the nodes that take a task filled in that order
    by cumulative sums, deducted row by row with numpy."""
    backup = free.copy()
    alloc = {}
    for role in roles:
        n = counts.get(role.name, 0)
        if n == 0:
            continue
        demand = np.asarray(role.demand)
        fit = tasks_per_node(free, demand)
        scale = free.max(axis=0)
        score = free @ (demand / np.where(scale > 0, scale, 1.0))
        order = np.argsort(-score, kind="stable") if by_score else np.arange(len(free))
        order = order[fit[order] > 0]
        f = fit[order]
        cum = np.cumsum(f)
        if len(cum) == 0 or cum[-1] < n:
            free[:] = backup
            return None
        last = int(np.searchsorted(cum, n))
        take = f[: last + 1].copy()
        take[last] -= cum[last] - n
        placed = {int(order[i]): int(t) for i, t in enumerate(take) if t > 0}
        for node, t in placed.items():
            free[node] -= t * demand
        alloc[role.name] = placed
    return alloc


def random_free(rng, nodes):
    """Nodes of 8 GPUs, 64 cores, 512 GB partly taken; some rows repeated (tied scores), some
    values set just below a multiple of a demand or to a residue just under zero."""
    cap = np.array([8.0, 64.0, 512.0])
    used = rng.integers(0, 9, size=(nodes, 1)) / 8.0
    free = cap * (1.0 - used) - rng.choice([0.0, 0.0, 1.5, 3.0, 7.7], size=(nodes, 3))
    free = np.maximum(free, 0.0)
    dup = rng.random(nodes) < 0.3
    free[dup] = free[rng.integers(0, nodes)]
    edge = rng.random((nodes, 3)) < 0.1
    free[edge] = rng.choice([1.0 - 1e-9, 2.0 - 2e-9, 0.7 * 3 - 1e-10, -1e-12, 1e-9], size=edge.sum())
    if rng.random() < 0.5:   # values that are not round, and pairs one ulp apart, whose scores (a value
        # times a weight, rounded) may tie although the values do not: the tie goes to the lower index
        free = np.round(free * rng.uniform(0.3, 1.0, size=(nodes, 3)), int(rng.integers(0, 4)))
        near = rng.random(nodes) < 0.3
        free[near] = np.nextafter(free[rng.integers(0, nodes)], rng.choice([-np.inf, np.inf]))
    return free


def random_roles(rng):
    gpu = float(rng.choice([0.0, 0.3, 0.5, 1.0, 1.0, 2.0, 3.0, 8.0]))
    worker = RoleSpec("worker", 1, gpu, float(rng.choice([0.0, 0.7, 2.0, 16.0])),
                      float(rng.choice([0.0, 8.0, 100.0])), 1, 1)
    if rng.random() < 0.7:
        return (worker,), {"worker": int(rng.integers(1, 40))}
    ps = RoleSpec("ps", 1, 0.0, float(rng.choice([0.0, 4.0, 30.0])), float(rng.choice([0.0, 10.0, 300.0])), 1, 1)
    return (worker, ps), {"worker": int(rng.integers(0, 30)), "ps": int(rng.integers(0, 6))}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("strategy, by_score", [(align, True), (first_fit, False)])
def test_placement_matches_the_whole_matrix_arithmetic_bit_for_bit(seed, strategy, by_score):
    rng = np.random.default_rng(seed)
    placed = failed = 0
    for _ in range(400):
        free = random_free(rng, int(rng.integers(1, 120)))
        mine, theirs = free.copy(), free.copy()
        for _ in range(int(rng.integers(1, 8))):   # several jobs in a row, each on what the last left
            roles, counts = random_roles(rng)
            got = strategy(mine, roles, counts)
            assert got == whole_matrix_align(theirs, roles, counts, by_score)
            assert mine.tobytes() == theirs.tobytes()
            placed += got is not None and any(got.values())
            failed += got is None
    assert placed > 300 and failed > 100   # both outcomes met many times


def test_align_ties_go_to_the_lower_index_and_a_short_resource_skips_the_best_scored_node():
    # a task needs 1 GPU, 2 cores, 8 GB. Scale (max free): 8 GPUs, 32 cores, 256 GB; weights
    # 1/8, 2/32, 8/256. Node 0: 4 GPUs, 32 cores, 256 GB: 0.5 + 2 + 8 = 10.5; node 1 the same row
    # (10.5, a tie: node 0 first); node 2: 8 GPUs but 1 core: 1 + 0.0625 + 8 = 9.0625, best after
    # the tie yet no task fits (floor(1 / 2) = 0); node 3: 2 GPUs, 8 cores, 256 GB:
    # 0.25 + 0.5 + 8 = 8.75, room for 2. Six tasks: 4 on node 0, 2 on node 1; nine: 4 + 4 + 1 on
    # node 3; then two more find only node 3's last GPU: no fit, nothing taken
    rows = [[4, 32, 256], [4, 32, 256], [8, 1, 256], [2, 8, 256]]
    worker = RoleSpec("worker", 1, 1.0, 2.0, 8.0, 1, 1)
    assert align(np.array(rows, dtype=float), (worker,), {"worker": 6}) == {"worker": {0: 4, 1: 2}}
    f = np.array(rows, dtype=float)
    assert align(f, (worker,), {"worker": 9}) == {"worker": {0: 4, 1: 4, 3: 1}}
    assert f.tolist() == [[0, 24, 224], [0, 24, 224], [8, 1, 256], [1, 6, 248]]
    assert align(f, (worker,), {"worker": 2}) is None and f.tolist()[3] == [1, 6, 248]
