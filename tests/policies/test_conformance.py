"""Every registered policy passes the conformance suite (policies/conformance.py), and the suite
catches what it claims to: deliberately broken policies fail it, each with a message that says why.

The broken policies are defined at this module's top level so that the determinism check's
fresh processes can import them."""

from __future__ import annotations

import time

import pytest

from clustersim import policies
from clustersim.policies.base import Decision, Policy, View
from clustersim.policies.conformance import (Case, ConformanceError, NodeFailure, check_policy, contention_case,
                                             run_case)
from clustersim.policies.placement import strategy
from clustersim.simulator.cluster import NodeGroup
from clustersim.simulator.view import OracleError
from tests.factories import gpu_job, jobs


@pytest.mark.parametrize("name", policies.names())
def test_registered_policy_conforms(name):
    cls = policies.get(name)
    check_policy(cls)


# ---------------------------------------------------------------------------- a correct reference
first_fit = strategy("first_fit")


class Greedy(Policy):
    """Starts pending jobs at their request, in arrival order, wherever they fit (first fit)."""

    name = "greedy"

    def order(self, view: View) -> list:
        return sorted(view.pending.values(), key=lambda j: (j.submit_time, j.index))

    def decide(self, view: View) -> Decision:
        free = view.cluster.free_copy()
        decision = Decision()
        for job in self.order(view):
            alloc = first_fit(free, job.roles, job.requested_counts())
            if alloc is not None:
                decision.allocations[job.job_id] = alloc
        return decision


def test_a_correct_policy_passes():
    check_policy(Greedy, tags={"multi-resource", "ps"}, examples=10)


# ---------------------------------------------------------------------------- broken policies
class OverAllocating(Greedy):
    """Puts every pending job on node 0, whatever is free there."""

    name = "over-allocating"

    def decide(self, view):
        return Decision({j.job_id: {r.name: {0: r.count} for r in j.roles} for j in view.pending.values()})


class ReadsTruth(Greedy):
    """A non-oracle that orders jobs by their remaining work."""

    name = "reads-truth"

    def order(self, view):
        return sorted(view.pending.values(), key=lambda j: j.remaining_work)


class ReadsTruthAroundItsView(Greedy):
    """A non-oracle that reaches past its view for the jobs' true sizes."""

    name = "sneaky"

    def order(self, view):
        return sorted(view.pending.values(), key=lambda j: j._state.spec.total_work)


class HashOrder(Greedy):
    """Breaks ties by hash order: the same in one process, different under another PYTHONHASHSEED."""

    name = "hash-order"

    def order(self, view):
        return sorted(view.pending.values(), key=lambda j: hash(j.job_id))


class WritesFree(Greedy):
    """Plans on the cluster's free array itself instead of a copy."""

    name = "writes-free"

    def decide(self, view):
        decision = super().decide(view)
        free = view.cluster.free
        for job_id in decision.allocations:
            free[0, 0] -= view.pending[job_id].num_gpus
        return decision


class ChangesGrants(Greedy):
    """Changes the CPU grant of a running job's tasks in place instead of asking for a resize."""

    name = "changes-grants"

    def decide(self, view):
        for job in view.running.values():
            for tasks in job.allocation.values():
                tasks.cpu = 99.0
        return super().decide(view)


class WakesEveryMicrosecond(Greedy):
    name = "insomniac"

    def decide(self, view):
        decision = super().decide(view)
        decision.wakeup = 1e-6
        return decision


