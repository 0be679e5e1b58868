"""Each reader on its bundled data or hand-made fixture: field mapping and units on concrete rows."""

import pytest

from clustersim import traces
from clustersim.traces.collect import BadRows
from clustersim.traces.schema import TraceError

from .conftest import rows_by_id


def read(fmt, path, **options):
    bad = BadRows()
    return traces.read(fmt, path, bad=bad, **options), bad


def roles(row):
    return [(r["name"], r["count"], r["gpu"], r["cpu"], r["mem"]) for r in row["roles"]]


def test_tiresias_60_job():
    t, _ = read("tiresias", "bundled:tiresias/60_job.csv")
    r = rows_by_id(t)
    assert t.num_rows == 60
    assert (r["1"]["submit_time"], r["1"]["duration"], r["1"]["iterations"], r["1"]["model"]) == (30, 147, 133, "vgg11")
    assert roles(r["1"]) == [("worker", 8, 1.0, 0.0, 0.0)]


def test_generic_csv_reads_every_column_and_an_optional_model(tmp_path):
    t, _ = read("csv", "bundled:samples/csv/jobs.csv")
    r = rows_by_id(t)
    assert t.num_rows == 6
    assert (r["a2"]["submit_time"], r["a2"]["duration"], r["a2"]["model"]) == (120, 1800, "bert")
    assert r["a3"]["model"] is None and roles(r["a3"]) == [("worker", 8, 1.0, 0.0, 0.0)]
    assert roles(r["a4"]) == [("worker", 1, 0.5, 0.0, 0.0)]   # half a shared GPU
    # any column order, no model column, rows out of order, unknown columns ignored
    p = tmp_path / "mine.csv"
    p.write_text("num_gpus,note,duration,job_id,submit_time\n2,x,60,j2,50\n1,y,30,j1,10\n")
    t, _ = read("csv", p)
    assert sorted(t.column("job_id").to_pylist()) == ["j1", "j2"] and set(t.column("model").to_pylist()) == {None}
    p.write_text("job_id,submit_time,duration,num_gpus\nj1,0,60,2.5\n")
    with pytest.raises(TraceError, match="line 2: field 'num_gpus'"):
        read("csv", p)


def test_elasticflow_ef_columns_and_tenant():
    t, _ = read("elasticflow", "bundled:elasticflow/ef/195job.csv")
    first = t.slice(0, 1).to_pylist()[0]
    assert t.num_rows == 195 and first["tenant"] == "195job"
    assert first["iterations"] > 0 and first["model"] in {"bert", "deepspeech2", "gpt2", "inception3", "resnet50", "vgg16"}
    assert 32 <= first["batch_size"] <= 256 and first["deadline"] > first["submit_time"]


@pytest.mark.parametrize("name, fields", [("msr_seed0_23dbec.trace", 7), ("small_test.trace", 10)])
def test_gavel_layouts(name, fields):
    t, _ = read("gavel", f"bundled:gavel/{name}")
    rows = t.to_pylist()
    if fields == 7:  # "Transformer (batch size 256)\t…\t-step\t1\t19178\t182095.000000\t8"
        r = rows[2]
        assert (r["model"], r["batch_size"], r["iterations"], r["submit_time"], r["num_gpus"]) == \
            ("Transformer", 256, 19178, 182095.0, 8.0)
        assert r["priority"] is None and t.num_rows == 9
    else:  # "Transformer (batch size 128)\t…\t-step\t1\t346\t2\t1\t-1.000000\t0"
        r = rows[0]
        assert (r["model"], r["batch_size"], r["iterations"], r["num_gpus"], r["priority"]) == \
            ("Transformer", 128, 346, 2.0, 1)
    assert all(x["duration"] is None and x["status"] == "unknown" for x in rows)
    assert roles(r) == [("worker", int(r["num_gpus"]), 1.0, 0.0, 0.0)]


def test_shockwave_12_fields_give_duration(sample):
    t, _ = read("shockwave", sample("shockwave/reproduce_sample.trace"))
    r = t.to_pylist()[2]
    assert (r["model"], r["batch_size"], r["iterations"], r["num_gpus"], r["priority"], r["duration"], r["submit_time"]) \
        == ("ResNet-50", 32, 154839, 4.0, 5, 27514.0, 1630.0)


