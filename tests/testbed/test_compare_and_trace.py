"""The testbed's arithmetic and its trace, without torch."""

import pytest

from clustersim.simulator.errors import ConfigError
from clustersim.testbed import cli, compare, trace


def test_errors_are_signed_relative_to_the_real_run_hand_worked():
    # job a: simulated 12 s, real 10 s -> (12 - 10) / 10 = +20%; job b: 30 vs 40 -> -25%
    # mean JCT: simulated (12 + 30) / 2 = 21, real (10 + 40) / 2 = 25 -> (21 - 25) / 25 = -16%
    # makespan 33 vs 44 -> -25%; mean |per-job error| (20% + 25%) / 2 = 22.5%
    e = compare.errors({"a": 12.0, "b": 30.0}, {"a": 10.0, "b": 40.0}, 33.0, 44.0)
    assert e["per_job"] == pytest.approx({"a": 0.20, "b": -0.25})
    assert e["jct_mean_predicted"] == 21.0 and e["jct_mean_measured"] == 25.0
    assert e["jct_mean"] == pytest.approx(-0.16)
    assert e["makespan"] == pytest.approx(-0.25)
    assert e["job_abs_mean"] == pytest.approx(0.225)
    assert e["jobs"] == 2 and e["not_compared"] == []


def test_per_job_errors_by_kind_of_job_hand_worked():
    # data-parallel a +20%, c -10% -> (20 + 10) / 2 = 15%; PS b -25% -> 25%
    per_job = {"a": 0.20, "b": -0.25, "c": -0.10}
    out = compare.by_kind(per_job, {"a": "dataparallel", "b": "ps", "c": "dataparallel"})
    assert out == {"dataparallel": {"jobs": 2, "job_abs_mean": pytest.approx(0.15)},
                   "ps": {"jobs": 1, "job_abs_mean": pytest.approx(0.25)}}
    table = trace.make({**cli.load_config([])["trace"], "jobs": 12}, 0, 2)
    kinds = compare.kinds(table)
    assert {j for j, k in kinds.items() if k == "ps"} == {r["job_id"] for r in table.to_pylist() if len(r["roles"]) == 2}


def test_a_job_unfinished_on_one_side_is_listed_not_compared():
    e = compare.errors({"a": 12.0, "b": None}, {"a": 10.0, "b": 40.0}, 12.0, 40.0)
    assert e["jobs"] == 1 and e["not_compared"] == ["b"]
    assert e["jct_mean"] == pytest.approx(0.2)


def test_trace_is_seeded_and_within_its_parameters():
    cfg = cli.load_config(["trace.jobs=20", "trace.workers=[1,2]", "trace.work_s=[5,9]"])
    a, b = trace.make(cfg["trace"], 3, 2), trace.make(cfg["trace"], 3, 2)
    assert a.equals(b)
    assert not a.equals(trace.make(cfg["trace"], 4, 2))
    rows = a.to_pylist()
    assert rows[0]["submit_time"] == 0.0
    assert all(x["submit_time"] <= y["submit_time"] for x, y in zip(rows, rows[1:]))
    assert all(5 <= r["duration"] <= 9 and r["model"] in ("mlp", "cnn", "recommendation") for r in rows)
    ps_jobs = [r for r in rows if len(r["roles"]) == 2]
    assert 0 < len(ps_jobs) < len(rows)                 # ps_share 0.25 of 20 jobs: some of each kind
    for r in rows:
        if r in ps_jobs:        # 1 PS (a core, no "GPU" slot) + 1 worker: 2 cores, rigid
            ps, worker = r["roles"]
            assert (ps["name"], ps["count"], ps["gpu"], ps["cpu"]) == ("ps", 1, 0.0, 1.0)
            assert worker["count"] == worker["min_count"] == worker["max_count"] == 1 and worker["gpu"] == 1.0
        else:
            (role,) = r["roles"]
            assert role["count"] in (1, 2) and role["min_count"] == 1 and role["max_count"] == 2 and role["gpu"] == 1.0
    # the PS draw comes last: without PS jobs the data-parallel jobs are the same draws
    none = trace.make({**cfg["trace"], "ps_share": 0.0}, 3, 2).to_pylist()
    assert [(r["submit_time"], r["model"], r["duration"]) for r in none] == \
        [(r["submit_time"], r["model"], r["duration"]) for r in rows]


@pytest.mark.parametrize("argv, key", [(["nope=1"], "nope"), (["trace.models=[bert]"], "trace.models"),
                                       (["policies=[fifo]", "repeat=tiresias"], "repeat"),
                                       (["policies=[nope]"], "policies"), (["speed=nope"], "speed"),
                                       (["calibrate=[ps.batch=32]"], "calibrate: ps.batch")])
def test_bad_config_is_one_line_naming_the_key(argv, key):
    with pytest.raises(ConfigError) as e:
        cli.load_config(argv)
    assert key in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("over, key", [({"ps_share": 1.5}, "trace.ps_share"), ({"ps": 2}, "trace.ps")])
def test_a_ps_job_that_cannot_fit_the_host_is_one_line(over, key):
    cfg = cli.load_config([])
    with pytest.raises(ConfigError) as e:
        trace.make({**cfg["trace"], **over}, 0, 2)      # 2 cores: 2 PS leave no core for a worker
    assert key in str(e.value) and "\n" not in str(e.value)
