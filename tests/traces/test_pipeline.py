"""The loading pipeline: cache, transformations, oversize rule, report and run metadata."""

import json
import shutil

import numpy as np
import pytest

from clustersim.traces import DATA
from clustersim.traces.load import load
from clustersim.traces.schema import TraceError
from clustersim.traces.transform import oversize

EF = "bundled:elasticflow/raw/cluster10.csv"


def cfg(**kw):
    base = {"name": "t", "format": "elasticflow", "path": EF}
    base.update(kw)
    return base


def test_cache_hit_and_invalidation(tmp_path):
    src = tmp_path / "cluster10.csv"
    shutil.copy(DATA / "elasticflow/raw/cluster10.csv", src)
    c = cfg(path=str(src), cache={"dir": str(tmp_path / "c")})
    first, r1 = load(c)
    again, r2 = load(c)
    assert (r1.sources[0]["cache"], r2.sources[0]["cache"]) == ("stored", "hit")
    assert again.equals(first)
    src.write_text(src.read_text().replace(",1\n", ",2\n", 1))  # one job now asks for 2 GPUs
    changed, r3 = load(c)
    assert r3.sources[0]["cache"] == "stored" and r3.sources[0]["cache_key"] != r1.sources[0]["cache_key"]
    assert changed["num_gpus"].to_pylist() != first["num_gpus"].to_pylist()
    _, r4 = load({**c, "options": {"cpu_per_gpu": 4.0}})
    assert r4.sources[0]["cache"] == "stored"
    assert len(list((tmp_path / "c").glob("*.parquet"))) == 3


def test_cache_invalidated_by_a_further_file(tmp_path):
    for f in (DATA / "samples/alibaba_pai2020").iterdir():
        shutil.copy(f, tmp_path)
    c = {"name": "pai", "format": "alibaba_pai2020", "path": str(tmp_path / "pai_job_table.csv"),
         "options": {"task_table": str(tmp_path / "pai_task_table.csv")}, "cache": {"dir": str(tmp_path / "c")}}
    first, r1 = load(c)
    task = tmp_path / "pai_task_table.csv"
    task.write_text(task.read_text().replace(",600.0,29.296875,50.0,T4", ",600.0,29.296875,25.0,T4"))
    changed, r2 = load(c)
    assert r2.sources[0]["cache"] == "stored" and r2.sources[0]["cache_key"] != r1.sources[0]["cache_key"]
    gpus = lambda t: dict(zip(t["job_id"].to_pylist(), t["num_gpus"].to_pylist()))  # noqa: E731
    assert (gpus(first)["6f1a2b3c4d5e6f7a8b9c0d1e"], gpus(changed)["6f1a2b3c4d5e6f7a8b9c0d1e"]) == (0.5, 0.25)


def test_cache_keeps_rejects_and_can_be_disabled(tmp_path):
    src = tmp_path / "cluster10.csv"
    src.write_text((DATA / "elasticflow/raw/cluster10.csv").read_text().replace(",1\n", ",x\n", 1))
    c = cfg(path=str(src), on_bad_row="skip", cache={"dir": str(tmp_path / "c")})
    _, r1 = load(c)
    _, r2 = load(c)
    assert r2.sources[0]["cache"] == "hit" and len(r1.rejects) == len(r2.rejects) == 1
    assert r2.rejects == r1.rejects
    _, r3 = load({**c, "cache": {"enabled": False}})
    assert r3.sources[0]["cache"] is None


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERSIM_CACHE", str(tmp_path / "env"))
    load(cfg())
    assert list((tmp_path / "env").glob("*.parquet"))


