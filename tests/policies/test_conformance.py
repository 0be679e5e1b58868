"""Every registered policy passes the conformance suite (clustersim/conformance.py), and the suite
catches what it claims to: deliberately broken policies (mutants of a correct one, one per way of
breaking the contract) each fail it, with the check and the reason that say what is wrong.

The broken policies are defined at this module's top level so that the determinism check's
fresh processes can import them."""

from __future__ import annotations

import random
import time

import pytest

from clustersim import policies
from clustersim.policies.base import Decision, Policy, View
from clustersim.conformance import Case, ConformanceError, NodeFailure, check_policy, contention_case, run_case
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


class IdleGreedy(Greedy):
    """Greedy declares rightly that with nothing pending it changes nothing; it counts the
    jobs pending at each of its decisions."""

    name = "idle-greedy"
    decides_only_when_waiting = True

    def reset(self, view):
        self.pending_seen = []

    def decide(self, view):
        self.pending_seen.append(len(view.pending))
        return super().decide(view)


def test_a_true_declaration_passes_and_is_checked():
    check_policy(IdleGreedy, tags={"multi-resource", "ps"}, examples=3, determinism=False)
    # the suite's engine runs every decision: some had nothing pending, so the declaration was checked there
    out = run_case(IdleGreedy, contention_case(frozenset()))
    assert 0 in out.policy.pending_seen


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


class ReadsTruthOnceAJobEnded(Greedy):
    """Reads the true sizes around its view only after the first job finished (a comparison
    that stops at the first job end cannot see it)."""

    name = "sneaky-later"

    def reset(self, view):
        self.ended = False

    def order(self, view):
        self.ended = self.ended or bool(view.finished)
        if self.ended:
            return sorted(view.pending.values(), key=lambda j: j._state.spec.total_work)
        return super().order(view)


class ReadsDurationAfterTimeZero(Greedy):
    """Orders by the recorded duration, around its view, only for decisions after t = 0."""

    name = "sneaky-after-start"

    def order(self, view):
        if view.now > 0:
            return sorted(view.pending.values(), key=lambda j: (j._state.spec.duration, j.index))
        return super().order(view)


class ReadsTheEventQueue(Greedy):
    """Peeks at the engine's event queue (the running jobs' completion times) to time its wake-up."""

    name = "reads-event-queue"

    def decide(self, view):
        decision = super().decide(view)
        queue = view.clock._env._queue
        if queue and view.pending:
            decision.wakeup = max(queue[0][0] - view.now, 1.0)
        return decision


class ReadsTruthThroughProfiled(Greedy):
    """Reaches the job's spec through its profiled-speed object."""

    name = "reads-profiled-spec"

    def order(self, view):
        return sorted(view.pending.values(), key=lambda j: (j.profiled._spec.total_work, j.index))


class HashOrder(Greedy):
    """Breaks ties by hash order: the same in one process, different under another PYTHONHASHSEED."""

    name = "hash-order"

    def order(self, view):
        return sorted(view.pending.values(), key=lambda j: hash(j.job_id))


class UnseededRandom(Greedy):
    """Shuffles its queue with the global, unseeded random generator."""

    name = "unseeded-random"

    def order(self, view):
        jobs = super().order(view)
        random.shuffle(jobs)
        return jobs


class ClassState(Greedy):
    """Counts the starts of each job in a class attribute, so every instance shares one count,
    and puts jobs started less often first."""

    name = "class-state"
    starts: dict = {}

    def order(self, view):
        return sorted(super().order(view), key=lambda j: self.starts.get(j.job_id, 0))

    def decide(self, view):
        decision = super().decide(view)
        for jid in decision.allocations:
            self.starts[jid] = self.starts.get(jid, 0) + 1
        return decision


_SEEN: set = set()   # module state of ModuleState


class ModuleState(Greedy):
    """Keeps the jobs it has seen in a module-level set."""

    name = "module-state"

    def order(self, view):
        jobs = super().order(view)
        _SEEN.update(j.job_id for j in jobs)
        return jobs


