"""Small hand-made jobs, clusters and policies for tests."""

from __future__ import annotations

from dataclasses import replace

from clustersim.policies.base import Decision, Policy
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


class OnNodeZero(Policy):
    """Starts each pending job, in arrival order, on node 0 while its GPUs are free there (every
    task on one node: the hand-worked cases' single machine); with ``wakeup``, asks to be woken
    that many seconds after each decision."""
    name = "on_node_zero"

    def __init__(self, wakeup: float | None = None):
        self.wakeup = wakeup

    def decide(self, view):
        free, out = view.cluster.free_gpus, {}
        for j in view.pending.values():
            if j.num_gpus <= free:
                out[j.job_id] = {"worker": {0: int(j.num_gpus)}}
                free -= j.num_gpus
        return Decision(out, wakeup=self.wakeup)
