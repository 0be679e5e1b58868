"""The testbed's trace: a few tens of short data-parallel and parameter-server jobs of the
calibrated models.

Arrivals are a seeded Poisson process (mean gap ``mean_gap_s``); each job draws a model from
``models``, a worker count from ``workers`` and its work from ``work_s`` (seconds it takes run
alone at its request; the calibrated profile turns them into iterations, so the real job trains
exactly the iterations the simulated one does). Each worker asks for one core slot: the testbed's
cluster is this host with one "GPU" per core (the unit the policies allocate), one core and 1 GB
per worker. Elastic jobs may run with 1..``max_workers`` workers (Elastic-Tiresias rescales them).
A share ``ps_share`` of the jobs (drawn last, so the draws above do not depend on it) are
synchronous parameter-server jobs: ``ps`` PS tasks (no "GPU" slot, one core and 1 GB each) and
their workers, at most ``max_workers - ps`` so that the job fits the host's cores. A PS job keeps
its size (Elastic-Tiresias scales single-role jobs only; policies/elastic_tiresias.py). Its model
name resolves to the calibration's PS profile ``<model>_ps`` (workload.py: a job with a ``ps``
role is of family ``ps``). Every choice here is a run parameter of configs/testbed/config.yaml.
"""

from __future__ import annotations

import pyarrow as pa

from clustersim.simulator.errors import ConfigError
from clustersim.simulator.rng import component_rng
from clustersim.traces.schema import Role, build_table


def make(t: dict, seed: int, max_workers: int) -> pa.Table:
    """The job table of ``t`` (the config's ``trace`` block)."""
    rng = component_rng(seed, "testbed-trace")
    n = int(t["jobs"])
    gaps = rng.exponential(float(t["mean_gap_s"]), n)
    gaps[0] = 0.0                                       # the first job arrives at time 0
    submit = gaps.cumsum()
    models = [str(t["models"][i]) for i in rng.integers(len(t["models"]), size=n)]
    workers = [int(t["workers"][i]) for i in rng.integers(len(t["workers"]), size=n)]
    lo, hi = (float(x) for x in t["work_s"])
    work = rng.uniform(lo, hi, n)
    elastic = bool(t["elastic"])
    share, p = float(t["ps_share"]), int(t["ps"])
    if not 0 <= share <= 1:
        raise ConfigError(f"trace.ps_share: {share} must be a share of the jobs, in [0, 1]")
    if share > 0 and not 1 <= p < max_workers:
        raise ConfigError(f"trace.ps: a PS job of {p} PS needs 1 <= ps and ps + 1 <= {max_workers}, "
                          "the cores the testbed uses")
    is_ps = rng.random(n) < share
    roles = [[Role("ps", p, 0.0, 1.0, 1.0), Role("worker", min(w, max_workers - p), 1.0, 1.0, 1.0)] if ps_job else
             [Role("worker", w, 1.0, 1.0, 1.0, 1 if elastic else w, max(w, max_workers) if elastic else w)]
             for w, ps_job in zip(workers, is_ps)]
    return build_table({"job_id": [f"j{i:02d}" for i in range(n)], "submit_time": [round(float(s), 3) for s in submit],
                        "duration": [round(float(d), 3) for d in work], "roles": roles, "model": models,
                        "batch_size": [int(t["batch"])] * n, "status": ["completed"] * n})
