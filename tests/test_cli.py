"""The `clustersim` command end to end on bundled traces."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest


def clustersim(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clustersim.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_run_on_the_tiresias_trace_writes_outputs_and_prints_the_summary(tmp_path):
    out = tmp_path / "run"
    p = clustersim("policy=fifo", "trace=tiresias_60", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "jobs finished            60 / 60" in p.stdout
    for name in ("jobs.parquet", "timeline.parquet", "events.parquet", "summary.json", "run.json"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    jobs = pq.read_table(out / "jobs.parquet").to_pandas()
    assert summary["jobs_finished"] == len(jobs) == 60
    assert summary["jct_mean"] == pytest.approx(jobs["jct"].mean())
    assert summary["makespan"] == pytest.approx(jobs["end_time"].max() - jobs["submit_time"].min())
    assert (jobs["jct"] >= jobs["duration_alone"] - 1e-9).all()
    assert (jobs["queueing_delay"] >= 0).all()
    assert set(jobs.columns) >= {"job_id", "submit_time", "first_start", "end_time", "jct", "queueing_delay",
                                 "gpu_seconds", "preemptions", "rescales", "overhead_s", "status"}


def test_same_config_gives_byte_identical_outputs(tmp_path):
    outs = []
    for i in range(2):
        out = tmp_path / f"r{i}"
        p = clustersim("trace=elasticflow_raw", "cluster=auto8", f"hydra.run.dir={out}", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        outs.append(out)
    for name in ("jobs.parquet", "timeline.parquet", "events.parquet", "summary.json"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


def test_multirun_sweeps_seeds(tmp_path):
    sweep = tmp_path / "sweep"
    p = clustersim("-m", "policy=fifo", "seed=0,1", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    runs = sorted(d for d in sweep.iterdir() if (d / "summary.json").exists())
    assert len(runs) == 2
    assert [json.loads((d / "run.json").read_text())["config"]["seed"] for d in runs] == [0, 1]


def test_bad_choice_is_a_clear_error(tmp_path):
    p = clustersim("policy.name=nosuch", f"hydra.run.dir={tmp_path / 'x'}", cwd=tmp_path)
    assert p.returncode != 0
    assert "unknown policy 'nosuch'" in p.stderr


def test_collect_gathers_a_sweep_into_one_dataset(tmp_path):
    from clustersim.collect import collect, read
    sweep = tmp_path / "sweep"
    p = clustersim("-m", "policy.backfill=false,true", "seed=0,1", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (sweep / "interrupted" / ".hydra").mkdir(parents=True)   # started, killed before run.json
    runs, jobs, s = collect(sweep)
    assert runs.num_rows == 4 and jobs.num_rows == 4 * 60
    assert s.incomplete == [sweep / "interrupted"]
    df = read(sweep / "collected", "runs")
    assert sorted(df["seed"]) == [0, 0, 1, 1]
    assert set(df["policy"]) == {"fifo"}
    assert sorted(df["policy.backfill"]) == [False, False, True, True]   # a swept parameter is a column


def test_help_lists_every_group_with_its_choices_and_the_next_commands(tmp_path):
    p = clustersim("--help", cwd=tmp_path)
    assert p.returncode == 0
    for line in ("trace=", "cluster=", "policy=", "overhead=", "profile=", "clustersim-collect", "clustersim-plot",
                 "clustersim-trace-info"):
        assert line in p.stdout, line
    assert "  *fifo" in p.stdout and "  *n2g4" in p.stdout and "  *tiresias_60" in p.stdout
    philly = next(line for line in p.stdout.splitlines() if line.strip().startswith("philly "))
    assert "hand-made SAMPLE" in philly


def test_trace_info_gives_the_offered_load_on_a_cluster(tmp_path):
    p = subprocess.run([sys.executable, "-m", "clustersim.trace_info", "cluster=n32g4"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # 60 jobs, 7.4 GPU-hours; 128 GPUs over the 0.91 h from first arrival to last end: 6% busy
    assert "jobs                       60" in p.stdout and "GPU-hours                  7.4" in p.stdout
    assert "offered load               0.06" in p.stdout
    default = subprocess.run([sys.executable, "-m", "clustersim.trace_info"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
    assert "offered load               1.02" in default.stdout   # the default experiment is contended


def test_run_json_records_version_commit_overrides_and_the_cluster(tmp_path):
    out = tmp_path / "run"
    p = clustersim("seed=3", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete" and meta["version"] == "0.1.0" and "git_commit" in meta
    assert meta["overrides"] == ["seed=3"]   # hydra.* overrides are Hydra's, not the run's
    assert meta["cluster"] == {"shape": "2x4g", "nodes": 2, "gpus": 8.0, "cpus": 80.0, "mem": 512.0,
                               "gpus_by_type": {"generic": 8.0}}


def test_summary_slowdown_is_jct_over_the_duration_alone(tmp_path):
    out = tmp_path / "run"
    p = clustersim("cluster.groups=[{count:2,gpus:4,cpus:40,mem:256}]", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    summary = json.loads((out / "summary.json").read_text())
    jobs = pq.read_table(out / "jobs.parquet").to_pandas()
    slowdown = jobs["jct"] / jobs["duration_alone"]
    assert summary["slowdown_mean"] == pytest.approx(slowdown.mean())
    assert summary["slowdown_mean"] > 1.5  # 60 jobs on 8 GPUs queue
    assert "slowdown mean / p95" in p.stdout


@pytest.mark.parametrize("override, message", [
    ("+polcy=x", "clustersim: error: polcy: unknown key; valid keys: cluster, faults, limits, observe, overhead, policy"),
    ("policy.backfill=no", "clustersim: error: policy.backfill: must be true or false, got 'no'"),
    ("overhead.resume_s=-1", "clustersim: error: overhead.resume_s: must be >= 0"),
    ("until=nan", "clustersim: error: until: must be a finite number, got nan"),
    ("cluster.groups=[{count:2.5,gpus:4,cpus:4,mem:4}]", "cluster.groups[0].count: must be an integer, got 2.5"),
])
def test_bad_config_values_exit_non_zero_naming_the_key(tmp_path, override, message):
    p = clustersim(override, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert p.returncode == 1
    assert message in p.stderr
    assert not (tmp_path / "run" / "summary.json").exists()


def test_a_runaway_policy_ends_within_seconds_with_a_message(tmp_path):
    p = clustersim("policy=tiresias", "policy.thresholds=[5]", "policy.starvation_knob=2", "overhead=constant30",
                   "cluster.groups=[{count:2,gpus:4,cpus:40,mem:256}]", "trace.oversize=drop",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert p.returncode == 1
    assert "clustersim: error: policy 'tiresias': livelock: 2,000 decisions in a row" in p.stderr


def composing(args: list[str], cwd: Path, hydras_own: bool = False) -> int:
    """Run the command in a fresh interpreter; the number of configs Hydra composed. With
    ``hydras_own``, Hydra composes as it does without clustersim.cli._compose_once."""
    code = ("import sys\n"
            "from hydra._internal.config_loader_impl import ConfigLoaderImpl as L\n"
            "n, impl = [0], L._load_configuration_impl\n"
            "def counted(self, *a, **k):\n    n[0] += 1\n    return impl(self, *a, **k)\n"
            "L._load_configuration_impl = counted\n"
            "import clustersim.cli as cli\n"
            + ("cli._compose_once = lambda multirun: None\n" if hydras_own else "")
            + f"sys.argv = ['clustersim', *{args!r}]\n"
            "try:\n    cli.entry()\nfinally:\n    print('COMPOSED', n[0])\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.rsplit("COMPOSED", 1)[1])


@pytest.mark.parametrize("args", [["policy=srtf", "limits.max_events=100000"], ["-m", "seed=0,1", "observe.samples_kept=4"]])
def test_a_run_composes_its_config_once_and_records_what_hydra_would(tmp_path, args):
    """Hydra alone composes the config once to learn the mode and again to run it."""
    dirs = {}
    for own in (False, True):
        out = tmp_path / f"own{own}"
        where = [f"hydra.sweep.dir={out}"] if "-m" in args else [f"hydra.run.dir={out}"]
        n = composing([*args, *where, "progress=false"], tmp_path, hydras_own=own)
        # a sweep: the sweep's config, then seed=0's; seed=1's is made from seed=0's (the sweeper)
        assert n == (2 if own else 1) + (1 if "-m" in args else 0)
        dirs[own] = out
    files = sorted(p.relative_to(dirs[True]) for p in dirs[True].rglob("*.yaml"))
    assert len(files) == (7 if "-m" in args else 3)   # .hydra/{config,hydra,overrides}.yaml per run; multirun.yaml
    for f in files:
        mine, hydras = (dirs[False] / f).read_text(), (dirs[True] / f).read_text()
        assert mine == hydras.replace(str(dirs[True]), str(dirs[False])), f


def test_cfg_job_and_version_answer_with_overrides_anywhere(tmp_path):
    for args in (["policy=tiresias", "--cfg", "job"], ["--cfg", "job", "policy=tiresias"]):
        p = clustersim(*args, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert "name: tiresias" in p.stdout and "hydra" not in p.stdout.split("\n")[0]
    p = clustersim("--version", cwd=tmp_path)
    from clustersim import __version__
    assert p.returncode == 0 and p.stdout.strip() == f"clustersim {__version__}"


def trace_info(*args, cwd):
    return subprocess.run([sys.executable, "-m", "clustersim.trace_info", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_trace_info_warns_of_oversize_jobs_missing_durations_and_a_seed_without_effect(tmp_path):
    p = trace_info("trace=elasticflow_raw", "cluster=n2g4", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # 2 of the 260 jobs ask for 16 GPUs; n2g4 has 8: every run would fail under oversize: error
    assert "warning: 2 of 260 job(s) can never fit this cluster (largest 16 GPUs" in p.stdout
    assert "every run fails" in p.stdout
    p = trace_info("trace=elasticflow_raw", "cluster=n2g4", "trace.oversize=drop", cwd=tmp_path)
    assert "runs drop them (trace.oversize=drop)" in p.stdout
    # Gavel gives iterations only: the durations come from the speed profiles, not a load of 0.00
    p = trace_info("trace=gavel", "cluster=n32g4", cwd=tmp_path)
    assert "offered load               0.00" not in p.stdout and "offered load               -" not in p.stdout
    assert "2,000 of 2,000 job(s) have no duration in the trace: theirs come from the speed profiles" in p.stdout
    # the Tiresias trace under the linear profile draws no random number: seeds change nothing
    p = trace_info("profile=linear", cwd=tmp_path)
    assert "warning: the seed changes nothing in this workload" in p.stdout
    # the CSV sample has jobs without a model: their profiles are drawn, so the seed matters
    assert "seed changes nothing" not in trace_info("trace=csv", cwd=tmp_path).stdout


def test_the_run_summary_warns_of_a_seed_without_effect_and_an_elastic_policy_that_never_rescaled(tmp_path):
    p = clustersim("policy=elastic_tiresias", "profile=linear", "observe.throughput_noise=0", "progress=false",
                   f"hydra.run.dir={tmp_path / 'r'}",
                   cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "warning: seed 0 has no effect" in p.stdout
    assert "warning: policy 'elastic_tiresias' is elastic but rescaled no job" in p.stdout
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert len(meta["warnings"]) == 2
    log = (tmp_path / "r" / "run.log").read_text()   # the run's own log holds what was printed
    assert log.startswith("clustersim: policy=elastic_tiresias") and "warning: seed 0 has no effect" in log
    assert "jobs finished            60 / 60" in log
    p = clustersim("policy=fifo", "progress=false", f"hydra.run.dir={tmp_path / 'f'}", cwd=tmp_path)
    assert "warning" not in p.stdout and json.loads((tmp_path / "f" / "run.json").read_text())["warnings"] == []
