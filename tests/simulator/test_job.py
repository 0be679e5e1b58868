"""A job's request: its totals per resource, summed as the policies' admission reads them."""

from clustersim.simulator.job import JobSpec, RoleSpec

PS = RoleSpec("ps", 1, 0.0, 4.0, 8.0, 1, 1)
WORKER = RoleSpec("worker", 2, 1.0, 2.0, 4.0, 2, 2)
JOB = JobSpec(index=0, job_id="j", submit_time=0.0, roles=(PS, WORKER), total_work=10.0)


def test_requested_demand_sums_each_resource_over_the_roles_exactly_as_sum_does():
    # one role: 3 tasks x (0.1 GPU, 0.7 cores, 1.3 GB); sum() starts from 0, so 0 + 3 * 0.1 etc.
    one = JobSpec(index=1, job_id="a", submit_time=0.0, roles=(RoleSpec("w", 3, 0.1, 0.7, 1.3, 3, 3),), total_work=1.0)
    assert one.requested_demand() == (3 * 0.1, 3 * 0.7, 3 * 1.3) == (0.30000000000000004, 2.0999999999999996, 3.9000000000000004)
    assert all(type(x) is float for x in one.requested_demand())
    # two roles: PS (1 x 0, 4, 8) + workers (2 x 1, 2, 4) = (2, 8, 16)
    assert JOB.requested_demand() == (2.0, 8.0, 16.0)
    for spec in (one, JOB):
        assert spec.requested_demand() == tuple(float(sum(r.count * r.demand[k] for r in spec.roles)) for k in range(3))


def test_a_roles_needs_are_its_non_zero_per_task_resources():
    # (resource index, amount): GPUs 0, cores 1, GB 2; a resource the task does not use is left out
    assert RoleSpec("worker", 2, 1.0, 0.0, 8.0, 2, 2).needs == ((0, 1.0), (2, 8.0))
    assert RoleSpec("ps", 1, 0.0, 4.0, 0.0, 1, 1).needs == ((1, 4.0),)
    assert RoleSpec("idle", 1, 0.0, 0.0, 0.0, 1, 1).needs == ()
