"""Faults end to end: every registered policy passes the conformance suite with faults on, and
runs from the command-line config (faults=dlrover_cloud, faults=philly_replay) end with every job
finished or failed, with the fault metrics in jobs.parquet and summary.json."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from clustersim import policies
from clustersim.conformance import check_policy
from clustersim.experiment import compose, run


# the package's policies (other test modules register deliberately broken ones)
SHIPPED = [n for n in policies.names() if policies.get(n).__module__.startswith("clustersim.policies.")]


@pytest.mark.parametrize("name", SHIPPED)
def test_registered_policy_conforms_with_faults(name):
    check_policy(policies.get(name), examples=6, faults=True, determinism=name == "fifo")


def test_harsh_faults_really_fail_jobs_in_the_suite():
    from clustersim.conformance import FAULTS, contention_case, run_case
    from dataclasses import replace
    out = run_case(policies.get("fifo"), replace(contention_case(frozenset()), faults=FAULTS))
    s = out.recorder.summary()
    assert s["failures"] > 0 and s["jobs_finished"] + s["jobs_failed"] == s["jobs"]


@pytest.mark.parametrize("policy", ["fifo", "tiresias", "drf"])
def test_dlrover_cloud_on_ps_jobs(tmp_path, policy):
    cfg = compose(["trace=synthetic_dlrover", "cluster=cpu_ps", f"policy={policy}", "faults=dlrover_cloud",
                   "overhead=dlrover_flash", "trace.options.jobs=30", "progress=false"])
    summary, rec = run(cfg, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["jobs_unfinished"] == 0 and on_disk["jobs_finished"] + on_disk["jobs_failed"] == 30
    assert on_disk["completion_rate"] == on_disk["jobs_finished"] / 30
    jobs = pq.read_table(tmp_path / "jobs.parquet").to_pydict()
    assert set(jobs["status"]) <= {"finished", "failed"}
    assert sum(jobs["failures_oom"]) == on_disk["failures_by_cause"]["oom"]
    assert sum(jobs["lost_gpu_s"]) == pytest.approx(on_disk["lost_gpu_s"])


def test_philly_replay_fails_recorded_failures(tmp_path):
    cfg = compose(["trace=philly", "trace.path=bundled:samples/philly/cluster_job_log", "faults=philly_replay",
                   "trace.oversize=drop", "progress=false"])
    summary, rec = run(cfg, tmp_path)
    from clustersim.experiment import load_trace
    table, _ = load_trace(compose(["trace=philly", "trace.path=bundled:samples/philly/cluster_job_log"])["trace"])
    status = dict(zip(table["job_id"].to_pylist(), table["status"].to_pylist()))
    jobs = pq.read_table(tmp_path / "jobs.parquet").to_pydict()
    for jid, st in zip(jobs["job_id"], jobs["status"]):
        assert st == ("failed" if status[jid] == "failed" else "finished"), jid
    assert summary["jobs_failed"] == sum(1 for j in jobs["job_id"] if status[j] == "failed") > 0