def test_window_sample_scale_and_tenants():
    full, _ = load(cfg())
    t, r = load(cfg(transforms=[{"op": "window", "start": 2.5e6, "end": 3.5e6}]))
    sub = np.array(full["submit_time"])
    inside = (sub >= 2.5e6) & (sub < 3.5e6)
    assert 0 < t.num_rows == int(inside.sum()) and r.transforms[0]["jobs_before"] == 260
    assert np.allclose(np.array(t["submit_time"]), sub[inside] - 2.5e6)
    first, _ = load(cfg(transforms=[{"op": "sample", "n": 10, "how": "first"}]))
    assert first["job_id"].to_pylist() == full["job_id"].to_pylist()[:10]
    a, _ = load(cfg(transforms=[{"op": "sample", "n": 10, "how": "random"}]), seed=1)
    b, _ = load(cfg(transforms=[{"op": "sample", "n": 10, "how": "random"}]), seed=1)
    c, _ = load(cfg(transforms=[{"op": "sample", "n": 10, "how": "random"}]), seed=2)
    assert a.equals(b) and not a.equals(c) and set(a["job_id"].to_pylist()) <= set(full["job_id"].to_pylist())
    fast, _ = load(cfg(transforms=[{"op": "scale_load", "factor": 4}]))
    assert np.allclose(np.array(fast["submit_time"]) * 4, sub)
    assert fast["duration"].equals(full["duration"])
    ef, _ = load(cfg(path="bundled:elasticflow/ef/195job.csv"))
    ef2, _ = load(cfg(path="bundled:elasticflow/ef/195job.csv", transforms=[{"op": "scale_load", "factor": 2}]))
    slack = np.array(ef["deadline"]) - np.array(ef["submit_time"])
    assert np.allclose(np.array(ef2["deadline"]) - np.array(ef2["submit_time"]), slack)  # deadlines keep their slack
    two, _ = load(cfg(path=[EF, "bundled:elasticflow/raw/cluster09.csv"],
                      transforms=[{"op": "tenants", "keep": ["cluster09"]}]))
    assert set(two["tenant"].to_pylist()) == {"cluster09"} and two.num_rows == 11134


def test_transforms_move_attempts_with_their_job():
    philly = {"name": "p", "format": "philly", "path": "bundled:samples/philly/cluster_job_log"}
    full, _ = load(philly)
    fast, _ = load({**philly, "transforms": [{"op": "scale_load", "factor": 4}]})
    late, _ = load({**philly, "transforms": [{"op": "window", "start": 600}]})
    job = "application_1506638472019_14201"  # submitted at 201 s; attempts 501-1101 s and 1401-2301 s
    f, q = (next(r for r in t.to_pylist() if r["job_id"] == job) for t in (full, fast))
    assert q["submit_time"] == 201 / 4
    assert q["attempts"] == [{"start": 501 - 201 + 201 / 4, "end": 1101 - 201 + 201 / 4},
                             {"start": 1401 - 201 + 201 / 4, "end": 2301 - 201 + 201 / 4}]
    assert q["start_time"] - q["submit_time"] == f["start_time"] - f["submit_time"] == 300
    assert q["duration"] == f["duration"] == 1800
    assert job not in late["job_id"].to_pylist()
    kept = next(r for r in late.to_pylist() if r["job_id"] == "application_1506638472019_14230")  # submitted 2901 s
    assert kept["submit_time"] == 2901 - 600 and kept["attempts"] == [{"start": 2931 - 600, "end": 10131 - 600}]


def test_bad_transform_and_shared_ids():
    with pytest.raises(TraceError, match="unknown op 'shuffle'"):
        load(cfg(transforms=[{"op": "shuffle"}]))
    with pytest.raises(TraceError, match="scale_load: factor must be > 0"):
        load(cfg(transforms=[{"op": "scale_load", "factor": 0}]))
    with pytest.raises(TraceError, match="share job ids; set prefix_ids"):
        load(cfg(format="gavel", path=["bundled:gavel/small_test.trace", "bundled:gavel/medium_test.trace"]))
    t, _ = load(cfg(format="gavel", path=["bundled:gavel/small_test.trace", "bundled:gavel/medium_test.trace"],
                    prefix_ids=True))
    assert t["job_id"].to_pylist()[:2] == ["small_test/0", "small_test/1"] and t.num_rows == 40


