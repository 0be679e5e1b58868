"""The reproductions of issue 10 (loader hardening), each from a bundled sample."""

import json
import random
import shutil
import time
import tracemalloc

import numpy as np
import pytest

from clustersim import traces
from clustersim.simulator.cluster import MAX_NODES, Cluster, NodeGroup, from_config, tasks_per_node
from clustersim.traces import DATA
from clustersim.traces.collect import KEPT, SPOOLED, BadRows
from clustersim.traces.load import REJECTS_FILE, load
from clustersim.traces.schema import TraceError
from clustersim.traces.transform import oversize

S = DATA / "samples"
G19 = S / "google2019"


def google2019(events, instances=G19 / "instance_events.json"):
    return traces.read("google2019", events, instance_events=instances)


def test_google2019_is_independent_of_event_order(tmp_path):
    ref = google2019(G19 / "collection_events.csv")
    job = next(r for r in ref.to_pylist() if r["job_id"] == "375000000001")
    assert (job["status"], job["duration"]) == ("completed", 1800.0)
    head, *body = (G19 / "collection_events.csv").read_text().splitlines(keepends=True)
    instances = (G19 / "instance_events.json").read_text().splitlines(keepends=True)
    (tmp_path / "rev.csv").write_text(head + "".join(reversed(body)))
    assert google2019(tmp_path / "rev.csv").equals(ref)  # reversed, a job used to be lost
    for seed in range(20):
        rng = random.Random(seed)
        (tmp_path / "s.csv").write_text(head + "".join(rng.sample(body, len(body))))
        (tmp_path / "i.json").write_text("".join(rng.sample(instances, len(instances))))
        assert google2019(tmp_path / "s.csv", tmp_path / "i.json").equals(ref), seed


def test_events_at_one_instant_fold_submit_schedule_end(tmp_path):
    head, *body = (G19 / "collection_events.csv").read_text().splitlines(keepends=True)
    # job 1 scheduled and finished at the same microsecond as its submission, the finish listed first
    one = [line for line in body if ",375000000001," in line]
    at = [line.replace(line.split(",", 1)[0], "610000000", 1) for line in one]
    (tmp_path / "e.csv").write_text(head + "".join(reversed(at)) + "".join(b for b in body if b not in one))
    t = traces.read("google2019", tmp_path / "e.csv", instance_events=G19 / "instance_events.json",
                    never_ran="keep")
    job = next(r for r in t.to_pylist() if r["job_id"] == "375000000001")
    assert (job["status"], job["attempts"], job["duration"]) == ("completed", [{"start": 10.0, "end": 10.0}], None)


def test_a_role_asking_nothing_does_not_overflow_the_cluster_count():
    n32g4 = np.array([[4.0, 40.0, 256.0]] * 32)
    held = tasks_per_node(n32g4, (0.0, 0.0, 0.0))
    assert int(held.sum()) == 32 * (2**31 - 1) > 0 and int(held.cumsum()[-1]) == int(held.sum())
    assert int(tasks_per_node(n32g4, (1e-300, 0.0, 0.0)).sum()) == 32 * (2**31 - 1)
    d = "bundled:samples/alibaba_pai2020/"
    t, _ = load({"name": "pai", "format": "alibaba_pai2020", "path": d + "pai_job_table.csv",
                 "options": {"task_table": d + "pai_task_table.csv"}})
    # give one PAI job a role whose plan fields are all empty (count 1, no demand)
    roles = t["roles"].to_pylist()
    roles[0] = roles[0] + [{"name": "empty", "count": 1, "gpu": 0.0, "cpu": 0.0, "mem": 0.0,
                            "min_count": 1, "max_count": 1}]
    import pyarrow as pa
    t = t.set_column(t.schema.get_field_index("roles"), t.schema.field("roles"),
                     pa.array(roles, t.schema.field("roles").type))
    kept, rec = oversize(t, n32g4, "drop")
    assert t["job_id"][0].as_py() not in rec["jobs"] and kept.num_rows == t.num_rows - rec["count"]


def _bytes_row(path, line_no, old: bytes, new: bytes):
    lines = path.read_bytes().split(b"\n")
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    path.write_bytes(b"\n".join(lines))
    return path