def test_pollux_workload(sample):
    t, _ = read("pollux", sample("pollux/workload.csv"))
    r = rows_by_id(t)["imagenet-1"]
    assert (r["submit_time"], r["model"], r["num_gpus"], r["batch_size"], r["duration"]) == (161, "resnet50", 4, 800, None)
    # 90 ImageNet epochs: 576,525 iterations at batch 200 in the Pollux simulator's trace, so a quarter at 800
    assert r["iterations"] == 576525 * 200 / 800
    assert rows_by_id(t)["bert-2"]["iterations"] == 14774
    unsized, _ = read("pollux", sample("pollux/workload.csv"), epochs="none")
    assert set(unsized["iterations"].to_pylist()) == {None}


def test_pollux_unknown_application_is_named(sample, tmp_path):
    p = tmp_path / "w.csv"
    p.write_text("name,time,application,num_replicas,batch_size\nj,0,resnet9000,1,64\n")
    with pytest.raises(TraceError, match=r"line 2: field 'application': 'resnet9000' has no Pollux epoch count"):
        read("pollux", p)


def test_philly_pollux_real_file():
    t, _ = read("philly_pollux", "bundled:philly_pollux/philly.csv")
    assert t.num_rows == 82247
    assert min(t["submit_time"].to_pylist()) == 0.0
    # line 2: "2017-10-09 07:01:55,66.0,1,66.0,11cb48"; the earliest submission is 2017-09-04 10:30:41
    r = rows_by_id(t)["1"]
    assert (r["duration"], r["num_gpus"], r["tenant"]) == (66.0, 1.0, "11cb48")
    assert r["submit_time"] == (35 * 86400 - 3 * 3600 - 28 * 60 - 46)  # 2017-10-09 07:01:55 - 2017-09-04 10:30:41
    assert len(set(t["tenant"].to_pylist())) == 15


def test_openb_fractional_gpus_and_units():
    t, bad = read("openb", "bundled:alibaba_v2023/openb_pod_list_default.csv")
    r = rows_by_id(t)
    # openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
    p = r["openb-pod-0001"]
    assert roles(p) == [("worker", 1, 0.46, 6.0, 12.0)]
    assert (p["submit_time"], p["start_time"], p["duration"], p["status"], p["tenant"]) == \
        (427061, 427061, 12902960 - 427061, "running", "LS")
    # openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497
    q = r["openb-pod-0017"]
    assert roles(q) == [("worker", 1, 8.0, 88.0, 320.0)] and q["status"] == "completed"
    assert q["duration"] == 10769854 - 9437497
    assert t.num_rows == 8152 - 897 and bad.dropped == {"openb: pod never scheduled": 897}


def test_openb_split_and_keep_options():
    t, _ = read("openb", "bundled:alibaba_v2023/openb_pod_list_default.csv", never_ran="keep", one_task_per_pod=False)
    r = rows_by_id(t)
    assert t.num_rows == 8152
    assert roles(r["openb-pod-0017"]) == [("worker", 8, 1.0, 11.0, 40.0)]
    pending = [x for x in t.to_pylist() if x["status"] == "pending"]
    assert len(pending) == 897 and all(x["duration"] is None for x in pending)


def test_openb_multigpu_layout_has_no_times():
    t, _ = read("openb", "bundled:alibaba_v2023/openb_pod_list_multigpu50.csv")
    assert t.num_rows == 9061
    assert set(t["submit_time"].to_pylist()) == {0.0} and set(t["duration"].to_pylist()) == {None}


