"""Malformed input: every loader names the file, the line (or job), the field and the reason;
``on_bad_row: skip`` leaves bad rows out and returns them as rejects."""

import re
import shutil

import pytest

from clustersim import traces
from clustersim.traces import DATA
from clustersim.traces.collect import BadRows
from clustersim.traces.schema import TraceError

S = DATA / "samples"


def copy(src, tmp_path, name=None):
    dst = tmp_path / (name or src.name)
    shutil.copy(src, dst)
    return dst


def edit(path, fn):
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(fn(lines)))
    return path


def truncate_last(lines):
    """Cut the last line in the middle, as an interrupted download would."""
    lines = [line for line in lines if line.strip()]
    return lines[:-1] + [lines[-1][: len(lines[-1]) // 2]]


def replace_in(line_no, old, new):
    def fn(lines):
        lines = list(lines)
        assert old in lines[line_no - 1], (old, lines[line_no - 1])
        lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
        return lines
    return fn


def drop_column(name):
    def fn(lines):
        header = lines[0].rstrip("\n").split(",")
        i = header.index(name)
        return [",".join(v for k, v in enumerate(line.rstrip("\n").split(",")) if k != i) + "\n" for line in lines]
    return fn


# format, source file, extra options (as files under samples/), line to spoil, (old, new) text, field
CSV_CASES = {
    "tiresias": (DATA / "tiresias/60_job.csv", {}, 3, (",8,30,", ",eight,30,"), "num_gpu"),
    "elasticflow": (DATA / "elasticflow/ef/195job.csv", {}, 2, None, "num_gpu"),
    "pollux": (S / "pollux/workload.csv", {}, 3, (",4,800", ",four,800"), "num_replicas"),
    "philly_pollux": (DATA / "philly_pollux/philly.csv", {}, 2, (",66.0,1,", ",66.0,x,"), "num_gpus"),
    "openb": (DATA / "alibaba_v2023/openb_pod_list_default.csv", {}, 2, (",12000,16384,", ",12k,16384,"), "cpu_milli"),
    "helios": (S / "helios/cluster_log.csv", {}, 2, (",8,48,1,", ",8,48,one,"), "node_num"),
    "csv": (S / "csv/jobs.csv", {}, 3, (",1800,1,", ",1800,one,"), "num_gpus"),
}


def _spoil_ef(lines):
    head = lines[0].rstrip("\n").split(",")
    i = head.index("num_gpu")
    vals = lines[1].rstrip("\n").split(",")
    vals[i] = "two"
    return [lines[0], ",".join(vals) + "\n"] + lines[2:]


@pytest.mark.parametrize("fmt", sorted(CSV_CASES))
def test_wrong_type_names_file_line_field(fmt, tmp_path):
    src, opts, line, change, field = CSV_CASES[fmt]
    p = edit(copy(src, tmp_path), _spoil_ef if change is None else replace_in(line, *change))
    with pytest.raises(TraceError, match=rf"{re.escape(str(p))}: line {line}: field '{field}': '[^']+' is not a number"):
        traces.read(fmt, p, **opts)


@pytest.mark.parametrize("fmt", sorted(CSV_CASES))
def test_truncated_file(fmt, tmp_path):
    src, opts, *_ = CSV_CASES[fmt]
    p = edit(copy(src, tmp_path), truncate_last)
    n = len(p.read_text().splitlines())
    with pytest.raises(TraceError, match=rf"{re.escape(str(p))}: line {n}: .*(truncated or malformed row|not a|empty)"):
        traces.read(fmt, p, **opts)


@pytest.mark.parametrize("fmt, column", [("tiresias", "duration"), ("elasticflow", "submission_time"),
                                         ("pollux", "application"), ("philly_pollux", "cluster"),
                                         ("openb", "memory_mib"), ("helios", "state")])
def test_missing_column(fmt, column, tmp_path):
    src, opts, *_ = CSV_CASES[fmt]
    p = edit(copy(src, tmp_path), drop_column(column))
    with pytest.raises(TraceError, match=rf"{re.escape(str(p))}: line 1: missing column\(s\) {column}"):
        traces.read(fmt, p, **opts)


@pytest.mark.parametrize("fmt", sorted(CSV_CASES))
def test_skip_keeps_good_rows_and_reports_the_bad(fmt, tmp_path):
    src, opts, line, change, field = CSV_CASES[fmt]
    good = traces.read(fmt, src, on_bad_row="skip", **opts).num_rows
    p = edit(copy(src, tmp_path), _spoil_ef if change is None else replace_in(line, *change))
    bad = BadRows("skip")
    table = traces.read(fmt, p, bad=bad, **opts)
    assert table.num_rows == good - 1
    assert [(r.line, r.field) for r in bad.rejects] == [(line, field)]
    assert str(p) in bad.rejects[0].reason and bad.rejects[0].raw


def test_negative_duration_and_unsorted_times(tmp_path):
    p = edit(copy(DATA / "tiresias/60_job.csv", tmp_path), replace_in(2, ",164,30", ",-164,30"))
    with pytest.raises(TraceError, match=r"line 2: field 'duration': must be > 0, got '-164'"):
        traces.read("tiresias", p)
    p = edit(copy(DATA / "tiresias/60_job.csv", tmp_path, "b.csv"), replace_in(4, "2,53,", "2,5,"))
    with pytest.raises(TraceError, match=r"line 4: field 'submit_time': times not sorted \(5 after 30\)"):
        traces.read("tiresias", p)


def test_zero_resource_job(tmp_path):
    p = edit(copy(DATA / "alibaba_v2023/openb_pod_list_default.csv", tmp_path),
             replace_in(2, "openb-pod-0000,12000,16384,1,1000,", "openb-pod-0000,0,0,0,0,"))
    with pytest.raises(TraceError, match=r"line 2 \(job 'openb-pod-0000'\): job demands no resources"):
        traces.read("openb", p)


def test_unknown_status_and_duplicate_id(tmp_path):
    p = edit(copy(S / "helios/cluster_log.csv", tmp_path), replace_in(3, "FAILED", "EXPLODED"))
    with pytest.raises(TraceError, match=r"line 3: field 'state': unknown value 'EXPLODED'"):
        traces.read("helios", p)
    p = edit(copy(S / "pollux/workload.csv", tmp_path), replace_in(3, "imagenet-1,", "cifar10-0,"))
    with pytest.raises(TraceError, match=r"line 3 \(job 'cifar10-0'\): duplicate job_id \(first seen at line 2\)"):
        traces.read("pollux", p)


def test_helios_duration_must_match_times(tmp_path):
    p = edit(copy(S / "helios/cluster_log.csv", tmp_path), replace_in(2, ",7800,1", ",7000,1"))
    with pytest.raises(TraceError, match=r"line 2: field 'duration': 7000 s, but end_time - start_time is 7800 s"):
        traces.read("helios", p)
    p = edit(copy(S / "helios/cluster_log.csv", tmp_path, "q.csv"), replace_in(3, ",990,120", ",990,12"))
    with pytest.raises(TraceError, match=r"q.csv: line 3: field 'queue': 12 s, but start_time - submit_time is 120 s"):
        traces.read("helios", p)


def test_gavel_bad_rows(tmp_path):
    p = edit(copy(DATA / "gavel/small_test.trace", tmp_path), truncate_last)
    with pytest.raises(TraceError, match=r"small_test.trace: line 20: expected 7, 10 or 12 TAB-separated fields"):
        traces.read("gavel", p)
    p = edit(copy(DATA / "gavel/small_test.trace", tmp_path, "t.trace"), replace_in(1, "\t346\t2\t", "\t346\ttwo\t"))
    with pytest.raises(TraceError, match=r"t.trace: line 1: field 'scale_factor': 'two' is not a number"):
        traces.read("gavel", p)


def test_philly_json_errors(tmp_path):
    src = S / "philly/cluster_job_log"
    p = tmp_path / "cluster_job_log"
    p.write_bytes(src.read_bytes()[:-100])  # truncated inside the last job
    with pytest.raises(TraceError, match=r"cluster_job_log: job 5: malformed or truncated JSON"):
        traces.read("philly", p)
    bad = BadRows("skip")
    assert traces.read("philly", p, bad=bad).num_rows == 3 and len(bad.rejects) == 1
    p.write_text('{"jobs": ' + src.read_text() + "}")  # not the published layout: nothing may load silently
    with pytest.raises(TraceError, match=r"cluster_job_log: expected one JSON array of jobs"):
        traces.read("philly", p)
    p.write_text(src.read_text().replace('"status": "Failed"', '"status": 3'))
    with pytest.raises(TraceError, match=r"job 2 \(application_1506638472019_14201\): field 'status': unknown value 3"):
        traces.read("philly", p)
    p.write_text(src.read_text().replace('"submitted_time": "2017-10-07 01:15:00", ', ''))
    with pytest.raises(TraceError, match=r"job 2: missing field\(s\) submitted_time"):
        traces.read("philly", p)
    p.write_text(src.read_text().replace('"end_time": "2017-10-07 01:30:00"', '"end_time": "2017-10-07 01:10:00"'))
    with pytest.raises(TraceError, match=r"attempt 0: times out of order: end_time before start_time"):
        traces.read("philly", p)


def test_pai_errors(tmp_path):
    d = S / "alibaba_pai2020"
    for f in d.iterdir():
        copy(f, tmp_path)
    task = edit(tmp_path / "pai_task_table.csv", replace_in(3, ",600.0,30.0,100.0,", ",600.0,30.0,lots,"))
    with pytest.raises(TraceError, match=r"pai_task_table.csv: line 3: field 'plan_gpu': 'lots' is not a number"):
        traces.read("alibaba_pai2020", tmp_path / "pai_job_table.csv", task_table=task)
    bad = BadRows("skip")  # the task's job is rejected with it, not half-loaded
    t = traces.read("alibaba_pai2020", tmp_path / "pai_job_table.csv", task_table=task, bad=bad)
    assert "7a2b3c4d5e6f7a8b9c0d1e2f" not in t["job_id"].to_pylist()
    assert [r.line for r in bad.rejects] == [3, 2]
    assert "has a rejected row in pai_task_table.csv (line 3)" in bad.rejects[1].reason
    edit(tmp_path / "pai_job_table.csv", truncate_last)
    with pytest.raises(TraceError, match=r"pai_job_table.csv: line 5: expected 6 fields"):
        traces.read("alibaba_pai2020", tmp_path / "pai_job_table.csv", task_table=d / "pai_task_table.csv")
    (tmp_path / "pai_job_table.header").write_text("job_name,inst_id,user,state,start_time,end_time\n")
    with pytest.raises(TraceError, match=r"header lacks column\(s\) status"):
        traces.read("alibaba_pai2020", tmp_path / "pai_job_table.csv", task_table=d / "pai_task_table.csv")


def test_google_errors(tmp_path):
    d = S / "google2011"
    jobs = edit(copy(d / "job_events.csv", tmp_path), replace_in(3, "605000000,,6251812952,0,", "605000000,,6251812952,12,"))
    with pytest.raises(TraceError, match=r"job_events.csv: line 3: field 'event_type': unknown event type 12"):
        traces.read("google2011", jobs, task_events=d / "task_events.csv")
    jobs = edit(copy(d / "job_events.csv", tmp_path, "j2.csv"), lambda ls: [ls[0], ls[3], ls[2]] + ls[4:])
    with pytest.raises(TraceError, match=r"j2.csv: line 3: field 'time': times not sorted"):
        traces.read("google2011", jobs, task_events=d / "task_events.csv")
    jobs = edit(copy(d / "job_events.csv", tmp_path, "j3.csv"), truncate_last)
    with pytest.raises(TraceError, match=r"j3.csv: line 12: expected 8 fields"):
        traces.read("google2011", jobs, task_events=d / "task_events.csv")
    tasks = edit(copy(d / "task_events.csv", tmp_path), replace_in(5, ",9,0.0625,", ",9,lots,"))
    with pytest.raises(TraceError, match=r"task_events.csv: line 5: field 'cpu_request': 'lots' is not a number"):
        traces.read("google2011", d / "job_events.csv", task_events=tasks)
    e = S / "google2019"
    inst = edit(copy(e / "instance_events.json", tmp_path, "i.json"), replace_in(2, '"cpus": 0.0393', '"cpus": "lots"'))
    with pytest.raises(TraceError, match=r"i.json: line 2: field 'resource_request.cpus': 'lots' is not a number"):
        traces.read("google2019", e / "collection_events.csv", instance_events=inst)
    inst = edit(copy(e / "instance_events.json", tmp_path), truncate_last)
    with pytest.raises(TraceError, match=r"instance_events.json: line 7: malformed JSON line"):
        traces.read("google2019", e / "collection_events.csv", instance_events=inst)
    coll = edit(copy(e / "collection_events.csv", tmp_path), drop_column("collection_id"))
    with pytest.raises(TraceError, match=r"collection_events.csv: line 1: missing column\(s\) collection_id"):
        traces.read("google2019", coll, instance_events=e / "instance_events.json")


def test_unknown_option_and_format():
    with pytest.raises(TraceError, match=r"format 'helios' has no option\(s\) colour; its options: never_ran"):
        traces.read("helios", S / "helios/cluster_log.csv", colour="red")
    with pytest.raises(TraceError, match=r"unknown trace format 'nope'"):
        traces.read("nope", S / "helios/cluster_log.csv")
    with pytest.raises(TraceError, match=r"on_bad_row must be one of"):
        traces.read("helios", S / "helios/cluster_log.csv", on_bad_row="ignore")


def test_validate_rejects_non_finite_demands():
    from clustersim.traces.schema import Role, build_table, validate
    for bad in (float("nan"), float("inf")):
        table = build_table({"job_id": ["a"], "submit_time": [0.0], "duration": [10.0],
                             "roles": [[Role("worker", 1, gpu=1.0, cpu=bad)]]})
        with pytest.raises(TraceError, match=r"t: row 0 \(job 'a'\): role 'worker' needs finite, non-negative demands"):
            validate(table, "t")


def test_uniform_arrivals_need_an_end():
    import numpy as np
    from clustersim.traces.synthetic import arrivals
    with pytest.raises(TraceError, match="uniform arrivals need an end after start"):
        arrivals(np.random.default_rng(0), 5, process="uniform")
