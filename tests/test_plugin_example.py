"""The example plug-in (examples/clustersim-ljf) installed as an outside package: its policy,
trace format and configs are found through entry points alone, ``clustersim policy=ljf
trace=sacct`` runs it, ``--help`` lists it, and its policy passes the conformance suite.

It is installed once per session, with pip, into a folder of its own (not this environment:
the rest of the suite sees only clustersim's own components), which the commands here put on
their ``PYTHONPATH``; pip builds it as a user's ``pip install`` would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "clustersim-ljf"
CLI = [sys.executable, "-c", "from clustersim.cli import entry; entry()"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(EXAMPLE)],
                   check=True, capture_output=True, text=True, timeout=300)
    return target


def _env(site: Path) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def _python(site: Path, code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], env=_env(site), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_the_plugin_runs_from_the_command_line(site, tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run([*CLI, "policy=ljf", "trace=sacct", f"hydra.run.dir={run_dir}"], env=_env(site),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "policy=ljf trace=sacct" in p.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["jobs_finished"] == 12 and summary["jobs_unfinished"] == 0
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and run["config"]["policy"]["name"] == "ljf"
    jobs = pq.read_table(run_dir / "jobs.parquet").to_pydict()
    start = dict(zip(jobs["job_id"], jobs["first_start"]))
    submit = dict(zip(jobs["job_id"], jobs["submit_time"]))
    # The default cluster, n2g4: 2 nodes x 4 GPUs. At 09:00:00 jobs 4101 (1 GPU) and 4102 (4 GPUs)
    # arrive together and start at once (5 of 8 GPUs). 4104 (8 GPUs, 09:10:00) waits for the whole
    # cluster; 4105 (2 GPUs, 09:12:30) fits beside it and starts on arrival (backfill). 4104 starts
    # at 14:30:00 = 09:00:00 + 5 h 30 min = 19,800 s, when 4102 ends: the jobs backfilled after it
    # have all ended by then (the last, 4109, 4 GPUs from 13:27:30 for 50 min, at 14:17:30).
    t0 = submit["4101"]
    assert start["4101"] == start["4102"] == t0
    assert start["4105"] == submit["4105"] == t0 + 12 * 60 + 30
    assert start["4104"] == t0 + 19_800.0
    assert start["4109"] + 50 * 60 < start["4104"]


def test_help_lists_the_plugin_and_its_configs(site):
    p = subprocess.run([*CLI, "--help"], env=_env(site), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "   ljf " in out and "Largest job first (plug-in clustersim-ljf)" in out
    assert "   sacct " in out and "Slurm sacct export (plug-in clustersim-ljf)" in out
    assert "  clustersim-ljf: policy ljf, trace format sacct, configs" in out


def test_the_plugin_components_are_registered_with_their_defaults(site):
    out = _python(site, "from clustersim import policies, traces\n"
                        "e = policies.base.POLICIES.get('ljf')\n"
                        "print(e.doc); print(e.defaults); print('sacct' in traces.formats())")
    assert out.splitlines() == ["Largest job first: the most GPUs first, no preemption, optional backfill.",
                                "{'placement': 'first_fit', 'backfill': True}", "True"]


def test_the_plugin_policy_conforms_and_its_config_does_not_drift(site):
    _python(site, "import yaml\n"
                  "from clustersim.conformance import check_policy\n"
                  "from clustersim.plugins import config_dir\n"
                  "from clustersim_ljf.policy import LargestJobFirst\n"
                  "check_policy(LargestJobFirst, examples=5)\n"
                  "cfg = yaml.safe_load((config_dir('clustersim_ljf.configs') / 'policy' / 'ljf.yaml').read_text())\n"
                  "del cfg['name'], cfg['decision_interval']\n"
                  "from clustersim.policies.base import POLICIES\n"
                  "assert cfg == POLICIES.get('ljf').defaults, cfg\n")


def test_a_bad_plugin_parameter_is_one_line(site, tmp_path):
    p = subprocess.run([*CLI, "policy=ljf", "trace=sacct", "policy.backfill=maybe", f"hydra.run.dir={tmp_path}"],
                       env=_env(site), capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip() == "clustersim: error: policy.backfill: must be true or false, got 'maybe'"


def test_a_bad_sacct_row_names_the_file_line_and_field(site, tmp_path):
    bad = tmp_path / "sacct.csv"
    bad.write_text("JobID|User|Submit|Elapsed|State|AllocTRES\n"
                   "1|a|2025-03-03T09:00:00|01:00:00|COMPLETED|cpu=8,gres/gpu=1\n"
                   "1.batch|a|2025-03-03T09:00:00|01:00:00|COMPLETED|cpu=8\n")
    p = subprocess.run([*CLI, "policy=ljf", "trace=sacct", f"trace.path={bad}", f"hydra.run.dir={tmp_path / 'r'}"],
                       env=_env(site), capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip() == (f"clustersim: error: {bad}: line 3: field 'JobID': '1.batch' is a job step; "
                                "export allocations only (sacct -X)")
