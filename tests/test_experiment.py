"""One run from a config: unfinished jobs are reported, never silently ignored."""

import json

import pytest

from clustersim.experiment import compose, run
from clustersim.policies.base import Decision, Policy, register
from clustersim.simulator.errors import UnfinishedJobsError


@register
class _NeverPlacesPs(Policy):
    """Starts GPU jobs, never places the trace's first job: a policy whose placement fails."""

    name = "test_skip_first"

    def decide(self, view):
        free, out = view.cluster.free_gpus, {}
        for j in view.pending.values():
            if j.index > 0 and j.num_gpus <= free:
                out[j.job_id] = {"worker": {0: j.roles[0].count}}
                free -= j.num_gpus
        return Decision(out)


def test_a_run_with_unfinished_jobs_writes_its_outputs_then_fails_with_the_list(tmp_path):
    cfg = compose(["policy=fifo", "cluster.groups=[{count:1,gpus:4,cpus:40,mem:256}]", "trace.oversize=drop"])
    cfg.policy = {"name": "test_skip_first"}
    with pytest.raises(UnfinishedJobsError, match=r"job\(s\) never finished under policy 'test_skip_first' \(") as e:
        run(cfg, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["jobs_unfinished"] == e.value.summary["jobs_unfinished"] > 0
    first = summary["unfinished_jobs"][0]
    assert first["status"] == "pending"
    assert first["reason"].startswith("never started: policy 'test_skip_first' never placed it (worker ")


def test_until_ends_a_run_early_without_an_error(tmp_path):
    summary, _ = run(compose(["until=100"]), tmp_path)
    assert summary["sim_end_time"] == 100.0
    assert all(u["reason"] == "still running at until=100 s" or u["reason"].startswith("still pending")
               for u in summary["unfinished_jobs"])
