"""Sweeps as users run them: collection, launchers, resume after a kill, unique run directories."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from clustersim.collect import collect, read, scan
from clustersim.sweep import run_hash, run_name, safe

CLUSTER3 = "cluster.groups=[{count:3,gpus:4,cpus:40,mem:256}]"
SWEEP = ("-m", "policy=fifo,tiresias", "seed=0,1", CLUSTER3)
OUTPUTS = {"jobs.parquet", "timeline.parquet", "events.parquet", "tenants.parquet", "summary.json", "run.json",
           "run.log", ".hydra"}


def clustersim(*args, cwd, timeout=300, env=None):
    return subprocess.run([sys.executable, "-m", "clustersim.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def run_dirs(sweep: Path) -> dict[str, Path]:
    return {d.name: d for d in sweep.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name != "collected"}


@pytest.fixture(scope="module")
def serial_sweep(tmp_path_factory):
    """The 2 x 2 sweep (fifo, tiresias) x (seed 0, 1) on 12 GPUs, run serially."""
    root = tmp_path_factory.mktemp("serial")
    p = clustersim(*SWEEP, f"hydra.sweep.dir={root / 'sweep'}", cwd=root)
    assert p.returncode == 0, p.stderr
    return root / "sweep", p


def test_a_2x2_sweep_and_its_collection_give_one_row_per_run_with_overrides_and_the_real_cluster(serial_sweep):
    sweep, p = serial_sweep
    assert "4 runs: 4 complete, 0 failed, 0 incomplete, 0 missing" in p.stderr
    assert set(run_dirs(sweep)) == {f"{pol}_tiresias_60_s{s}_{run_hash([f'policy={pol}', f'seed={s}', CLUSTER3])}"
                                    for pol in ("fifo", "tiresias") for s in (0, 1)}
    for d in run_dirs(sweep).values():
        assert {f.name for f in d.iterdir()} == OUTPUTS
    runs, jobs, s = collect(sweep)
    assert (runs.num_rows, jobs.num_rows) == (4, 4 * 60) and not (s.failed or s.incomplete or s.missing)
    df = read(sweep / "collected", "runs")
    assert sorted(zip(df["policy"], df["seed"])) == [("fifo", 0), ("fifo", 1), ("tiresias", 0), ("tiresias", 1)]
    # the cluster the runs had, not the name of the config it was overridden from
    assert set(df["cluster"]) == {"3x4g"} and set(df["cluster_config"]) == {"n2g4"}
    assert set(df["cluster_nodes"]) == {3} and set(df["cluster_gpus"]) == {12.0} and set(df["cluster_gpus_generic"]) == {12.0}
    assert set(df["cluster.groups"]) == {json.dumps([{"count": 3, "cpus": 40, "gpus": 4, "mem": 256}])}
    assert set(df["experiment"]) == {"sweep"} and df["version"].notna().all()
    for col in ("jct_mean", "waiting_time_mean", "ftf_rho_mean", "gpu_util_busy", "gpu_hours", "wall_time_s"):
        assert df[col].notna().all(), col
    # the datasets are partitioned by experiment and policy
    for name in ("runs", "jobs", "timelines", "tenants"):
        assert sorted(p.name for p in (sweep / "collected" / name / "experiment=sweep").iterdir()) == \
            ["policy=fifo", "policy=tiresias"]
    tl = read(sweep / "collected", "timelines")
    assert set(tl["run"]) == set(df["run"]) and {"time", "gpu_util", "pending"} <= set(tl.columns)
    # on this contended cluster the preemptive policy beats FIFO on mean JCT
    mean = df.groupby("policy")["jct_mean"].mean()
    assert mean["tiresias"] < mean["fifo"]


def results(sweep: Path) -> dict[str, bytes]:
    out = {}
    for name, d in run_dirs(sweep).items():
        for f in ("jobs.parquet", "timeline.parquet", "events.parquet", "summary.json"):
            out[f"{name}/{f}"] = (d / f).read_bytes()
    return out


@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None,
                    reason="hydra-joblib-launcher not installed (pip install clustersim[joblib])")
def test_the_same_sweep_on_local_processes_with_joblib_gives_identical_results(serial_sweep, tmp_path):
    p = clustersim(*SWEEP, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={tmp_path / 's'}",
                   cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert results(tmp_path / "s") == results(serial_sweep[0])


@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None,
                    reason="ray / hydra-ray-launcher not installed (pip install clustersim[ray])")
def test_the_same_sweep_on_a_local_ray_cluster_gives_identical_results(serial_sweep, tmp_path):
    # a Ray cluster started by the launcher on loopback only, 2 CPUs, no dashboard, bounded in time
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    p = clustersim(*SWEEP, "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
                   "+hydra.launcher.ray.init._node_ip_address=127.0.0.1",
                   "+hydra.launcher.ray.init.include_dashboard=false", f"hydra.sweep.dir={tmp_path / 's'}",
                   cwd=tmp_path, timeout=400, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert results(tmp_path / "s") == results(serial_sweep[0])


def test_a_sweep_killed_mid_way_resumes_without_redoing_finished_runs_or_mixing_files(tmp_path):
    sweep = tmp_path / "s"
    args = [sys.executable, "-m", "clustersim.cli", "-m", "policy=fifo,srtf,sjf,tiresias",
            f"hydra.sweep.dir={sweep}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and not (sweep.is_dir() and scan(sweep).complete):
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)   # the process this test started
        proc.wait()
    before = scan(sweep)
    assert 1 <= len(before.complete) < 4, before.report()
    assert len(before.incomplete) + len(before.missing) == 4 - len(before.complete) - len(before.failed)
    done = {d: (d / "run.json").read_bytes() for d in before.complete}
    stamp = {d: (d / "summary.json").stat().st_mtime_ns for d in before.complete}
    for d in before.incomplete:   # leftovers of an older attempt must not survive the redo
        (d / "jobs.parquet").write_text("from the killed attempt")

    p = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("complete: skipped") == len(before.complete)
    after = scan(sweep)
    assert len(after.complete) == 4 and not (after.failed or after.incomplete or after.missing)
    for d in before.complete:   # not redone
        assert (d / "run.json").read_bytes() == done[d] and (d / "summary.json").stat().st_mtime_ns == stamp[d]
    for d in after.complete:
        assert {f.name for f in d.iterdir()} == OUTPUTS, d
        assert len(pd.read_parquet(d / "jobs.parquet")) == 60
    assert not [d for d in sweep.iterdir() if d.name.startswith(".")]   # no staging directory left


def test_concurrent_runs_in_the_same_second_keep_separate_directories(tmp_path):
    cmds = [["seed=0"], ["seed=1"], ["seed=0"], ["seed=0", "policy=tiresias"]]
    procs = [subprocess.Popen([sys.executable, "-m", "clustersim.cli", "progress=false", *c], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in cmds]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    dirs = sorted((tmp_path / "runs").iterdir())
    assert len(dirs) == 4
    s = scan(tmp_path / "runs")
    assert len(s.complete) == 4
    seeds = sorted(json.loads((d / "run.json").read_text())["config"]["seed"] for d in dirs)
    assert seeds == [0, 0, 0, 1]


def test_swept_values_never_become_paths(tmp_path):
    name = run_name("../p", "a/b", 0, ["trace.path=../../t.csv"])
    assert "/" not in name and not name.startswith(".") and ".." not in name.split("_")[0]
    assert safe("../../etc") == "etc" and safe("") == "x"
    trace = tmp_path / "t.csv"
    trace.write_text((Path(__file__).parent.parent / "traces/data/tiresias/60_job.csv").read_text())
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    p = clustersim("-m", "trace.path=../../t.csv,bundled:tiresias/60_job.csv", "hydra.sweep.dir=sw", cwd=work)
    assert p.returncode == 0, p.stderr
    dirs = run_dirs(work / "sw")
    assert len(dirs) == 2 and all(d.parent == work / "sw" for d in dirs.values())
    a, b = (pd.read_parquet(d / "jobs.parquet") for d in dirs.values())
    assert a["jct"].tolist() == b["jct"].tolist()   # the same file by two paths: the same results


def test_failed_runs_do_not_stop_a_sweep_and_collect_lists_them(tmp_path):
    sweep = tmp_path / "s"
    p = clustersim("-m", "until=-5,1000,-6", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert p.returncode == 1
    assert p.stderr.count("clustersim: error: until: must be > 0") == 2
    assert "3 runs: 1 complete, 2 failed, 0 incomplete, 0 missing" in p.stderr
    c = subprocess.run([sys.executable, "-m", "clustersim.collect", str(sweep)], capture_output=True, text=True)
    assert c.returncode == 0
    assert "1 complete runs, 60 job rows" in c.stdout
    assert "WARNING: 2 run(s) left out of the dataset (2 failed, 0 incomplete, 0 missing, 0 damaged)" in c.stderr
    assert c.stderr.count("until: must be > 0, got -") == 2
    strict = subprocess.run([sys.executable, "-m", "clustersim.collect", "--strict", str(sweep)], capture_output=True)
    assert strict.returncode == 1
    # a run the sweep asked for that never got a directory is missing
    for d in run_dirs(sweep).values():
        if json.loads((d / "run.json").read_text())["status"] == "failed":
            import shutil
            shutil.rmtree(d)
    assert len(scan(sweep).missing) == 2