class HalfGang(Greedy):
    """Starts rigid jobs with half their workers."""

    name = "half-gang"

    def decide(self, view):
        out = Decision()
        free = view.cluster.free_copy()
        for job in self.order(view):
            counts = {r.name: max(r.count // 2, 1) if r.count > 1 else r.count for r in job.roles}
            alloc = first_fit(free, job.roles, counts)
            if alloc is not None:
                out.allocations[job.job_id] = alloc
        return out


class Starves(Greedy):
    """Never starts the last job to arrive at any instant."""

    name = "starves"

    def order(self, view):
        return [j for j in super().order(view) if j.job_id != "c9"]


class Crashes(Greedy):
    name = "crashes"

    def decide(self, view):
        if view.running:
            raise KeyError("no such queue")
        return super().decide(view)


def _fails(cls, match: str, **kw) -> ConformanceError:
    with pytest.raises(ConformanceError, match=match) as info:
        check_policy(cls, examples=kw.pop("examples", 3), determinism=kw.pop("determinism", False), **kw)
    assert f"policy {cls.name!r}" in str(info.value)
    return info.value


def test_over_allocating_fails_capacity():
    e = _fails(OverAllocating, r"fails check 'capacity' on input contention.*over-allocated a node.*node 0")
    assert e.check == "capacity"


def test_reading_truth_fails():
    _fails(ReadsTruth, r"fails check 'hidden truth'.*non-oracle policy read ground truth.*remaining_work")


def test_reading_truth_around_the_view_fails():
    _fails(ReadsTruthAroundItsView, r"fails check 'hidden truth'.*decisions differ when only the jobs' hidden "
                                    r"sizes differ")


def test_the_same_policy_may_read_truth_as_an_oracle():
    class Oracle(ReadsTruth):
        oracle = True
    check_policy(Oracle, examples=3, determinism=False)


def test_hash_order_fails_determinism_across_processes():
    _fails(HashOrder, r"fails check 'determinism'.*differs between PYTHONHASHSEED=1 and PYTHONHASHSEED=2",
           determinism=True, examples=1)


def test_hash_order_passes_every_check_within_one_process():
    check_policy(HashOrder, examples=3, determinism=False)


def test_writing_the_free_array_fails():
    _fails(WritesFree, r"fails check 'views unchanged'.*decide tried to mutate what it was given.*read-only")


def test_changing_a_grant_in_place_fails():
    _fails(ChangesGrants, r"fails check 'views unchanged'.*changed what it was given: running jobs: job .c\d+.'s allocation changed")


def test_waking_every_microsecond_runs_away_quickly():
    t0 = time.perf_counter()
    _fails(WakesEveryMicrosecond, r"fails check 'event budget'.*runs away.*event budget")
    assert time.perf_counter() - t0 < 5.0


def test_gang_violation_fails():
    _fails(HalfGang, r"fails check 'gang bounds'.*outside the job's bounds.*\(gang\)")


def test_starving_a_job_fails():
    _fails(Starves, r"fails check 'completes'.*'c9': never started")


def test_an_exception_in_decide_fails_naming_it():
    _fails(Crashes, r"fails check 'decide raises'.*decide raised KeyError: 'no such queue'")


def test_unknown_and_inconsistent_tags_fail():
    class Odd(Greedy):
        tags = frozenset({"gang"})

    class Claims(Greedy):
        tags = frozenset({"oracle"})
    with pytest.raises(ConformanceError, match=r"check 'tags': unknown tag\(s\) \['gang'\]"):
        check_policy(Odd, examples=0, determinism=False)
    with pytest.raises(ConformanceError, match=r"check 'tags': it is tagged 'oracle' but does not set oracle"):
        check_policy(Claims, examples=0, determinism=False)


def test_a_policy_that_cannot_be_imported_elsewhere_is_told_so():
    class Local(Greedy):
        name = "local"
    with pytest.raises(ConformanceError, match=r"check 'determinism'.*cannot be imported in a fresh process"):
        check_policy(Local, examples=0)


# ---------------------------------------------------------------------------- the inputs
def test_inputs_follow_the_tags():
    from clustersim.policies.conformance import _drawn, _examples
    plain = _examples(frozenset(), 15, 0)
    full = _examples(frozenset({"elastic", "ps", "multi-resource"}), 15, 0)
    assert all(len(j.roles) == 1 and j.rigid and j.roles[0].cpu == j.roles[0].mem == 0
               for c in plain for j in c.jobs)
    assert any(len(j.roles) == 2 for c in full for j in c.jobs)
    assert any(not j.rigid for c in full for j in c.jobs)
    assert any(j.duration <= 1e-3 for c in full + plain for j in c.jobs)
    assert any(c.zoo for c in full) and any(c.failures for c in full) and any(c.overhead for c in full)
    fresh = _drawn.__wrapped__   # not the cached draw: hypothesis must give the same inputs again
    assert fresh(frozenset(), 5, 3) == fresh(frozenset(), 5, 3) != fresh(frozenset(), 5, 4)
    for tags in (frozenset(), frozenset({"elastic", "ps", "multi-resource"})):
        case = contention_case(tags)
        assert sum(j.submit_time == 0 for j in case.jobs) > 6


def test_run_case_checks_a_hand_made_input():
    case = Case("hand-made", (NodeGroup(1, 4, 32, 128),),
                tuple(jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 0.0, 2, 50.0), gpu_job("c", 10.0, 1, 1e-6))),
                failures=(NodeFailure(20.0, 0, 5.0),))
    out = run_case(Greedy, case)
    assert out.recorder.summary()["jobs_finished"] == 3


def test_a_view_refuses_ground_truth_to_a_non_oracle():
    from clustersim.simulator.job import JobState
    from clustersim.simulator.view import JobView, Observer
    with pytest.raises(OracleError):
        JobView(JobState(gpu_job("a", 0.0, 1, 10.0)), Observer(), oracle=False).remaining_work