class ResetDoesNotReset(Greedy):
    """Starts jobs in rounds 100 s apart; the next round is set in __init__, not in reset, so a
    second run starts where the first ended."""

    name = "reset-does-not-reset"

    def __init__(self):
        self.next_round = 0.0

    def decide(self, view):
        if view.now < self.next_round:
            return Decision(wakeup=self.next_round - view.now)
        self.next_round = view.now + 100.0
        decision = super().decide(view)
        decision.wakeup = 100.0 if view.pending else None
        return decision


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


class DropsFromPending(Greedy):
    """Removes the jobs it starts from the view's pending mapping."""

    name = "drops-from-pending"

    def decide(self, view):
        decision = super().decide(view)
        for jid in decision.allocations:
            del view.pending[jid]
        return decision


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


class PlacesOnDownNodes(Greedy):
    """Plans on ``free`` (which shows a down node's resources as if it were up) instead of
    ``free_copy()``."""

    name = "places-on-down-nodes"

    def decide(self, view):
        free = view.cluster.free.copy()
        decision = Decision()
        for job in self.order(view):
            alloc = first_fit(free, job.roles, job.requested_counts())
            if alloc is not None:
                decision.allocations[job.job_id] = alloc
        return decision


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


class ResetCrashes(Greedy):
    name = "reset-crashes"

    def reset(self, view):
        raise RuntimeError("no queues configured")


class AllocatesAGhost(Greedy):
    """Allocates a job that does not exist."""

    name = "allocates-a-ghost"

    def decide(self, view):
        decision = super().decide(view)
        decision.allocations["ghost"] = {"worker": {0: 1}}
        return decision


class ReturnsADict(Greedy):
    """Returns its allocations as a plain dict instead of a Decision."""

    name = "returns-a-dict"

    def decide(self, view):
        return dict(super().decide(view).allocations)


class DeclaresIdleButWakes(Greedy):
    """Declares that it changes nothing with nothing pending, yet asks for a wakeup then (a
    periodic policy declaring what it cannot)."""

    name = "declares-idle-but-wakes"
    decides_only_when_waiting = True

    def decide(self, view):
        decision = super().decide(view)
        if not view.pending:
            decision.wakeup = 60.0
        return decision


class DeclaresIdleButPreempts(Greedy):
    """Declares that it changes nothing with nothing pending, yet then stops its newest running
    job once (a rebalancing policy declaring what it cannot)."""

    name = "declares-idle-but-preempts"
    decides_only_when_waiting = True

    def reset(self, view):
        self.done = False

    def decide(self, view):
        decision = super().decide(view)
        if not view.pending and view.running and not self.done:
            self.done = True
            decision.allocations[next(reversed(view.running))] = None
        return decision


class DeclaresArrivalsWaitButBackfills(Greedy):
    """Declares that arrivals behind a waiting job change nothing, yet starts any pending job
    that fits (backfilling: a small arrival starts past a large waiting one)."""

    name = "declares-freed-but-backfills"
    decides_only_when_freed = True


class DeclaresItWaitsButBackfills(Greedy):
    """Declares the GPUs of the first pending job it left waiting as what it waits for, yet starts
    any pending job that fits (a small job behind the head starts in a gap an end left)."""

    name = "declares-waits-but-backfills"

    def reset(self, view):
        self.head = None

    def decide(self, view):
        decision = super().decide(view)
        left = [j for j in self.order(view) if j.job_id not in decision.allocations]
        self.head = left[0].num_gpus if left else None
        return decision

    def waits_for_gpus(self):
        return self.head


def _fails(cls, check: str, match: str, **kw) -> ConformanceError:
    """``cls`` fails the suite at ``check``, with a message matching ``match``."""
    with pytest.raises(ConformanceError, match=match) as info:
        check_policy(cls, examples=kw.pop("examples", 3), determinism=kw.pop("determinism", False), **kw)
    assert f"policy {cls.name!r}" in str(info.value)
    assert info.value.check == check, str(info.value)
    return info.value


