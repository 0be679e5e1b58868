"""From the canonical job table to JobSpecs the engine runs.

A job's work is its trace's iteration count where the trace gives one, else its recorded
duration (one unit of work per second at the requested allocation). With the default
speed model a job run alone at its requested allocation finishes in exactly its recorded
duration.
"""

from __future__ import annotations

import pyarrow as pa

from simulator.job import JobSpec, RoleSpec
from traces.schema import TraceError


def build_jobs(table: pa.Table, source: str = "trace") -> list[JobSpec]:
    cols = table.select(["job_id", "submit_time", "duration", "iterations", "roles", "tenant", "user", "model",
                         "deadline", "priority", "batch_size", "gpu_type"]).to_pydict()
    interned: dict[tuple, tuple[RoleSpec, ...]] = {}
    jobs = []
    for i, job_id in enumerate(cols["job_id"]):
        duration = cols["duration"][i]
        if duration is None:
            raise TraceError(f"{source}: row {i} (job {job_id!r}): no duration, and no speed profile to turn "
                             "its iterations into time")
        key = tuple(tuple(r.values()) for r in cols["roles"][i])
        roles = interned.get(key)
        if roles is None:
            roles = interned[key] = tuple(RoleSpec(**r) for r in cols["roles"][i])
        jobs.append(JobSpec(
            index=i, job_id=job_id, submit_time=cols["submit_time"][i], roles=roles,
            total_work=cols["iterations"][i] or duration, duration=duration,
            tenant=cols["tenant"][i], user=cols["user"][i], model=cols["model"][i], profile=cols["model"][i],
            deadline=cols["deadline"][i], priority=cols["priority"][i], batch_size=cols["batch_size"][i],
            gpu_type=cols["gpu_type"][i]))
    return jobs