def test_non_utf8_is_located_and_skippable(tmp_path):
    p = tmp_path / "w.csv"
    shutil.copy(S / "pollux/workload.csv", p)
    _bytes_row(p, 3, b"imagenet", b"image\xe9net")
    with pytest.raises(TraceError, match=rf"{p}: line 3: not UTF-8 text"):
        traces.read("pollux", p)
    bad = BadRows("skip")
    t = traces.read("pollux", p, bad=bad)
    assert t.num_rows == traces.read("pollux", S / "pollux/workload.csv").num_rows - 1
    assert [(r.line, r.source) for r in bad.rejects] == [(3, str(p))]
    u16 = tmp_path / "u16.csv"
    u16.write_bytes((S / "pollux/workload.csv").read_text().encode("utf-16"))
    for mode in ("error", "skip"):
        with pytest.raises(TraceError, match=rf"{u16}: line 1: the file is UTF-16-encoded; trace files must be UTF-8"):
            traces.read("pollux", u16, on_bad_row=mode)


def test_non_utf8_in_json_lines_and_gavel(tmp_path):
    inst = tmp_path / "i.json"
    shutil.copy(G19 / "instance_events.json", inst)
    _bytes_row(inst, 2, b'"0"', b'"\xff"')
    with pytest.raises(TraceError, match=rf"{inst}: line 2: not UTF-8 text"):
        google2019(G19 / "collection_events.csv", inst)
    g = tmp_path / "g.trace"
    shutil.copy(DATA / "gavel/small_test.trace", g)
    _bytes_row(g, 4, b"ResNet", b"Res\x00Net")
    bad = BadRows("skip")
    assert traces.read("gavel", g, bad=bad).num_rows == 19 and [r.line for r in bad.rejects] == [4]


def test_huge_demand_is_refused_before_any_node_is_built(tmp_path):
    p = tmp_path / "c.csv"
    lines = (DATA / "elasticflow/raw/cluster10.csv").read_text().splitlines(keepends=True)
    lines[5] = lines[5].rsplit(",", 1)[0] + ",1000000000\n"
    p.write_text("".join(lines))
    with pytest.raises(TraceError, match=rf"{p}: line 6 \(job '[^']+'\): role 'worker' asks for 1,000,000,000 "
                                         r"tasks, more than the limit of 1,000,000 per role"):
        traces.read("elasticflow", p)
    auto = {"auto": {"gpus_per_node": 8}}
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"cluster.auto: the trace needs 1e\+09 GPUs .* 125,000,000 nodes of 8 GPUs: "
                                         r"more than the limit of 100,000 nodes"):
        from_config(auto, (10.0, 1e9))
    with pytest.raises(ValueError, match=r"a cluster of 100,000,000 nodes is larger than the limit of 100,000"):
        from_config({"groups": [{"count": 100_000_000, "gpus": 8, "cpus": 64, "mem": 512}]})
    assert time.perf_counter() - t0 < 1
    assert Cluster([NodeGroup(MAX_NODES, 1, 1, 1)]).num_nodes == MAX_NODES
    with pytest.raises(ValueError, match="capacities must be finite numbers >= 0"):
        Cluster([NodeGroup(1, float("nan"), 1, 1)])
    with pytest.raises(ValueError, match="count must be a whole number >= 0"):
        Cluster([NodeGroup(2.5, 1, 1, 1)])


def test_deeply_nested_philly_json_is_an_error(tmp_path):
    src = (S / "philly/cluster_job_log").read_text()
    p = tmp_path / "cluster_job_log"
    p.write_text(src.replace('"attempts": [', '"attempts": [' + "[" * 100_000 + "]" * 100_000 + ",", 1))
    t0 = time.perf_counter()
    with pytest.raises(TraceError, match=rf"{p}: job 1: malformed or truncated JSON near byte \d+ "
                                         r"\(nested deeper than 32 levels\)"):
        traces.read("philly", p)
    assert time.perf_counter() - t0 < 2


