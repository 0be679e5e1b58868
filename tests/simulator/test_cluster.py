"""The cluster's take and release: per-node rows, totals in use, grants, and a take that does not fit."""

import pytest

from clustersim.simulator.cluster import CapacityError, Cluster, NodeGroup
from clustersim.simulator.job import JobSpec, RoleSpec, Tasks

PS = RoleSpec("ps", 1, 0.0, 4.0, 8.0, 1, 1)
WORKER = RoleSpec("worker", 2, 1.0, 2.0, 4.0, 2, 2)
JOB = JobSpec(index=0, job_id="j", submit_time=0.0, roles=(PS, WORKER), total_work=10.0)


def test_take_and_release_move_each_role_with_its_grants_and_give_everything_back():
    cl = Cluster([NodeGroup(2, 4, 32, 128)])
    # the PS is granted 6 cores (its request is 4); the workers take their request, one per node
    alloc = {"ps": Tasks({0: 1}, cpu=6.0), "worker": Tasks({0: 1, 1: 1})}
    cl.take(JOB, alloc, "test")
    # node 0: 4 - 1 GPU, 32 - 6 - 2 cores, 128 - 8 - 4 GB; node 1: one worker
    assert cl.free.tolist() == [[3.0, 24.0, 116.0], [3.0, 30.0, 124.0]]
    assert cl.used == [2.0, 10.0, 16.0] and cl.free_gpus == 6.0
    cl.release(JOB, alloc)
    assert cl.free.tolist() == [[4.0, 32.0, 128.0], [4.0, 32.0, 128.0]]
    assert cl.used == [0.0, 0.0, 0.0] and cl.free_gpus == 8.0


def test_a_take_that_does_not_fit_names_the_node_and_leaves_the_cluster_as_it_was():
    cl = Cluster([NodeGroup(2, 4, 32, 128)])
    # the PS fits on node 0; 5 workers (5 GPUs) do not fit on node 1's 4 GPUs
    with pytest.raises(CapacityError, match=r"job 'j' role 'worker' asks for 5 gpu on node 1, which has 4 free"):
        cl.take(JOB, {"ps": Tasks({0: 1}), "worker": Tasks({1: 5})}, "test")
    assert cl.free.tolist() == [[4.0, 32.0, 128.0], [4.0, 32.0, 128.0]] and cl.used == [0.0, 0.0, 0.0]


def test_fractional_takes_and_releases_leave_no_float_dust():
    # 0.1 GPU ten times is 0.9999999999999999 in floating point: the row snaps back to 0 and to 1
    cl = Cluster([NodeGroup(1, 1, 0, 0)])
    job = JobSpec(index=0, job_id="f", submit_time=0.0, roles=(RoleSpec("worker", 1, 0.1, 0.0, 0.0, 1, 1),),
                  total_work=1.0)
    for _ in range(10):
        cl.take(job, {"worker": Tasks({0: 1})}, "test")
    assert cl.free.tolist() == [[0.0, 0.0, 0.0]] and cl.used[0] == pytest.approx(1.0)
    for _ in range(10):
        cl.release(job, {"worker": Tasks({0: 1})})
    assert cl.free.tolist() == [[1.0, 0.0, 0.0]] and cl.used == [0.0, 0.0, 0.0]
