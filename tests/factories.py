"""Small hand-made jobs and clusters for tests."""

from __future__ import annotations

from dataclasses import replace

from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.job import JobSpec, RoleSpec


def gpu_job(job_id: str, submit: float, gpus: int, duration: float, *, work: float | None = None,
            min_gpus: int | None = None, max_gpus: int | None = None, index: int = 0, **kw) -> JobSpec:
    """A data-parallel job of ``gpus`` one-GPU workers (rigid unless bounds are given)."""
    role = RoleSpec("worker", gpus, 1.0, 0.0, 0.0, min_gpus or gpus, max_gpus or gpus)
    return JobSpec(index=index, job_id=job_id, submit_time=submit, roles=(role,),
                   total_work=work if work is not None else duration, duration=duration, **kw)


def jobs(*specs: JobSpec) -> list[JobSpec]:
    """Give hand-made jobs their indices in the order listed."""
    return [replace(s, index=i) for i, s in enumerate(specs)]


def cluster(nodes: int = 1, gpus: float = 4, cpus: float = 32, mem: float = 256, per_rack: int = 0) -> Cluster:
    return Cluster([NodeGroup(nodes, gpus, cpus, mem, nodes_per_rack=per_rack)])