# Each mutant: the check that must catch it and the reason it must give. The first failing
# check is reported, so each reason is asserted exactly (a nondeterministic policy reported as
# "reads ground truth" fails here).
MUTANTS = [
    (OverAllocating, "capacity", r"over-allocated a node.*node 0"),
    (ReadsTruth, "hidden truth", r"non-oracle policy read ground truth.*remaining_work"),
    (ReadsTruthAroundItsView, "hidden truth", r"views equal in every observable.*decided .* at t=\d"),
    (ReadsTruthOnceAJobEnded, "hidden truth", r"views equal in every observable.*at t=[1-9][\d.]* s \(decision [2-9]"),
    (ReadsDurationAfterTimeZero, "hidden truth", r"views equal in every observable.*at t=[1-9][\d.]* s"),
    # the engine's clock is a plain Observer too (no event queue behind it): it fails at the first decision
    (ReadsTheEventQueue, "decide raises", r"raised AttributeError: 'Observer' object has no attribute '_env'"),
    (ReadsTruthThroughProfiled, "hidden truth", r"views equal in every observable.*reads ground truth around its view"),
    (UnseededRandom, "nondeterminism", r"a second instance given the very same views decided .*unseeded randomness"),
    (ClassState, "class state", r"ClassState\.starts was changed during a run.*shared by every instance"),
    (ModuleState, "class state", r"tests\.policies\.test_conformance\._SEEN was changed during a run"),
    (ResetDoesNotReset, "reset", r"the same instance run a second time on the same input decides otherwise at "
                                 r"decision 1: \(0\.0, \(\), \d+\.\d+\) vs"),
    (WritesFree, "views unchanged", r"decide tried to mutate what it was given.*read-only"),
    (ChangesGrants, "views unchanged", r"changed what it was given: running jobs: job .c\d+.'s allocation changed"),
    (DropsFromPending, "views unchanged", r"tried to mutate what it was given: TypeError: 'mappingproxy' object does "
                                          r"not support item deletion"),
    (WakesEveryMicrosecond, "event budget", r"runs away.*event budget"),
    (HalfGang, "gang bounds", r"outside the job's bounds.*\(gang\)"),
    (PlacesOnDownNodes, "down nodes", r"placed tasks on a node that is down.*job 'c\d+' placed on node 0, which is down"),
    (Starves, "completes", r"'c9': never started"),
    (Crashes, "decide raises", r"decide raised KeyError: 'no such queue'"),
    (ResetCrashes, "decide raises", r"reset raised RuntimeError: no queues configured"),
    (AllocatesAGhost, "valid decision", r"job 'ghost' is not pending or running"),
    (ReturnsADict, "valid decision", r"returned dict, not a Decision"),
    (DeclaresIdleButWakes, "declared capability", r"declares decides_only_when_waiting, yet with no job pending at "
                                                  r"t=[\d.]+ s it decided \(\(\), 60\.0\)"),
    (DeclaresIdleButPreempts, "declared capability", r"no job pending at t=[\d.]+ s it decided \(\(\('c\d+', \(\)\),\), None\)"),
    (DeclaresItWaitsButBackfills, "declared capability", r"declares waits_for_gpus, yet at t=[\d.]+ s, with [\d.]+ GPUs "
                                                         r"free, fewer than the [\d.]+ its previous decision"),
]


@pytest.mark.parametrize("cls, check, reason", MUTANTS, ids=[m[0].name for m in MUTANTS])
def test_a_mutant_fails_with_the_right_reason(cls, check, reason):
    _fails(cls, check, rf"fails check '{check}' on input contention.*{reason}")


