"""The suite's small cases for asv's history: one ElasticFlow ITP cluster per policy (wall, peak
memory, events/s) and the ``clustersim`` command's start-up (whole process, in a temp dir).

The replay is benchmarks/elasticflow_fifo.py's (the big suite replays all ten clusters with it);
benchmarks/ joins the import path for it (asv runs the benchmarks from the working copy, so the
replay is this checkout's, the code it replays the commit's).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # benchmarks/: elasticflow_fifo

CLUSTER = "01"   # 1,594 jobs: at 64ab289 cluster 03 (3,010) took 40 s under DRF/Tetris, too long to sample
POLICIES = ["fifo", "tiresias", "srtf", "drf", "tetris"]


def _replay(policy: str) -> dict:
    from elasticflow_fifo import replay

    return replay(CLUSTER, policy, "zoo")


class ITPCluster:
    """ElasticFlow ITP cluster 01 replayed end to end: trace load (no cache), build, engine, summary."""
    params = POLICIES
    param_names = ["policy"]
    number = 1
    repeat = (1, 3, 30.0)
    warmup_time = 0
    timeout = 300

    def setup(self, policy):
        from elasticflow_fifo import replay   # noqa: F401  (the imports, outside the timing)

    def time_replay(self, policy):
        _replay(policy)

    def peakmem_replay(self, policy):
        _replay(policy)

    def track_events_per_s(self, policy):
        r = _replay(policy)
        return r["events"] / r["run_s"]
    track_events_per_s.unit = "events/s"


def _clustersim(args: list[str]) -> float:
    """Seconds of one ``clustersim`` process (the installed console script's entry point), in a temp
    dir, after one warm-up run there (bytecode and trace cache, as a user's second run finds them)."""
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "clustersim"]
    cmd = [sys.executable, "-c", f"import sys; from {ep.module} import {ep.attr}; sys.exit({ep.attr}())"] + args
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CLUSTERSIM_CACHE=os.path.join(tmp, "cache"))
        subprocess.run(cmd, cwd=tmp, env=env, check=True, capture_output=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=tmp, env=env, check=True, capture_output=True)
        return time.perf_counter() - t0


class Startup:
    """The ``clustersim`` command, whole process (targets: --help <= 0.5 s, default run <= 1.0 s)."""
    repeat = 5
    timeout = 120

    def track_help_s(self):
        return _clustersim(["--help"])
    track_help_s.unit = "seconds"

    def track_default_run_s(self):
        return _clustersim([])
    track_default_run_s.unit = "seconds"
