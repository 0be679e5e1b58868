"""simulator/reconcile.py on hand-made states: validation, classification, release then take,
graceful exits and hand-overs. Nothing is applied to the jobs."""

from dataclasses import replace

import pytest

from clustersim.simulator.cluster import CapacityError
from clustersim.simulator.errors import PolicyError
from clustersim.simulator.job import JobSpec, JobState, RoleSpec, Status, Tasks
from clustersim.simulator.overhead import FREE, Change, ConstantOverhead, Transition
from clustersim.simulator.reconcile import classify, reconcile
from tests.factories import cluster, gpu_job

WHO = "policy 'test'"


def running(spec: JobSpec, alloc: dict, c) -> JobState:
    st = JobState(spec, status=Status.RUNNING, allocation=alloc, first_start=0.0)
    c.take(spec, alloc, WHO)
    return st


def setup():
    """Two nodes of 4 GPUs; ``a`` (elastic 1..4 workers) runs 4 on node 0, ``b`` (rigid 4) waits."""
    c = cluster(nodes=2, gpus=4)
    a = running(gpu_job("a", 0.0, 4, 100.0, min_gpus=1, max_gpus=4), {"worker": {0: 4}}, c)
    b = JobState(gpu_job("b", 0.0, 4, 100.0))
    return c, {"a": a, "b": b}


def test_a_start_a_scale_in_and_a_stop_are_classified_and_moved_in_the_cluster_only():
    c, states = setup()
    out = reconcile({"a": {"worker": {0: 2}}, "b": {"worker": {1: 4}}}, states, lambda j: True, c,
                    ConstantOverhead(start_s=10.0, rescale_s=5.0), WHO)
    assert [(ch.state.spec.job_id, ch.kind, ch.transition, ch.gpus) for ch in out] == [
        ("a", Change.SCALE_IN, Transition(pause_s=5.0), 2.0),
        ("b", Change.START, Transition(pause_s=10.0), 4.0)]
    assert list(c.free[:, 0]) == [2.0, 0.0]        # a gave 2 GPUs back on node 0, b took node 1
    assert dict(states["a"].allocation["worker"]) == {0: 4} and not states["b"].allocation   # jobs untouched
    assert isinstance(out[0].new["worker"], Tasks)


def test_allocations_swap_within_one_decision_release_before_take():
    c, states = setup()
    states["b"] = running(states["b"].spec, {"worker": {1: 4}}, c)
    out = reconcile({"a": {"worker": {1: 4}}, "b": {"worker": {0: 4}}}, states, lambda j: True, c, ConstantOverhead(),
                    WHO)
    assert [ch.kind for ch in out] == [Change.MIGRATE, Change.MIGRATE]
    assert list(c.free[:, 0]) == [0.0, 0.0]


def test_an_unchanged_allocation_is_no_change_and_an_empty_one_a_stop():
    c, states = setup()
    out = reconcile({"a": {"worker": {0: 4}}}, states, lambda j: True, c, ConstantOverhead(), WHO)
    assert out == []
    out = reconcile({"a": None}, states, lambda j: True, c, ConstantOverhead(start_s=10.0), WHO)
    assert [(ch.kind, ch.transition, ch.new) for ch in out] == [(Change.STOP, FREE, {})]
    assert list(c.free[:, 0]) == [4.0, 4.0]


@pytest.mark.parametrize("wanted, error", [
    ({"b": {"worker": {1: 2}}}, "role 'worker' gets 2 tasks; it must run with 4..4 (gang)"),
    ({"b": {"chief": {1: 4}}}, "has no role 'chief'"),
    ({"b": {"worker": {1: 3.5}}}, "3.5 tasks on node 1; task counts are integers"),
    ({"b": {"worker": Tasks({1: 4}, cpu=float("nan"))}}, "grants cpu=nan per task"),
    ({"zz": {"worker": {1: 4}}}, "job 'zz' is not pending or running"),
])
def test_an_invalid_wanted_allocation_is_a_policy_error_naming_policy_and_job(wanted, error):
    c, states = setup()
    with pytest.raises(PolicyError, match="policy 'test'.*" + error.replace("(", r"\(").replace(")", r"\)")):
        reconcile(wanted, states, lambda j: j in states, c, ConstantOverhead(), WHO)