def test_helios_cluster_log(sample):
    t, bad = read("helios", sample("helios/cluster_log.csv"))
    r = rows_by_id(t)
    assert t.num_rows == 6 and bad.dropped == {"helios: job never ran (no start/end, or 0 s)": 1}
    a = r["k2LmQwXa"]  # 16 GPUs, 96 CPUs, 2 nodes, FAILED, submit 00:01:40, start 00:03:40, end 00:20:10
    assert roles(a) == [("worker", 16, 1.0, 6.0, 0.0)]
    assert (a["submit_time"], a["start_time"], a["duration"], a["status"], a["tenant"], a["user"], a["num_nodes"]) == \
        (88.0, 208.0, 990.0, "failed", "vcWoR", "uQ3rT", 2)
    assert roles(r["p7HsTfVb"]) == [("worker", 1, 0.0, 4.0, 0.0)]  # a CPU job
    assert r["r4NcYeZw"]["status"] == "killed" and r["t1GhUjKi"]["status"] == "failed"


def test_philly_job_log(sample):
    t, bad = read("philly", sample("philly/cluster_job_log"), machine_list=sample("philly/cluster_machine_list"))
    r = rows_by_id(t)
    assert t.num_rows == 4 and bad.dropped == {"philly: no attempt holds a GPU (job size unknown)": 1}
    retry = r["application_1506638472019_14201"]  # failed after two attempts, 01:20-01:30 and 01:35-01:50
    assert retry["attempts"] == [{"start": 501.0, "end": 1101.0}, {"start": 1401.0, "end": 2301.0}]
    assert (retry["duration"], retry["status"], retry["tenant"], retry["gpu_type"]) == (1800.0, "failed", "6214e9", "12GB")
    big = r["application_1506638472019_14230"]  # 2 servers x 8 GPUs
    assert (big["num_gpus"], big["num_nodes"], big["status"], big["gpu_type"]) == (16.0, 2, "killed", "24GB")
    running = r["application_1506638472019_14277"]  # no end: censored at the log's last time (04:00:30)
    assert running["status"] == "running" and running["duration"] == 3630.0
    t2, _ = read("philly", sample("philly/cluster_job_log"), duration="sum_attempts")
    assert rows_by_id(t2)["application_1506638472019_14201"]["duration"] == 600 + 900


def test_philly_machine_list_units(tmp_path):
    from clustersim.traces.philly import read_machine_list
    p = tmp_path / "cluster_machine_list"
    p.write_text("machineId,number of GPUs,single GPU mem\nm1,8, 24GB\nm2,2,12288MB\n")
    assert read_machine_list(p) == {"m1": (8, 24.0), "m2": (2, 12.0)}
    p.write_text("machineId,number of GPUs,single GPU mem\nm1,8, 24XB\n")
    with pytest.raises(traces.TraceError, match=r"line 2: field 'single GPU mem': unknown unit 'XB'"):
        read_machine_list(p)


def test_alibaba_pai2020(sample):
    d = "alibaba_pai2020/"
    t, bad = read("alibaba_pai2020", sample(d + "pai_job_table.csv"), task_table=sample(d + "pai_task_table.csv"),
                  instance_table=sample(d + "pai_instance_table.csv"),
                  group_tag_table=sample(d + "pai_group_tag_table.csv"))
    r = rows_by_id(t)
    assert t.num_rows == 4 and sum(bad.dropped.values()) == 1  # the Waiting job never ran
    ps = r["7a2b3c4d5e6f7a8b9c0d1e2f"]  # ps x2 (800% CPU, 40 GB), worker x4 (600%, 30 GB, 100% GPU), evaluator
    assert roles(ps) == [("ps", 2, 0.0, 8.0, 40.0), ("worker", 4, 1.0, 6.0, 30.0), ("evaluator", 1, 0.0, 4.0, 10.0)]
    # submitted at 1000100, first instance at 1000165, ended 1000700; the first job submitted at 1000000
    assert (ps["submit_time"], ps["start_time"], ps["duration"], ps["status"]) == (100.0, 165.0, 535.0, "failed")
    assert (ps["tenant"], ps["model"], ps["gpu_type"], ps["num_gpus"]) == ("1f2e3d4c5b6a", "ctr", "V100", 4.0)
    half = r["6f1a2b3c4d5e6f7a8b9c0d1e"]  # plan_gpu 50 = half a T4
    assert roles(half) == [("tensorflow", 1, 0.5, 6.0, 29.296875)] and half["model"] == "bert"
    running = r["ad5e6f7a8b9c0d1e2f3a4b5c"]
    assert running["status"] == "running" and running["tenant"] == running["user"] == "c1d2e3f4a5b6"