def test_oversize_rules():
    t, _ = load(cfg())  # the two largest jobs of cluster10 ask for 16 GPUs
    cap = np.array([[4.0, 96.0, 768.0]] * 2)  # 8 GPUs
    big = [r["job_id"] for r in t.to_pylist() if r["num_gpus"] > 8]
    with pytest.raises(TraceError, match=r"job\(s\) can never fit the cluster"):
        oversize(t, cap, "error")
    dropped, rec = oversize(t, cap, "drop")
    assert rec["count"] == len(big) > 0 and dropped.num_rows == t.num_rows - len(big)
    clamped, rec = oversize(t, cap, "clamp")
    assert clamped.num_rows == t.num_rows and max(clamped["num_gpus"].to_pylist()) == 8
    assert clamped["duration"].equals(t["duration"])
    hungry, _ = load(cfg(options={"cpu_per_gpu": 12.0}, transforms=[{"op": "sample", "n": 5, "how": "first"}]))
    small = np.array([[8.0, 4.0, 768.0]] * 4)  # a task asking more cores than any node has shrinks to the node
    shrunk, rec = oversize(hungry, small, "clamp")
    assert rec["count"] == 5 and {r["cpu"] for rs in shrunk["roles"].to_pylist() for r in rs} == {4.0}


def test_oversize_counts_all_roles_together():
    d = "bundled:samples/alibaba_pai2020/"
    t, _ = load({"name": "pai", "format": "alibaba_pai2020", "path": d + "pai_job_table.csv",
                 "options": {"task_table": d + "pai_task_table.csv"}})
    # 7a2b…: ps 2 x 8 cores, worker 4 x (1 GPU, 6 cores), evaluator 4 cores: each role fits one
    # 40-core node, the job (44 cores) does not; 8b3c… asks 8 GPUs of one task
    node = np.array([[4.0, 40.0, 256.0]])
    _, rec = oversize(t, node, "drop")
    assert sorted(rec["jobs"]) == ["7a2b3c4d5e6f7a8b9c0d1e2f", "8b3c4d5e6f7a8b9c0d1e2f3a"]
    clamped, _ = oversize(t, node, "clamp")  # the largest role (4 workers) gives up a task: 38 cores
    ps_job = next(r for r in clamped.to_pylist() if r["job_id"] == "7a2b3c4d5e6f7a8b9c0d1e2f")
    assert [(r["name"], r["count"]) for r in ps_job["roles"]] == [("ps", 2), ("worker", 3), ("evaluator", 1)]
    with pytest.raises(TraceError, match=r"job '7a2b3c4d5e6f7a8b9c0d1e2f' does not fit the cluster even with one task"):
        oversize(t, np.array([[4.0, 16.0, 256.0]]), "clamp")  # 8 + 6 + 4 cores > 16 at one task each


def test_run_writes_report_and_rejects(tmp_path):
    from clustersim.experiment import compose, run
    src = tmp_path / "cluster10.csv"
    src.write_text((DATA / "elasticflow/raw/cluster10.csv").read_text().replace(",1\n", ",-1\n", 1))
    c = compose(["trace=elasticflow_raw", f"trace.path={src}", "trace.on_bad_row=skip",
                 "trace.oversize=drop", "cluster=n16g4", "progress=false",
                 f"trace.cache.dir={tmp_path / 'c'}",
                 "+trace.transforms=[{op: sample, n: 100, how: first}]"])
    run(c, tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "run.json").read_text())["trace"]
    assert meta["rejected"] == 1 and meta["rejects_file"] == "trace_rejects.csv"
    assert meta["transforms"][0]["jobs_after"] == 100 and meta["oversize"]["rule"] == "drop"
    assert meta["jobs"] == 100 - meta["oversize"]["count"]
    rejects = (tmp_path / "run" / "trace_rejects.csv").read_text().splitlines()
    assert rejects[0] == "source,line,field,reason,raw" and "num_gpu" in rejects[1]
