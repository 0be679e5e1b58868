"""Golden results: small runs covering every policy, whose summary.json figures are stored in
``summaries.json`` and compared exactly by tests/test_golden.py, so that no change alters simulated
behaviour unseen. ``make golden`` (``python -m tests.golden``) reruns them, prints every figure
that moved, and rewrites the file for review in the commit's diff."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
STORE = HERE / "summaries.json"
CONTENDED = "cluster=n2g4"   # 2 x 4 GPUs: the 60-job Tiresias trace queues there, so policies differ
CASES: dict[str, list[str]] = {
    "fifo": ["policy=fifo", CONTENDED],
    "fifo_backfill_stop_resume": ["policy=fifo", "policy.backfill=true", "overhead=stop_resume", CONTENDED],
    "tiresias": ["policy=tiresias", CONTENDED],
    "tiresias_gittins_preempting": ["policy=tiresias", "policy.gittins=true", "policy.thresholds=[500,10000]",
                                    "overhead=constant30", CONTENDED],
    "tiresias_rounds": ["policy=tiresias", "policy.decision_interval=60", CONTENDED],
    "srtf": ["policy=srtf", CONTENDED],
    "sjf": ["policy=sjf", CONTENDED],
    "edf_elasticflow_sample": ["policy=edf", "trace=elasticflow_all", "cluster=auto8",
                               "trace.transforms=[{op:sample,n:200,how:first}]"],
    "drf_optimus": ["policy=drf", "trace=synthetic_optimus", "cluster=optimus_testbed", "overhead=stop_resume"],
    "tetris_optimus": ["policy=tetris", "trace=synthetic_optimus", "cluster=optimus_testbed",
                       "overhead=stop_resume"],
    "fifo_itp_stop_free": ["policy=fifo", "trace=elasticflow_raw", "cluster=auto8", "overhead=stop_free",
                           "trace.transforms=[{op:sample,n:400,how:first}]"],
}


def summary_of(overrides: list[str]) -> dict:
    """The summary of the run ``overrides`` describe, as summary.json stores it."""
    from clustersim.experiment import compose, run

    with tempfile.TemporaryDirectory() as d:
        run(compose(overrides + ["progress=false", "trace.cache.enabled=false"]), Path(d) / "run")
        return json.loads((Path(d) / "run" / "summary.json").read_text())


def stored() -> dict:
    return json.loads(STORE.read_text()) if STORE.exists() else {}


def differences(old: dict, new: dict) -> list[str]:
    keys = sorted(set(old) | set(new))
    return [f"{k}: {old.get(k, '<absent>')!r} -> {new.get(k, '<absent>')!r}" for k in keys if old.get(k) != new.get(k)]


def main() -> int:
    old, new = stored(), {}
    for name, overrides in CASES.items():
        new[name] = summary_of(overrides)
        diff = differences(old.get(name, {}), new[name])
        print(f"{name}: {'unchanged' if not diff else f'{len(diff)} figure(s) moved'}")
        for line in diff:
            print(f"    {line}")
    for name in sorted(set(old) - set(new)):
        print(f"{name}: removed")
    STORE.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    print(f"wrote {STORE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
