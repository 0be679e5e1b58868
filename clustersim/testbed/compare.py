"""The simulator's error against a real run, and a real run's error against its repeat.

Errors are relative, signed (predicted - measured) / measured, so + means the simulation is slow:
- per job: its JCT (end - submit);
- ``jct_mean``: the mean JCT over the jobs both runs finished;
- ``makespan``: the first submission to the last end (summary.json's ``makespan``);
- ``job_abs_mean``: the mean of the per-job absolute errors;
- ``by_kind``: that mean over each kind of job (data-parallel, parameter-server) apart.
The host's noise is the same arithmetic between two real runs of the same trace and policy: a
simulator cannot be told apart from reality by errors smaller than that.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq


def rel(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def jcts(run_dir: Path) -> dict[str, float | None]:
    t = pq.read_table(Path(run_dir) / "jobs.parquet", columns=["job_id", "jct"]).to_pydict()
    return dict(zip(t["job_id"], t["jct"]))


def errors(predicted: dict[str, float | None], measured: dict[str, float | None], makespan_pred: float,
           makespan_meas: float) -> dict:
    """Per-job, mean-JCT and makespan errors of ``predicted`` against ``measured`` (job -> JCT)."""
    both = [j for j in measured if measured[j] is not None and predicted.get(j) is not None]
    missing = sorted(set(measured) ^ set(predicted) | {j for j in measured if j not in both})
    per_job = {j: rel(predicted[j], measured[j]) for j in both}
    mean_p = float(np.mean([predicted[j] for j in both])) if both else None
    mean_m = float(np.mean([measured[j] for j in both])) if both else None
    return {"jobs": len(both), "not_compared": missing, "per_job": per_job,
            "jct_mean_predicted": mean_p, "jct_mean_measured": mean_m,
            "jct_mean": rel(mean_p, mean_m) if both else None,
            "makespan_predicted": makespan_pred, "makespan_measured": makespan_meas,
            "makespan": rel(makespan_pred, makespan_meas),
            "job_abs_mean": float(np.mean(np.abs(list(per_job.values())))) if per_job else None}


def runs(predicted_dir: Path, measured_dir: Path) -> dict:
    """``errors`` of the run in ``predicted_dir`` against the one in ``measured_dir``."""
    ms = [json.loads((Path(d) / "summary.json").read_text())["makespan"] for d in (predicted_dir, measured_dir)]
    return errors(jcts(predicted_dir), jcts(measured_dir), *ms)


def by_kind(per_job: dict[str, float], kinds: dict[str, str]) -> dict[str, dict]:
    """The per-job absolute errors' mean and count for each kind of job (``kinds``: job -> kind)."""
    out = {}
    for kind in sorted(set(kinds.values())):
        errs = [abs(e) for j, e in per_job.items() if kinds.get(j) == kind]
        out[kind] = {"jobs": len(errs), "job_abs_mean": float(np.mean(errs)) if errs else None}
    return out


def kinds(trace_table) -> dict[str, str]:
    """job -> ``ps`` (it has a ``ps`` role) or ``dataparallel``, from a canonical job table."""
    rows = trace_table.select(["job_id", "roles"]).to_pylist()
    return {r["job_id"]: "ps" if any(x["name"] == "ps" for x in r["roles"]) else "dataparallel" for r in rows}
