"""simulator/arrow.py builds the same columns as pyarrow's own conversion, without pandas."""

import math
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from clustersim.simulator import arrow

CASES = [
    (["a", None, "ünï €", "", "日本語", None], pa.string()),
    ([None, None], pa.string()),
    ([], pa.string()),
    (["x" * 1000, "y"], pa.string()),
    ([True, None, False, True, True, False, False, True, None, True], pa.bool_()),
    ([], pa.bool_()),
    ([False] * 17, pa.bool_()),
    ([1, None, -3, 2**31 - 1, -(2**31)], pa.int32()),
    ([0, 2**62, None], pa.int64()),
    ([], pa.int32()),
    ([1.5, None, -0.0, math.inf, 1e300, 3], pa.float64()),
    ([math.nan, 1.0], pa.float64()),
    ([None], pa.float64()),
    ([], pa.float64()),
    (np.array([1.0, 2.5, math.nan]), pa.float64()),
    (np.array([[1.0, 2.0], [3.0, 4.0]])[:, 1], pa.float64()),   # a strided view
    (np.array([3, 4], dtype=np.int64), pa.int32()),
    ((x for x in [1.0, None]), pa.float64()),
]


def same(a: pa.Array, b: pa.Array) -> bool:
    """Equal arrays, NaN equal to NaN (``Array.equals`` has NaN != NaN)."""
    nan = lambda v: "NaN" if isinstance(v, float) and math.isnan(v) else v  # noqa: E731
    return a.type == b.type and a.null_count == b.null_count and [nan(v) for v in a.to_pylist()] == [
        nan(v) for v in b.to_pylist()]


@pytest.mark.parametrize("values,typ", CASES)
def test_array_equals_pyarrows_conversion(values, typ):
    listed = list(values) if not isinstance(values, np.ndarray) else values
    got, want = arrow.array(listed, typ), pa.array(listed, typ)
    assert got.type == typ and got.null_count == want.null_count
    assert same(got, want), (got, want)
    got.validate(full=True)
    if not any(isinstance(v, float) and math.isnan(v) for v in want.to_pylist()):
        assert got.equals(want)
        assert pa.table({"c": got}).equals(pa.table({"c": want}))   # equal tables, too
    assert same(arrow.array(iter(list(listed)), typ), want)


def test_nan_is_null_matches_from_pandas():
    values = [1.0, math.nan, None, 2.0]
    got = arrow.array(np.array([1.0, math.nan, math.nan, 2.0]), pa.float64(), nan_is_null=True)
    assert got.equals(pa.array(values, pa.float64(), from_pandas=True))
    assert got.null_count == 2
    assert arrow.array(values, pa.float64(), nan_is_null=True).null_count == 2
    assert arrow.array(values, pa.float64()).null_count == 1   # NaN stays a value otherwise


def test_wrong_values_are_refused():
    with pytest.raises(TypeError):
        arrow.array([1, "2"], pa.string())
    with pytest.raises(TypeError):
        arrow.array(["1.5"], pa.float64())
    with pytest.raises(TypeError):
        arrow.array([1.5], pa.int32())   # pa.array refuses to truncate, so does this
    with pytest.raises(TypeError):
        arrow.array([1, 0], pa.bool_())
    with pytest.raises(OverflowError):
        arrow.array([2**31], pa.int32())
    with pytest.raises(TypeError):
        arrow.array([1], pa.date32())


@pytest.mark.parametrize("values,typ", [
    ([1.5, None, 3.0], pa.float64()), ([1, 2, 3], pa.int32()), ([1, None], pa.int32()), ([], pa.float64()),
])
def test_to_numpy_matches_pyarrows(values, typ):
    col = pa.chunked_array([pa.array(values, typ), pa.array(values[::-1], typ)], typ)
    for c in (col, col.chunk(0), col.chunk(0).slice(1), pa.chunked_array([], typ)):
        got, want = arrow.to_numpy(c), c.to_numpy(zero_copy_only=False) if len(c) or isinstance(c, pa.Array) \
            else np.empty(0, typ.to_pandas_dtype())
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_building_and_writing_columns_imports_no_pandas(tmp_path):
    code = ("import sys, pyarrow as pa, pyarrow.parquet as pq\n"
            "from clustersim.simulator import arrow\n"
            "t = pa.table({'s': arrow.array(['a', None], pa.string()), 'f': arrow.array([1.0, None], pa.float64()),"
            " 'b': arrow.array([True, None], pa.bool_()), 'i': arrow.array([1, 2], pa.int32()),"
            " 'k': arrow.decoded(__import__('numpy').array([1, 0], dtype='uint8'), ['start', 'finish'])})\n"
            f"pq.write_table(t, {str(tmp_path / 't.parquet')!r})\n"
            "arrow.to_numpy(t['f'])\n"
            "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("codes,labels", [([0, 1, 3, 2, 2, 0], ["start", "finish", "scale_out", "ünï €"]),
                                          ([], ["start"]), ([], []), ([0] * 9, [""])])
def test_decoded_equals_pyarrows_take(codes, labels):
    # the events table's kind column: each row the label its one-byte code names
    got = arrow.decoded(np.array(codes, dtype=np.uint8), labels)
    got.validate(full=True)
    assert got.equals(pa.array(labels, pa.string()).take(pa.array(codes, pa.uint8())))
    assert got.to_pylist() == [labels[c] for c in codes]


@pytest.mark.parametrize("values", [[True, None, False, True, True, False, False, True, None, True],
                                    [False] * 17, [True] * 9, []])
def test_to_bools_matches_pyarrows_with_nulls_as_false(values):
    col = pa.chunked_array([pa.array(values, pa.bool_()), pa.array(values[::-1], pa.bool_())], pa.bool_())
    for c in (col, col.chunk(0), col.chunk(0).slice(1), pa.chunked_array([], pa.bool_())):
        got = arrow.to_bools(c)
        assert got.dtype == bool and got.tolist() == [bool(v) for v in c.to_pylist()]


def test_loading_a_trace_imports_no_pandas():
    # the job table is built from buffers and validated in numpy (traces/schema.py): pyarrow's
    # conversion of Python values and its kernels given a Python scalar would import pandas
    code = ("import sys\n"
            "from clustersim.experiment import compose, load_trace\n"
            "cfg = compose(['trace=elasticflow_raw', 'trace.path=bundled:elasticflow/raw/cluster01.csv',"
            " 'trace.cache.enabled=false'])\n"
            "table, _ = load_trace(cfg.trace)\n"
            "print(table.num_rows, 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1595 False"