def test_a_job_neither_pending_nor_running_cannot_be_changed():
    c, states = setup()
    with pytest.raises(PolicyError, match="job 'b' is not pending or running"):
        reconcile({"b": {"worker": {1: 4}}}, states, lambda j: j == "a", c, ConstantOverhead(), WHO)


def test_a_decision_of_starts_only_takes_on_free_nodes_without_releasing_anything():
    # the common decision (no changed job holds resources) skips releases and graceful exits, but
    # not the cluster's check: b starts on node 1's 4 free GPUs; c (it ran before: first_start set)
    # asking for node 1 as well is refused, naming the job, as on the general path.
    c, states = setup()
    states["c"] = JobState(replace(gpu_job("c", 0.0, 2, 100.0), index=2), first_start=5.0)
    out = reconcile({"b": {"worker": {1: 4}}}, states, lambda j: True, c, ConstantOverhead(start_s=10.0), WHO)
    assert [(ch.kind, ch.transition, ch.gpus, ch.lingering) for ch in out] == [
        (Change.START, Transition(pause_s=10.0), 4.0, None)]
    assert list(c.free[:, 0]) == [0.0, 0.0]        # a holds node 0's 4 GPUs, b took node 1's 4
    with pytest.raises(CapacityError, match="job 'c'.*node 1, which has 0 free"):
        reconcile({"c": {"worker": {1: 2}}}, states, lambda j: True, c, ConstantOverhead(resume_s=7.0), WHO)
    c.release(states["b"].spec, out[0].new)        # b gives node 1 back: c resumes there, paying resume_s
    out = reconcile({"c": {"worker": {1: 2}}}, states, lambda j: True, c, ConstantOverhead(resume_s=7.0), WHO)
    assert [(ch.kind, ch.transition, ch.gpus) for ch in out] == [(Change.RESUME, Transition(pause_s=7.0), 2.0)]
    assert list(c.free[:, 0]) == [0.0, 2.0]


class Graceful:
    """Scale-ins exit gracefully over 30 s; other changes pause 5 s."""

    def transition(self, spec, change, old, new):
        if change is Change.SCALE_IN:
            return Transition(release_s=30.0)
        return Transition(pause_s=5.0)


def test_a_scale_in_keeps_its_removed_tasks_while_they_exit():
    c, states = setup()
    out = reconcile({"a": {"worker": {0: 2}}}, states, lambda j: True, c, Graceful(), WHO)
    assert dict(out[0].lingering["worker"]) == {0: 2}
    assert list(c.free[:, 0]) == [0.0, 4.0]        # 2 held by a, 2 still exiting


def test_resources_handed_over_in_the_same_decision_make_the_taker_wait_for_the_exit():
    c, states = setup()
    b = states["b"] = JobState(replace(gpu_job("b", 0.0, 2, 100.0), index=1))
    out = reconcile({"a": {"worker": {0: 2}}, "b": {"worker": {0: 2}}}, states, lambda j: True, c, Graceful(), WHO)
    # a's 2 removed tasks cannot linger (b took their GPUs): b waits their 30 s exit after its own 5 s pause
    assert out[0].lingering is None
    assert out[1].state is b and out[1].transition == Transition(pause_s=35.0)


def test_classify_names_every_kind_of_change():
    ps_job = JobSpec(0, "p", 0.0, (RoleSpec("ps", 1, 0.0, 4.0, 8.0, 1, 4), RoleSpec("worker", 2, 0.0, 4.0, 8.0, 1, 4)),
                     100.0)
    st = JobState(ps_job, allocation={"ps": {0: 1}, "worker": {0: 2}}, first_start=0.0)
    assert classify(st, {"ps": {0: 2}, "worker": {0: 1}}) is Change.RESCALE
    assert classify(st, {"ps": {0: 1}, "worker": {0: 3}}) is Change.SCALE_OUT
    assert classify(st, {"ps": {0: 1}, "worker": {0: 1}}) is Change.SCALE_IN
    assert classify(st, {"ps": {1: 1}, "worker": {0: 2}}) is Change.MIGRATE
    assert classify(st, {"ps": Tasks({0: 1}, cpu=8.0), "worker": {0: 2}}) is Change.RESIZE
    assert classify(st, {}) is Change.STOP
    assert classify(JobState(ps_job), {"ps": {0: 1}, "worker": {0: 2}}) is Change.START
    assert classify(JobState(ps_job, first_start=5.0), {"ps": {0: 1}, "worker": {0: 2}}) is Change.RESUME
