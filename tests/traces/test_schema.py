"""traces/schema.py builds the job table from buffers: the very table pyarrow's own conversion makes."""

import pyarrow as pa
import pytest

from clustersim.traces.schema import JOB_TABLE, Role, TraceError, build_table


def _by_pyarrow(columns: dict) -> pa.Table:
    """The job table as ``pa.array`` converts the same Python columns."""
    roles = columns["roles"]
    data = {}
    for f in JOB_TABLE:
        if f.name == "roles":
            data[f.name] = pa.array([[r.as_row() for r in rs] for rs in roles], f.type)
        elif f.name == "num_gpus":
            data[f.name] = pa.array([sum(r.count * r.gpu for r in rs) for rs in roles], f.type)
        elif f.name == "status" and "status" not in columns:
            data[f.name] = pa.array(["unknown"] * len(roles), f.type)
        elif f.name in columns:
            data[f.name] = pa.array(columns[f.name], f.type)
        else:
            data[f.name] = pa.nulls(len(roles), f.type)
    return pa.Table.from_pydict(data, schema=JOB_TABLE)


def test_build_table_equals_pyarrows_conversion():
    shared = Role("worker", 2, 1.0, 4.0, 8.0)
    columns = {
        "job_id": ["a", "b", "c"],
        "submit_time": [0.0, 5, 7.5],                # an int among floats
        "duration": [10.0, None, 3.0],
        "roles": [[shared], [Role("ps", 1, 0.0, 2.0, 4.0, 1, 2), Role("worker", 3, 0.5, 1.0, 2.0)], [shared]],
        "tenant": ["t0", None, "t1"],
        "priority": [1, None, 3.0],                  # an integral float in an integer column
        "attempts": [None, [{"start": 0.0, "end": 1.0}], None],
        "start_time": [None, None, None],
    }
    got = build_table(columns)
    assert got.equals(_by_pyarrow(columns))
    assert got["priority"].to_pylist() == [1, None, 3]
    assert got["roles"].to_pylist()[1][0] == {"name": "ps", "count": 1, "gpu": 0.0, "cpu": 2.0, "mem": 4.0,
                                              "min_count": 1, "max_count": 2}
    nulls = dict(columns, attempts=[None, None, None])   # a column of nulls alone
    assert build_table(nulls).equals(_by_pyarrow(nulls))


def test_a_table_that_failed_fails_again_and_one_that_passed_is_the_same_table():
    from clustersim.traces.schema import validate

    good = build_table({"job_id": ["a"], "submit_time": [0.0], "duration": [5.0], "roles": [[Role("worker", 1, 1.0)]]})
    assert validate(good, "t") is good and validate(good, "t") is good
    bad = build_table({"job_id": ["a", "a"], "submit_time": [0.0, 1.0], "duration": [5.0, 5.0],
                       "roles": [[Role("worker", 1, 1.0)]] * 2})
    for _ in range(2):
        with pytest.raises(TraceError, match="duplicate job_id 'a'"):
            validate(bad, "t")


def test_build_table_takes_an_arrow_column_of_its_type_only():
    cols = {"job_id": ["a", "b"], "submit_time": [0.0, 1.0], "roles": [[Role("worker", 1, 1.0)]] * 2}
    t = build_table({**cols, "tenant": pa.array(["x", "y"])})
    assert t["tenant"].to_pylist() == ["x", "y"] and t["num_gpus"].to_pylist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="expected a string column"):
        build_table({**cols, "tenant": pa.array([1, 2])})
