"""Bad inputs, damaged outputs and bounds, as users meet them: each case ends in one line naming the key,
file or path (exit 1, no traceback), or in a valid run; never a hang, a silently wrong result or a
result kept from other inputs."""

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from clustersim.collect import collect
from clustersim.experiment import build_engine, compose, inputs, is_complete, load_trace, run
from clustersim.simulator.errors import ConfigError, OutputError, TraceError

TIRESIAS = Path(__file__).resolve().parents[1] / "traces" / "data" / "tiresias" / "60_job.csv"
USER_ERRORS = (ConfigError, TraceError, OutputError)


def clustersim(*args, cwd, env=None, prog="clustersim.cli", preexec_fn=None):
    return subprocess.run([sys.executable, "-m", prog, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env, preexec_fn=preexec_fn)


def one_line_error(p, *needles):
    """The process failed with exit 1 and one error line holding every needle, no traceback."""
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    errors = [line for line in p.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and all(n in errors[0] for n in needles), p.stderr


def error_of(overrides, tmp_path) -> str:
    """The one-line user error an in-process run of ``overrides`` raises (``clustersim`` prints it)."""
    with pytest.raises(USER_ERRORS) as e:
        run(compose(overrides), tmp_path / "run")
    assert "\n" not in str(e.value)
    return str(e.value)


# --- run identity: a run's inputs by content


def test_editing_a_trace_and_rerunning_the_sweep_reruns_it(tmp_path):
    trace = tmp_path / "t.csv"
    shutil.copy(TIRESIAS, trace)
    args = ("-m", "seed=0", f"trace.path={trace}", f"hydra.sweep.dir={tmp_path / 'S'}")
    first = clustersim(*args, cwd=tmp_path)
    assert first.returncode == 0 and "JCT mean / median (s)    1,569.3" in first.stdout, first.stderr
    assert "complete: skipped" in clustersim(*args, cwd=tmp_path).stdout   # same inputs: skipped
    # job 0 runs 100x longer: 164 s -> 16,400 s
    trace.write_bytes(trace.read_bytes().replace(b"0,1,0,606,vgg19,164,30", b"0,1,0,606,vgg19,16400,30", 1))
    again = clustersim(*args, cwd=tmp_path)
    assert "skipped" not in again.stdout and "JCT mean / median (s)    17,805.3" in again.stdout, again.stdout


def test_a_runs_identity_holds_its_trace_profile_files_and_code(tmp_path):
    trace = tmp_path / "t.csv"
    shutil.copy(TIRESIAS, trace)
    cfg = compose([f"trace.path={trace}"])
    run(cfg, tmp_path / "r")
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    files = meta["inputs"]["files"]
    assert files[f"{trace}:path"] == inputs(meta["config"])["files"][f"{trace}:path"]
    assert any(k.startswith("profile:") and k.endswith("tf_cnn.yaml") for k in files)
    assert len(meta["inputs"]["code"]) == 64 and is_complete(tmp_path / "r", cfg)
    with open(trace, "a") as f:
        f.write("61,1,9000,10,vgg19,10,1\r\n")
    assert not is_complete(tmp_path / "r", cfg)


# --- outputs recorded by hash; damaged runs reported, the others collected


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    p = clustersim("-m", "policy=fifo,tiresias", "seed=0,1", f"hydra.sweep.dir={root / 'S'}", cwd=root)
    assert p.returncode == 0, p.stderr
    return root / "S"


def damaged_copy(sweep, tmp_path, damage):
    s = tmp_path / "S"
    shutil.copytree(sweep, s)
    runs = sorted(d for d in s.iterdir() if d.is_dir())
    damage(s, runs)
    return s


CASES = {
    "deleted jobs.parquet": (lambda s, r: (r[0] / "jobs.parquet").unlink(), "jobs.parquet is missing"),
    "copied in from another run": (lambda s, r: shutil.copy(r[0] / "jobs.parquet", r[2] / "jobs.parquet"),
                                   "jobs.parquet differs from the file the run wrote"),
    "truncated parquet": (lambda s, r: (r[0] / "timeline.parquet").write_bytes(
        (r[0] / "timeline.parquet").read_bytes()[:300]), "timeline.parquet differs"),
    "garbage parquet": (lambda s, r: (r[0] / "events.parquet").write_bytes(os.urandom(2000)), "events.parquet differs"),
    "run.json holds a list": (lambda s, r: (r[0] / "run.json").write_text("[1, 2]"), "run.json holds a list"),
    "run.json not JSON": (lambda s, r: (r[0] / "run.json").write_bytes(b"\xff{"), "run.json is unreadable"),
    "summary.json not JSON": (lambda s, r: (r[0] / "summary.json").write_text("{garbage"), "summary.json differs"),
    "run.json of another shape": (lambda s, r: (r[0] / "run.json").write_text(json.dumps(
        {**json.loads((r[0] / "run.json").read_text()), "config": [1], "overrides": 5})), "run.json does not describe"),
}


@pytest.mark.parametrize("case", CASES)
def test_collect_reports_a_damaged_run_and_collects_the_others(sweep, tmp_path, case):
    damage, why = CASES[case]
    s = damaged_copy(sweep, tmp_path, damage)
    runs, jobs, sc = collect(s)
    assert runs.num_rows == 3 and jobs.num_rows == 3 * 60
    assert len(sc.damaged) == 1 and why in sc.damaged[0][1] and "1 damaged" in sc.report()


def test_a_run_recorded_before_output_hashes_with_a_garbage_parquet_is_damaged(sweep, tmp_path):
    def damage(s, r):
        meta = json.loads((r[1] / "run.json").read_text())
        del meta["outputs"]
        (r[1] / "run.json").write_text(json.dumps(meta))
        (r[1] / "jobs.parquet").write_bytes(b"PAR1garbage")
    runs, _, sc = collect(damaged_copy(sweep, tmp_path, damage))
    assert runs.num_rows == 3 and "an output is unreadable" in sc.damaged[0][1]


def test_a_sweep_json_that_is_not_json_is_reported_and_the_runs_collected(sweep, tmp_path):
    s = damaged_copy(sweep, tmp_path, lambda s, r: (s / "sweep.json").write_text("nojson"))
    runs, _, sc = collect(s)
    assert runs.num_rows == 4 and "sweep.json: not a sweep manifest" in sc.report()


def test_collect_and_plot_commands_go_on_past_damaged_runs(sweep, tmp_path):
    def damage(s, r):
        (r[0] / "run.json").write_text("[]")
        (r[1] / "jobs.parquet").write_bytes(b"junk")
        (s / "sweep.json").write_text("{")
    s = damaged_copy(sweep, tmp_path, damage)
    c = subprocess.run([sys.executable, "-m", "clustersim.collect", str(s)], capture_output=True, text=True)
    assert c.returncode == 0 and "2 complete runs, 120 job rows" in c.stdout and "Traceback" not in c.stderr
    assert "2 damaged" in c.stderr
    strict = subprocess.run([sys.executable, "-m", "clustersim.collect", str(s), "--strict"], capture_output=True)
    assert strict.returncode == 1
    p = subprocess.run([sys.executable, "-m", "clustersim.plot", str(s), "--format", "png"], capture_output=True,
                       text=True)
    assert p.returncode == 0 and "Traceback" not in p.stderr and (s / "plots" / "jct_cdf.png").is_file()


def test_a_sweep_reruns_a_damaged_run(sweep, tmp_path):
    s = damaged_copy(sweep, tmp_path, lambda s, r: (r[0] / "jobs.parquet").unlink())
    p = clustersim("-m", "policy=fifo,tiresias", "seed=0,1", f"hydra.sweep.dir={s}", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.count("complete: skipped") == 3, p.stdout
    assert len(collect(s)[2].complete) == 4


# --- bounds and bad values, checked before the run: one line naming the key


@pytest.mark.parametrize("overrides, needle", [
    (["trace=synthetic_philly", "trace.options.jobs=-5"], "trace.options.jobs: must be >= 1, got -5"),
    (["trace=synthetic_philly", "trace.options.jobs=10000001"], "trace.options.jobs: must be <= 1e+07"),
    (["cluster.groups=[{count:0,gpus:4,cpus:32,mem:256}]"], "cluster.groups: no nodes"),
    (["cluster.groups=[{count:100000000,gpus:4,cpus:32,mem:256}]"], "cluster.groups: 100,000,000 nodes"),
    (["until=0"], "until: must be > 0, got 0"),
    (["trace=synthetic_dlrover", "trace.options.mix={wide_deep:0,deepfm:0,xdeepfm:0}"], "trace.options.mix: weights"),
    (["trace=synthetic_dlrover", "trace.options.mix={wide_deep:-1,deepfm:2,xdeepfm:0}"], "trace.options.mix: weights"),
    (["trace=synthetic_dlrm", "trace.options.mix={wide_deep:0,deepfm:0,xdeepfm:0,dcn:0}"], "trace.options.mix: weights"),
    (["profile.files=[/nonexistent.yaml]"], "profile.files[0]: /nonexistent.yaml: no such file"),
    (["trace=synthetic_dlrm", "trace.options.users=1000000000000"], "trace.options.users: must be <="),
])
def test_bad_sizes_and_values_are_one_line_errors_before_the_run(tmp_path, overrides, needle):
    assert needle in error_of(overrides, tmp_path)
    assert not (tmp_path / "run" / "jobs.parquet").exists()


def test_an_alibaba_task_of_1e11_gpus_under_auto8_is_refused_by_the_node_limit(tmp_path):
    src = Path(__file__).resolve().parents[1] / "traces" / "data" / "samples" / "alibaba_pai2020"
    for f in ("pai_job_table.csv", "pai_task_table.csv"):
        shutil.copy(src / f, tmp_path / f)
    task = tmp_path / "pai_task_table.csv"
    task.write_text(task.read_text().replace(",50.0,T4", ",1e11,T4", 1))
    msg = error_of(["trace=alibaba_pai2020", "cluster=auto8", f"trace.path={tmp_path / 'pai_job_table.csv'}",
                    f"trace.options.task_table={task}", "trace.options.instance_table=null",
                    "trace.options.group_tag_table=null"], tmp_path)
    assert msg.startswith("cluster.auto: the trace needs 1e+09 GPUs") and "limit of 100,000 nodes" in msg


@pytest.mark.parametrize("overrides", [
    ["policy.name=nosuch"],
    ["policy=tiresias", "policy.thresholds=[7200,3250]"],
    ["policy=elastic_tiresias", "policy.min_fraction=1e12"],
    ["policy=dlrover", "policy.generations=1000000000000"],
    ["policy=dlrover", "policy.pop_size=1000000000000"],
])
def test_bad_policy_parameters_are_config_errors_naming_the_key(overrides, tmp_path):
    key = overrides[-1].split("=")[0]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_engine(compose(overrides))


def test_the_command_prints_one_line_for_a_bad_size(tmp_path):
    p = clustersim("trace=synthetic_philly", "trace.options.jobs=-5", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    one_line_error(p, "trace.options.jobs: must be >= 1")


# --- hangs and blow-ups


def test_the_efficiency_of_a_100000_gpu_job_is_searched_over_a_bounded_set_of_sizes(tmp_path):
    from clustersim.simulator.metrics import EXACT_SIZES, _sizes

    sizes = _sizes(100_000)
    assert sizes[:EXACT_SIZES] == list(range(1, EXACT_SIZES + 1)) and sizes[-1] == 100_000
    assert len(sizes) < 400   # it evaluated all 100,000 sizes, each over up to 12,500 nodes: > 120 s
    assert _sizes(12) == list(range(1, 13))   # small jobs: every size, as before
    trace = tmp_path / "big.csv"
    trace.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n"
                     "0,100000,0,606,vgg19,164,30\r\n1,8,30,133,vgg11,147,23\r\n")
    summary, _ = run(compose([f"trace.path={trace}", "cluster=auto8"]), tmp_path / "r")
    assert summary["jobs_finished"] == 2 and 0 < summary["gpu_efficiency_mean"] <= 1


def test_duration_0_through_the_python_api_is_a_trace_error_not_a_division_by_zero():
    cfg = compose(["profile=linear"])
    table, _ = load_trace(cfg.trace)
    for col in ("duration", "iterations"):
        values = table[col].to_pylist()
        values[0] = 0.0
        table = table.set_column(table.schema.get_field_index(col), col, pa.array(values, pa.float64()))
    with pytest.raises(TraceError, match=r"row 0 \(job '0'\): duration must be a finite number > 0, got 0.0"):
        build_engine(cfg, table)


# --- the trace cache, the run directory, the file-size limit


def test_a_cache_that_cannot_be_made_runs_uncached_with_a_warning(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    summary, _ = run(compose([f"trace.cache.dir={tmp_path / 'file' / 'cache'}"]), tmp_path / "r")
    assert summary["jobs_finished"] == 60
    assert "is not writable: bundled:tiresias/60_job.csv is read without storing it" in capsys.readouterr().err
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["trace"]["sources"][0]["cache"] == "not writable"


def test_a_read_only_cache_serves_its_entries_and_a_miss_runs_uncached(tmp_path, capsys, monkeypatch):
    from clustersim.traces import cache

    cfg = compose([f"trace.cache.dir={tmp_path / 'c'}"])
    run(cfg, tmp_path / "r1")
    monkeypatch.setattr(cache.os, "access", lambda *a: False)   # as a read-only folder answers (not as root)
    run(cfg, tmp_path / "r2")
    assert json.loads((tmp_path / "r2" / "run.json").read_text())["trace"]["sources"][0]["cache"] == "hit"
    other = tmp_path / "t.csv"   # another trace: not in the cache
    other.write_bytes(TIRESIAS.read_bytes() + b"61,1,9000,10,vgg19,10,1\r\n")
    summary, _ = run(compose([f"trace.cache.dir={tmp_path / 'c'}", f"trace.path={other}"]), tmp_path / "r3")
    assert summary["jobs_finished"] == 61 and "is not writable" in capsys.readouterr().err
    assert len(list((tmp_path / "c").glob("*.parquet"))) == 1


@pytest.mark.parametrize("where", ["/proc/x/run", "{tmp}/file/run"])
def test_a_run_directory_that_cannot_be_written_is_one_line(tmp_path, where):
    (tmp_path / "file").write_text("x")
    d = where.format(tmp=tmp_path)
    one_line_error(clustersim(f"hydra.run.dir={d}", cwd=tmp_path), "hydra.run.dir", d, "cannot write there")
    one_line_error(clustersim("-m", "seed=0", f"hydra.sweep.dir={d}", cwd=tmp_path), "hydra.sweep.dir", d)


def test_a_file_size_limit_names_the_file(tmp_path):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    p = clustersim(f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, preexec_fn=limit)
    one_line_error(p, "jobs.parquet: cannot write", "File too large")
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "failed"
    assert not (tmp_path / "r" / "jobs.parquet").exists()


# --- DLRover's job history


def test_dlrovers_history_is_the_runs_own_by_default():
    assert compose(["policy=dlrover"]).policy.history is None
    assert compose(["+experiment=dlrover_cluster", "policy=dlrover"]).policy.history is None


def _history_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    import sqlite3

    good = tmp_path / "good.sqlite"
    with sqlite3.connect(good) as c:
        c.execute("CREATE TABLE t (a INTEGER)")
        c.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(2000)])
    (tmp_path / "truncated.sqlite").write_bytes(good.read_bytes()[:5000])
    with sqlite3.connect(tmp_path / "schema.sqlite") as c:
        c.execute("CREATE TABLE jobs (a INTEGER)")
    (tmp_path / "text.sqlite").write_text("hello\n")
    (tmp_path / "corrupt.sqlite").write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    return {"corrupt": (tmp_path / "corrupt.sqlite", "not a database"),
            "text": (tmp_path / "text.sqlite", "file is not a database"),
            "truncated": (tmp_path / "truncated.sqlite", "malformed"),
            "wrong schema": (tmp_path / "schema.sqlite", "no such column"),
            "a folder": (tmp_path / "folder", "is a folder"),
            "/proc": (Path("/proc/self/h.sqlite"), "unable to open"),
            "/proc file": (Path("/proc/version"), "unable to open"),
            "under a file": (tmp_path / "file" / "h.sqlite", "a folder on its path is a file"),
            "unreachable": (Path("/proc/x/h.sqlite"), "No such file or directory")}


def test_a_bad_history_path_is_one_config_error_naming_policy_history(tmp_path):
    from clustersim.policies.dlrover_history import History

    for name, (path, reason) in _history_cases(tmp_path).items():
        with pytest.raises(ConfigError) as e:
            History(path)
        assert str(e.value).startswith(f"policy.history: {path}: cannot use it") and reason in str(e.value), name


def test_a_read_only_history_is_refused_at_open_not_mid_run(tmp_path, monkeypatch):
    import sqlite3

    import clustersim.policies.dlrover_history as mod

    mod.History(tmp_path / "h.sqlite").close()
    connect = sqlite3.connect   # opened read-only, as a read-only file is (permissions do not bind root)
    monkeypatch.setattr(mod.sqlite3, "connect", lambda path, **kw: connect(f"file:{path}?mode=ro", uri=True, **kw))
    with pytest.raises(ConfigError, match="policy.history: .*h.sqlite: cannot use it .*readonly"):
        mod.History(tmp_path / "h.sqlite")


def test_the_command_names_a_bad_history_in_one_line(tmp_path):
    (tmp_path / "h.sqlite").write_text("not sqlite")
    p = clustersim("policy=dlrover", "trace=synthetic_dlrover", "trace.options.jobs=3", "cluster=cpu_ps",
                   f"policy.history={tmp_path / 'h.sqlite'}", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    one_line_error(p, "policy.history:", "h.sqlite", "file is not a database")


# --- clustersim-calibrate: strict keys, one line for a bad value (no torch needed to check)


CALIBRATE_BAD = [
    ("+nosuch=1", "nosuch: unknown key"), ("+ps.nosuch=1", "ps.nosuch: unknown key"),
    ("device=tpu", "device: must be one of"), ("start_method=thread", "start_method: must be one of"),
    ("timeout_s=0", "timeout_s: must be > 0"), ("timeout_s=abc", "timeout_s: must be a number"),
    ("lr=-1", "lr: must be > 0"), ("plot=maybe", "plot:"), ("progress=2", "progress:"), ("pin=maybe", "pin:"),
    ("dataparallel.workers=[0]", "dataparallel.workers[0]: must be >= 1"),
    ("dataparallel.workers=[1000000000000]", "dataparallel.workers[0]: must be <= 1024"),
    ("dataparallel.batch=[-1]", "dataparallel.batch[0]"), ("dataparallel.steps=0", "dataparallel.steps"),
    ("dataparallel.profile_batch=-3", "dataparallel.profile_batch"),
    ("ps.mode=both", "ps.mode"), ("ps.p=[0]", "ps.p[0]: must be >= 1"), ("ps.w=abc", "ps.w"),
    ("ps.threads.ps=0", "ps.threads.ps: must be >= 1"), ("ps.batch=1e300", "ps.batch"),
    ("overhead.sizes=[[3,2]]", "overhead.sizes[0]: a rescale"), ("overhead.sizes=[[1]]", "overhead.sizes[0]"),
    ("convergence.threshold=-0.1", "convergence.threshold"), ("convergence.max_epochs=0", "convergence.max_epochs"),
    ("fit.test_fraction=2", "fit.test_fraction: must be < 1"), ("fit.repeats=0", "fit.repeats"),
    ("model.name=foo", "model.name: unknown calibration model 'foo'"),
    ("model=custom", "model.import_path: must be 'package.module:function'"),
    ("model.params.samples=-4", "model.params.samples"), ("model.params.hidden=[0]", "model.params.hidden"),
]


def test_calibrate_config_check_names_each_bad_key():
    from hydra import compose as hydra_compose, initialize_config_module

    from clustersim.simulator.calibration.config import check

    with initialize_config_module(config_module="clustersim.configs.calibrate", version_base=None):
        from omegaconf import OmegaConf

        check(OmegaConf.to_container(hydra_compose("config"), resolve=True))   # the defaults pass
        for override, needle in CALIBRATE_BAD:
            with pytest.raises(ConfigError) as e:
                check(OmegaConf.to_container(hydra_compose("config", overrides=[override]), resolve=True))
            assert needle in str(e.value) and "\n" not in str(e.value), (override, str(e.value))


def test_calibrate_pin_with_more_threads_than_its_one_core_is_one_line():
    from hydra import compose as hydra_compose, initialize_config_module
    from omegaconf import OmegaConf

    from clustersim.simulator.calibration.config import check

    with initialize_config_module(config_module="clustersim.configs.calibrate", version_base=None):
        for over, needle in ((["pin=true", "dataparallel.threads=2"], "dataparallel.threads: pin"),
                             (["pin=true", "ps.threads.worker=4"], "ps.threads.worker: pin")):
            with pytest.raises(ConfigError) as e:
                check(OmegaConf.to_container(hydra_compose("config", overrides=over), resolve=True))
            assert needle in str(e.value) and "\n" not in str(e.value)
        check(OmegaConf.to_container(hydra_compose("config", overrides=["pin=true"]), resolve=True))


def test_calibrate_command_refuses_an_unknown_key_in_one_line(tmp_path):
    one_line_error(clustersim("+nosuch=1", f"out={tmp_path / 'cal'}", cwd=tmp_path,
                              prog="clustersim.simulator.calibration.cli"), "nosuch: unknown key")
    assert not (tmp_path / "cal" / "points.jsonl").exists()
    one_line_error(clustersim("out=/proc/x", cwd=tmp_path, prog="clustersim.simulator.calibration.cli"),
                   "out /proc/x: cannot write there")


def test_a_killed_loads_rejects_spool_is_removed_when_the_entry_is_next_built(tmp_path):
    from clustersim.traces import cache

    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / f".k1.{dead.pid}.rejects.csv").write_text("x")   # a load killed mid-way (it once left 940 MB)
    (tmp_path / f".k1.{os.getpid()}.rejects.csv").write_text("x")   # a load still running
    (tmp_path / f".k2.{dead.pid}.rejects.csv").write_text("x")   # another entry's
    cache.remove_dead_spools(tmp_path, "k1")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".k1.{os.getpid()}.rejects.csv",
                                                          f".k2.{dead.pid}.rejects.csv"]
