"""Every bundled trace config runs end to end: load, size, schedule, finish."""

from pathlib import Path

import pytest

from clustersim.experiment import build_engine, compose

TRACES = sorted(p.stem for p in (Path(__file__).parent.parent / "configs" / "trace").glob("*.yaml"))
# a cluster each trace's jobs fit on (the default n32g4 has no CPU-only room and 4-GPU nodes)
CLUSTER = {"openb": "openb", "alibaba_pai2020": "auto8", "google2011": "cpu_ps", "google2019": "cpu_ps",
           "synthetic_dlrover": "cpu_ps", "synthetic_optimus": "optimus_testbed", "elasticflow_raw": "auto8",
           "elasticflow_all": "auto8", "elasticflow_195job": "auto8", "philly_pollux": "auto8", "philly": "auto8",
           "gavel": "auto8", "shockwave": "auto8", "synthetic_philly": "auto8", "helios": "auto8"}
FIRST = "trace.transforms=[{op:sample,n:1500,how:first}]"  # keeps the large real traces quick


@pytest.mark.parametrize("trace", TRACES)
def test_trace_config_runs_to_completion(trace):
    cfg = compose([f"trace={trace}", f"cluster={CLUSTER.get(trace, 'n32g4')}", FIRST, "progress=false",
                   "trace.cache.enabled=false"])
    engine = build_engine(cfg)
    recorder = engine.run()
    summary = recorder.summary()
    assert summary["jobs"] > 0
    assert summary["jobs_finished"] == summary["jobs"]
    assert summary["jct_mean"] > 0
    jobs = recorder.jobs().to_pandas()
    assert (jobs["jct"] >= jobs["duration_alone"] * (1 - 1e-9)).all()