def _bad_rows_file(path, n):
    path.write_text("job_id,submission_time,duration,num_gpu\n" + "job,x,0,1\n" * n + "ok,0,10,1\n")
    return {"name": "b", "format": "elasticflow", "path": str(path), "on_bad_row": "skip",
            "cache": {"dir": str(path.parent / "c")}}


def test_skip_streams_rejects_in_bounded_memory(tmp_path):
    c = _bad_rows_file(tmp_path / "bad.csv", 30_000)  # 300 kB of bad rows
    tracemalloc.start()
    table, report = load(c)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert table["job_id"].to_pylist() == ["ok"] and report.rejected == 30_000 and len(report.rejects) == KEPT
    assert peak < 10e6, peak  # it used to hold every reject: ~380 MB per MB of bad rows


def test_skip_of_5_mb_of_bad_rows(tmp_path):
    c = _bad_rows_file(tmp_path / "bad.csv", 500_000)
    t0 = time.perf_counter()
    table, report = load(c)
    assert time.perf_counter() - t0 < 150 and report.rejected == 500_000  # ~10 s alone; it took 3 min before
    entry = next((tmp_path / "c").glob("*.parquet"))
    assert entry.stat().st_size < 100_000  # the rejects are beside the entry, not in it
    out = tmp_path / REJECTS_FILE
    report.write_rejects(out)
    with open(out) as f:
        assert f.readline().strip() == "source,line,field,reason,raw"
        first = f.readline()
        assert first.startswith(f"{tmp_path / 'bad.csv'},2,submission_time,")
        assert sum(1 for _ in f) == SPOOLED - 1   # every reject counted, the first SPOOLED listed
    assert report.listed == SPOOLED and out.stat().st_size < 5e6   # it wrote 285 MB for 5 MB of bad rows
    _, again = load(c)
    assert again.sources[0]["cache"] == "hit" and again.rejected == 500_000 and again.rejects == report.rejects