def test_the_same_policy_may_read_truth_as_an_oracle():
    class Oracle(ReadsTruth):
        oracle = True

    class SneakyOracle(ReadsTruthAroundItsView):
        oracle = True
    check_policy(Oracle, examples=3, determinism=False)
    check_policy(SneakyOracle, examples=3, determinism=False)


def test_hash_order_fails_determinism_across_processes():
    _fails(HashOrder, "determinism", r"fails check 'determinism'.*differs between PYTHONHASHSEED=1 and "
                                     r"PYTHONHASHSEED=2", determinism=True, examples=1)


def test_hash_order_passes_every_check_within_one_process():
    check_policy(HashOrder, examples=3, determinism=False)


def test_waking_every_microsecond_runs_away_quickly():
    t0 = time.perf_counter()
    _fails(WakesEveryMicrosecond, "event budget", r"runs away")
    assert time.perf_counter() - t0 < 5.0


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


def test_the_old_import_path_is_the_same_module():
    from clustersim import conformance
    from clustersim.policies import conformance as old
    assert old is conformance and old.check_policy is check_policy


# ---------------------------------------------------------------------------- the inputs
def test_inputs_follow_the_tags():
    from clustersim.conformance import _drawn, _examples
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


def test_arrivals_behind_a_waiting_job_are_checked_when_a_policy_declares_they_change_nothing():
    # 4 + 2 GPUs: a (3 GPUs) starts at 0 and leaves 1 + 2 free; b (4 GPUs) cannot fit and waits;
    # c (1 GPU) arrives at 10 with nothing freed since. FIFO keeps c behind b, as it declares (both
    # start when a ends at 100); a backfilling policy starts c at 10, which its declaration denies
    case = Case("blocked head", (NodeGroup(1, 4, 32, 128), NodeGroup(1, 2, 16, 64)),
                tuple(jobs(gpu_job("a", 0.0, 3, 100.0), gpu_job("b", 0.0, 4, 50.0), gpu_job("c", 10.0, 1, 20.0))))
    out = run_case(policies.get("fifo"), case)
    assert [(e[0], [j for j, _ in e[1]]) for e in out.log if e[1]] == [(0.0, ["a"]), (100.0, ["b", "c"])]
    with pytest.raises(Exception) as info:
        run_case(DeclaresArrivalsWaitButBackfills, case)
    assert info.value.check == "declared capability"
    assert "declares decides_only_when_freed, yet at t=10 s" in info.value.why and "(('c', " in info.value.why


def test_an_end_that_frees_too_little_is_checked_when_a_policy_declares_what_it_waits_for():
    # one 4-GPU node: a and b (2 GPUs each) start at 0; c (4 GPUs) arrives at 1 and waits; d (1 GPU)
    # arrives at 2 behind it with nothing free. b ends at 50 and frees 2 GPUs, fewer than c's 4: FIFO
    # starts nothing then, as it declares (c starts when a ends at 100, d when c ends at 110); a
    # policy that backfills starts d at 50, with 2 + 1e-9 < 4 GPUs free, which its declaration denies
    case = Case("too little freed", (NodeGroup(1, 4, 32, 128),),
                tuple(jobs(gpu_job("a", 0.0, 2, 100.0), gpu_job("b", 0.0, 2, 50.0), gpu_job("c", 1.0, 4, 10.0),
                           gpu_job("d", 2.0, 1, 5.0))))
    out = run_case(policies.get("fifo"), case)
    assert [(e[0], [j for j, _ in e[1]]) for e in out.log if e[1]] == [(0.0, ["a", "b"]), (100.0, ["c"]),
                                                                        (110.0, ["d"])]
    assert 50.0 in [e[0] for e in out.log]   # the suite's engine asked FIFO at b's end, and checked it
    with pytest.raises(Exception) as info:
        run_case(DeclaresItWaitsButBackfills, case)
    assert info.value.check == "declared capability"
    assert ("declares waits_for_gpus, yet at t=50 s, with 2 GPUs free, fewer than the 4" in info.value.why
            and "(('d', " in info.value.why)
