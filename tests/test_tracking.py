"""The MLflow tracker callback logs a run's config, summary, provenance and files, through a
recording stand-in for the mlflow module (tests/fake_tracker.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clustersim.tracking import log_run, metrics, params

ROOT = Path(__file__).resolve().parent.parent


def calls(log: Path) -> list:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_params_flatten_the_config_and_metrics_keep_the_finite_numbers():
    assert params({"policy": {"name": "tiresias", "thresholds": [3200.0]}, "seed": 1, "until": None}) == \
        {"policy.name": "tiresias", "policy.thresholds": "[3200.0]", "seed": "1", "until": "null"}
    assert metrics({"jct_mean": 10.5, "jobs": 60, "deadline_ratio": None, "unfinished_jobs": [], "ok": True,
                    "x": float("nan")}) == {"jct_mean": 10.5, "jobs": 60.0}


def test_a_sweep_with_the_callback_logs_each_run(tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    sweep = tmp_path / "sweep"
    p = subprocess.run([sys.executable, "-m", "clustersim.cli", "-m", "policy=fifo,srtf", "progress=false",
                        f"hydra.sweep.dir={sweep}", "+hydra.callbacks.track._target_=clustersim.tracking.MLflowCallback",
                        "+hydra.callbacks.track.tracker=tests.fake_tracker", "+hydra.callbacks.track.experiment=study"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                                    "FAKE_TRACKER_LOG": str(log)})
    assert p.returncode == 0, p.stderr[-2000:]
    got = calls(log)
    runs = [c for c in got if c[0] == "start_run"]
    assert sorted(c[2]["run_name"].split("_")[0] for c in runs) == ["fifo", "srtf"]
    assert [c[1][0] for c in got if c[0] == "set_experiment"] == ["study", "study"]
    run_name = None
    for c in got:   # each start_run's metrics are the summary.json of the run of that name
        if c[0] == "start_run":
            run_name = c[2]["run_name"]
        elif c[0] == "log_metrics":
            assert c[1][0]["jct_mean"] == json.loads((sweep / run_name / "summary.json").read_text())["jct_mean"]
    assert {c[1][0]["policy.name"] for c in got if c[0] == "log_params"} == {"fifo", "srtf"}
    assert sorted(Path(c[1][0]).name for c in got if c[0] == "log_artifact") == \
        ["run.json", "run.json", "run.log", "run.log", "summary.json", "summary.json"]


def test_logging_a_directory_that_is_not_a_run_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run.json"):
        log_run(tmp_path, tracker=object())
