"""Reading a plain CSV a block of lines at a time (csvrows.plain_blocks, numbers; the ElasticFlow
reader's column path) gives what the row-by-row reader gives, and leaves every other file to it."""

import csv

import numpy as np
import pytest

from clustersim import traces
from clustersim.traces import csvrows, elasticflow
from clustersim.traces.collect import BadRows
from clustersim.traces.csvrows import NotPlain, numbers, plain_blocks
from clustersim.traces.schema import TraceError

ITP = traces.DATA / "elasticflow/raw/cluster01.csv"
HEADER = "job_id,submission_time,duration,num_gpu\n"


def blocks(path):
    """All of plain_blocks' columns, the blocks joined."""
    out = {}
    for cols in plain_blocks(path):
        for k, v in cols.items():
            out.setdefault(k, []).extend(v)
    return out


def by_csv(path):
    with open(path, newline="", encoding="utf-8-sig") as f:
        header, *rows = list(csv.reader(f))
    return {h.strip(): [r[i] for r in rows] for i, h in enumerate(header)}   # names stripped, as rows() does


def by_rows(monkeypatch, path, **options):
    """The reader's table with the column path switched off (every row through Jobs.add)."""
    with monkeypatch.context() as m:
        m.setattr(elasticflow, "_at_once", lambda *a: None)
        return elasticflow.read(path, bad=BadRows(), **options)


@pytest.mark.parametrize("chunk", [7, 64, 1 << 16])
def test_blocks_are_the_fields_csv_reads_at_any_chunk_size(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(csvrows, "PLAIN_CHUNK", chunk)
    p = tmp_path / "t.csv"   # a BOM, CRLF line ends, spaces kept inside fields, no final line break
    p.write_bytes(b"\xef\xbb\xbf" + b"job_id , a,b\r\nx1, 2 ,3\r\nx2,1_0,4e1\r\nx3,5,6")
    assert blocks(p) == by_csv(p) == {"job_id": ["x1", "x2", "x3"], "a": [" 2 ", "1_0", "5"], "b": ["3", "4e1", "6"]}
    assert blocks(ITP) == by_csv(ITP)


@pytest.mark.parametrize("body", [
    'a,"b,c"\n',           # a quoted field: csv.reader's to split
    "a,b\n\na,b\n",        # a blank line: csv.reader skips it
    "a,b\nc\n",            # a short row: the row reader rejects it, naming its line
    "a,b\rc,d\n",          # a lone carriage return ends a line for csv.reader
    "a,\x00\n",            # a NUL
    "",                    # a header only
])
def test_a_line_that_is_not_plain_leaves_the_file_to_the_row_reader(tmp_path, body):
    p = tmp_path / "t.csv"
    p.write_text("x,y\n" + body)
    with pytest.raises(NotPlain):
        blocks(p)


def test_an_unreadable_or_duplicated_header_is_not_plain(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("x,x\n1,2\n")
    with pytest.raises(NotPlain):
        blocks(p)
    with pytest.raises(NotPlain):
        blocks(tmp_path)   # a folder: open_text's error, which the row reader raises itself


def test_numbers_take_what_number_takes_and_give_up_where_it_raises():
    assert numbers([" 5 ", "1_000", "2.5e1"], minimum=0).tolist() == [5.0, 1000.0, 25.0]   # float()'s syntax
    for values, checks in [(["1", "x"], {}), (["nan"], {}), (["inf"], {}), (["0"], {"positive": True}),
                           (["-1"], {"minimum": 0}), (["1.5"], {"integer": True}), (["3"], {"maximum": 2})]:
        with pytest.raises(NotPlain):
            numbers(values, **checks)
        with pytest.raises(TraceError):   # ... where the row reader's number() names the field
            csvrows.number(ITP, 2, "f", values[-1], **checks)


@pytest.mark.parametrize("path, options", [
    (ITP, {}),
    (traces.DATA / "elasticflow/ef/195job.csv", {"cpu_per_gpu": 4.0, "mem_per_gpu": 16.0}),
    (traces.DATA / "elasticflow_peer/elasticVpollux_e.csv", {"elastic": True}),   # the simulator's header
])
def test_the_column_path_gives_the_row_readers_table(monkeypatch, path, options):
    tables = elasticflow._tables(path, "bundled:elasticflow_peer/throughputs_T4") if options.get("elastic") else None
    fast = elasticflow._at_once(path, options.get("cpu_per_gpu", 0.0), options.get("mem_per_gpu", 0.0), tables)
    assert fast is not None   # these files are plain: the column path read them
    slow = by_rows(monkeypatch, path, **options)
    assert fast.schema.equals(slow.schema) and fast.to_pylist() == slow.to_pylist()


def edit(line: int, field: int, value: str):
    """The ITP file with field ``field`` of line ``line`` (1: the header) set to ``value``."""
    def change(text):
        lines = text.splitlines()
        cells = lines[line - 1].split(",")
        cells[field] = value
        lines[line - 1] = ",".join(cells)
        return "\n".join(lines) + "\n"
    return change


FIRST_ID = ITP.read_text().splitlines()[1].split(",")[0]


@pytest.mark.parametrize("change, message", [
    (edit(3, 3, "x"), "line 3: field 'num_gpu': 'x' is not a number"),
    (edit(3, 3, "0.5"), None),                              # half a GPU: one shared-GPU task
    (edit(3, 3, "1.5"), None),                              # not whole: one task of 1.5 GPUs
    (edit(4, 0, FIRST_ID), "line 4 .*duplicate job_id"),
    (edit(4, 1, "1"), "line 4: field 'submission_time': times not sorted"),
    (edit(3, 3, "2000000"), "line 3 .*tasks, more than the limit"),
    (edit(3, 2, "1e300"), "line 3 .*duration"),            # beyond 2^42 s
])
def test_a_bad_row_gets_the_row_readers_error_or_table(tmp_path, monkeypatch, change, message):
    p = tmp_path / "c.csv"
    p.write_text(change(ITP.read_text()))
    if message is None:
        t = elasticflow.read(p, bad=BadRows())
        assert t.to_pylist() == by_rows(monkeypatch, p).to_pylist()
        return
    with pytest.raises(TraceError, match=message) as fast:
        elasticflow.read(p, bad=BadRows())
    with pytest.raises(TraceError) as slow:
        by_rows(monkeypatch, p)
    assert str(fast.value) == str(slow.value) and ": line " in str(fast.value)


def test_skip_rejects_the_bad_row_and_keeps_the_others(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text(HEADER + "a,0,10,1\nb,5,x,1\nc,6,10,2\n")
    bad = BadRows("skip")
    t = elasticflow.read(p, bad=bad)
    assert t["job_id"].to_pylist() == ["a", "c"] and bad.rejected == 1 and bad.rejects[0].line == 3
    assert np.allclose(t["num_gpus"].to_pylist(), [1.0, 2.0])