def test_alibaba_pai2020_without_optional_tables(sample):
    d = "alibaba_pai2020/"
    t, _ = read("alibaba_pai2020", sample(d + "pai_job_table.csv"), task_table=sample(d + "pai_task_table.csv"))
    r = rows_by_id(t)["7a2b3c4d5e6f7a8b9c0d1e2f"]
    assert r["start_time"] == 160.0 and r["tenant"] == "58540f191766" and r["model"] is None  # earliest task start


def test_google2011(sample):
    t, bad = read("google2011", sample("google2011/job_events.csv"), task_events=sample("google2011/task_events.csv"),
                  machine_cpus=32, machine_mem_gb=128)
    r = rows_by_id(t)
    assert t.num_rows == 3 and bad.dropped == {"google: job never scheduled (or ran 0 s)": 1}
    evicted = r["6251974185"]  # scheduled 25 s, evicted 100 s, rescheduled 160 s, finished 460 s
    assert evicted["attempts"] == [{"start": 25.0, "end": 100.0}, {"start": 160.0, "end": 460.0}]
    assert (evicted["submit_time"], evicted["duration"], evicted["status"], evicted["priority"], evicted["tenant"]) == \
        (20.0, 435.0, "completed", 4, "middle")
    assert roles(evicted) == [("worker", 1, 0.0, 0.0625 * 32, 0.007957 * 128)]  # largest request after the update
    two = r["6251812952"]
    assert roles(two) == [("worker", 2, 0.0, 2.0, 0.01593 * 128)] and two["tenant"] == "production"
    before = r["3418309"]  # submitted before the window (time 0), never ends: censored at the last event
    assert (before["submit_time"], before["status"], before["duration"]) == (0.0, "running", 3610.0)


def test_google2019_csv_and_json_lines(sample):
    t, bad = read("google2019", sample("google2019/collection_events.csv"),
                  instance_events=sample("google2019/instance_events.json"))
    r = rows_by_id(t)
    assert t.num_rows == 2 and bad.dropped == {"google2019: events of alloc sets (collection_type 1)": 2}
    a = r["375000000001"]
    assert roles(a) == [("worker", 3, 0.0, 0.0393 * 32, 0.0123 * 128)]
    assert (a["submit_time"], a["start_time"], a["duration"], a["status"], a["tenant"], a["model"]) == \
        (10.0, 12.0, 1800.0, "completed", "production", "lA1=")
    b = r["375000000002"]
    assert (b["status"], b["tenant"], b["priority"]) == ("failed", "free", 25)
    assert b["attempts"] == [{"start": 40.0, "end": 100.0}, {"start": 150.0, "end": 400.0}]


def test_google_shards_folder_and_gzip(sample, tmp_path):
    import gzip
    shards = tmp_path / "job_events"
    shards.mkdir()
    lines = sample("google2011/job_events.csv").read_text().splitlines(keepends=True)
    (shards / "part-00000-of-00002.csv.gz").write_bytes(gzip.compress("".join(lines[:6]).encode()))
    (shards / "part-00001-of-00002.csv.gz").write_bytes(gzip.compress("".join(lines[6:]).encode()))
    t, _ = read("google2011", shards, task_events=sample("google2011/task_events.csv"))
    assert sorted(t["job_id"].to_pylist()) == ["3418309", "6251812952", "6251974185"]


def test_every_format_has_a_config_that_loads():
    from pathlib import Path

    import yaml
    from clustersim.traces.load import load
    configs = Path(traces.__file__).parent.parent / "configs" / "trace"
    seen = set()
    for f in sorted(configs.glob("*.yaml")):
        cfg = yaml.safe_load(f.read_text())
        table, report = load(cfg)
        assert table.num_rows > 0 and report.jobs == table.num_rows
        seen.add(cfg["format"])
    assert set(traces.formats()) <= seen | {"shockwave"}
