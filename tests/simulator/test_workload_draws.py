"""build_jobs draws profiles for jobs a block at a time (simulator/workload.py BlockDraws): the
numbers and the stream they leave must be those of one ``rng.integers(n)`` per job."""

import numpy as np
import pyarrow as pa

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


def test_many_draws_are_the_single_draws_one_after_another():
    """``many(n, k)`` (build_jobs' column path) gives k single draws, across blocks and bounds."""
    runs = [(9, 3), (4, 2), (9, BlockDraws.BLOCK + 5), (9, 1), (4, 1), (9, 0), (7, 2 * BlockDraws.BLOCK)]
    rng = np.random.default_rng(5)
    draws = BlockDraws(rng)
    out = []
    for i, (n, k) in enumerate(runs):
        out += draws.many(n, k) if i % 2 == 0 else [draws.integers(n) for _ in range(k)]   # mixed, as slices mix
    draws.settle()
    assert (out, int(rng.integers(1 << 40))) == _single(5, [n for n, k in runs for _ in range(k)])


def test_the_column_path_makes_the_row_loops_jobs(monkeypatch, caplog):
    """A slice made column by column (workload._at_once) gives the specs, draws and warning of the
    row loop: named, unknown (drawn, warned) and unnamed models, several slices."""
    from clustersim import traces
    from clustersim.simulator import workload
    from clustersim.simulator.cluster import Cluster, NodeGroup

    table = traces.read("elasticflow", "bundled:elasticflow/ef/195job.csv")
    models = table["model"].to_pylist()
    models[3], models[7], models[9] = None, "no-such-model", "no-such-model"
    table = table.set_column(table.schema.get_field_index("model"), "model", pa.array(models, pa.string()))
    assignment = workload.Assignment.from_config({"zoo": True})
    cluster = Cluster([NodeGroup(16, 8, 64, 512)])
    monkeypatch.setattr(workload, "ROWS_AT_ONCE", 50)   # four slices
    made, at_once = [], workload._at_once
    monkeypatch.setattr(workload, "_at_once", lambda *a: made.append(at_once(*a)) or made[-1])
    with caplog.at_level("WARNING", logger="clustersim"):
        fast = workload.build_jobs(table, "t", assignment, cluster, seed=2)
    assert len(made) == 4 and all(m is not None for m in made)   # every slice by columns
    monkeypatch.setattr(workload, "_at_once", lambda *a: None)
    slow_log = len(caplog.records)
    with caplog.at_level("WARNING", logger="clustersim"):
        slow = workload.build_jobs(table, "t", assignment, cluster, seed=2)
    assert fast == slow and fast[9].profile != "no-such-model" and fast[9].model == "no-such-model"
    assert [r.getMessage() for r in caplog.records[:slow_log]] == [r.getMessage() for r in caplog.records[slow_log:]]
    assert "'no-such-model' x2" in caplog.records[0].getMessage()