def test_all_rows_rejected_names_the_rejects_file_that_exists(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("job_id,submission_time,duration,num_gpu\n" + "job,x,0,1\n" * 3)
    c = {"name": "b", "format": "elasticflow", "path": str(p), "on_bad_row": "skip",
         "cache": {"dir": str(tmp_path / "c")}}
    with pytest.raises(TraceError, match=r"trace b: no jobs left to simulate \(3 row\(s\) rejected, listed in (\S+)\)") as e:
        load(c)
    listed = e.value.args[0].rsplit("listed in ", 1)[1].rstrip(")")
    assert len(open(listed).read().splitlines()) == 4


def test_run_writes_rejects_even_when_it_fails_later(tmp_path):
    from clustersim.experiment import compose, run
    src = tmp_path / "cluster10.csv"
    src.write_text((DATA / "elasticflow/raw/cluster10.csv").read_text().replace(",1\n", ",-1\n", 1))
    c = compose(["trace=elasticflow_raw", f"trace.path={src}", "trace.on_bad_row=skip",
                 "trace.oversize=error", "cluster=n16g4", "progress=false",
                 "cluster.groups=[{count:1,gpus:4,cpus:40,mem:256}]",
                 f"trace.cache.dir={tmp_path / 'c'}"])
    with pytest.raises(TraceError, match=r"job\(s\) can never fit the cluster"):
        run(c, tmp_path / "run")
    rejects = (tmp_path / "run" / REJECTS_FILE).read_text().splitlines()
    assert len(rejects) == 2 and "field 'num_gpu': must be > 0, got '-1'" in rejects[1]


def test_pai_header_files_are_in_the_cache_key(tmp_path):
    for f in (S / "alibaba_pai2020").iterdir():
        shutil.copy(f, tmp_path)
    c = {"name": "pai", "format": "alibaba_pai2020", "path": str(tmp_path / "pai_job_table.csv"),
         "options": {"task_table": str(tmp_path / "pai_task_table.csv")}, "cache": {"dir": str(tmp_path / "c")}}
    first, r1 = load(c)
    header = (DATA / "alibaba_v2020/pai_job_table.header").read_text()
    assert header.startswith("job_name,inst_id,user,status,start_time,end_time")
    # a header beside the table that swaps user and inst_id: users become the instance ids
    (tmp_path / "pai_job_table.header").write_text(header.replace("job_name,inst_id,user,", "job_name,user,inst_id,"))
    swapped, r2 = load(c)
    assert r2.sources[0]["cache"] == "stored" and r2.sources[0]["cache_key"] != r1.sources[0]["cache_key"]
    assert swapped["user"].to_pylist() != first["user"].to_pylist()


def test_transforms_are_revalidated():
    c = {"name": "t", "format": "elasticflow", "path": "bundled:elasticflow/raw/cluster10.csv"}
    with pytest.raises(TraceError, match=r"trace transform 0 \(scale_load \{'factor': 1e-300\}\): row 0 \(job '[^']+'\): "
                                         r"submit_time [0-9.e+]+ s is beyond 4.39805e\+12 s"):
        load({**c, "transforms": [{"op": "scale_load", "factor": 1e-300}]})


def test_absolute_times_beyond_millisecond_precision(tmp_path):
    p = tmp_path / "pai_job_table.csv"
    for f in (S / "alibaba_pai2020").iterdir():
        shutil.copy(f, tmp_path)
    lines = p.read_text().splitlines(keepends=True)
    fields = lines[0].split(",")
    fields[4] = "1000000000000000"  # 1e15 s submission
    lines[0] = ",".join(fields)
    p.write_text("".join(lines))
    with pytest.raises(TraceError, match=rf"{p}: line 1 \(job '[^']+'\): submit_time 1e\+15 s is beyond 4.39805e\+12 s "
                                         r"\(2\^42 s, about 139,000 years\), where float64 seconds lose millisecond"):
        traces.read("alibaba_pai2020", p, task_table=tmp_path / "pai_task_table.csv")


def test_oversize_drop_of_every_job_is_an_error():
    t, _ = load({"name": "t", "format": "elasticflow", "path": "bundled:elasticflow/raw/cluster10.csv"})
    with pytest.raises(TraceError, match=r"oversize: drop: none of the 260 job\(s\) can ever fit the cluster"):
        oversize(t, np.array([[0.0, 4.0, 16.0]]), "drop")


def test_cache_dir_that_is_a_file_fails_first(tmp_path, monkeypatch):
    (tmp_path / "f").write_text("")
    called = []
    from clustersim.traces import elasticflow
    monkeypatch.setattr(elasticflow, "read", lambda *a, **k: called.append(1))
    with pytest.raises(TraceError, match=rf"cache.dir {tmp_path / 'f'}: exists and is not a folder"):
        load({"name": "t", "format": "elasticflow", "path": "bundled:elasticflow/raw/cluster10.csv",
              "cache": {"dir": str(tmp_path / "f")}})
    assert not called


@pytest.mark.parametrize("damage", ["garbage", "truncated", "metadata", "schema", "rejects file"])
def test_corrupt_cache_entry_is_rebuilt(tmp_path, damage):
    src = tmp_path / "cluster10.csv"
    src.write_text((DATA / "elasticflow/raw/cluster10.csv").read_text().replace(",1\n", ",x\n", 1))
    c = {"name": "t", "format": "elasticflow", "path": str(src), "on_bad_row": "skip",
         "cache": {"dir": str(tmp_path / "c")}}
    first, r1 = load(c)
    entry = next((tmp_path / "c").glob("*.parquet"))
    import pyarrow as pa
    import pyarrow.parquet as pq
    if damage == "garbage":
        entry.write_bytes(b"not parquet")
    elif damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:200])
    elif damage == "metadata":
        pq.write_table(first.replace_schema_metadata({b"clustersim.load": b"{not json"}), entry)
    elif damage == "schema":
        pq.write_table(pa.table({"x": [1]}).replace_schema_metadata(
            {b"clustersim.load": json.dumps({"on_bad_row": "skip", "rejected": 0, "kept": [], "dropped": {}}).encode()}),
            entry)
    else:
        next((tmp_path / "c").glob("*.rejects.csv")).unlink()
    again, r2 = load(c)
    assert r2.sources[0]["cache"] == "stored" and again.equals(first) and r2.rejected == r1.rejected == 1
    _, r3 = load(c)
    assert r3.sources[0]["cache"] == "hit"

