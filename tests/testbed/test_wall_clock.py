"""TestbedEngine's clock and polling, with scripted jobs in place of real processes (no torch):
nothing is handled before its time on the wall clock, a poll ends a job that reports its work
done and settles the measured cost of its start, and a run with nothing left to happen ends."""

import time

import pytest

from clustersim.policies.base import Decision, Policy
from clustersim.policies.fifo import Fifo
from clustersim.testbed import real
from tests.factories import cluster, gpu_job, jobs

START_S = 0.05   # a scripted job's start: decision to first iteration (s)
RATE = 100.0     # its iterations per second of wall time


class _Job:
    def __init__(self, target: int):
        self.target, self.gen, self.saved, self.since = target, -1, 0, None


class ScriptedTasks:
    """``Tasks``' interface on the wall clock: a started job's first iteration comes ``START_S``
    after its start, then it trains ``RATE`` iterations/s until its target."""

    def __init__(self, targets: dict[str, int]):
        self.jobs = {j: _Job(n) for j, n in targets.items()}

    def start(self, job: str, n: int, ps: int = 0) -> None:
        j = self.jobs[job]
        j.gen, j.since = j.gen + 1, time.monotonic()

    def first(self, job: str, gen: int):
        j = self.jobs[job]
        t = j.since + START_S
        return {"t": t, "it": j.saved} if gen == j.gen and time.monotonic() >= t else None

    def progress(self, job: str):
        j = self.jobs[job]
        trained = time.monotonic() - j.since - START_S
        return {"it": min(j.saved + int(RATE * trained), j.target)} if trained >= 0 else None

    def done(self, job: str):
        rep = self.progress(job)
        return rep if rep is not None and rep["it"] >= self.jobs[job].target else None

    def stop(self, job: str) -> int:
        rep = self.progress(job)
        self.jobs[job].saved = rep["it"] if rep else self.jobs[job].saved
        return self.jobs[job].saved

    def exit_of(self, job: str, gen: int):
        return None

    def check(self) -> None:
        pass

    def finish(self, job: str) -> None:
        pass

    def close(self) -> None:
        pass


class Clocked(Fifo):
    """FIFO, noting (decision time, wall seconds since ``t0``) at every decision."""

    def __init__(self, t0: float):
        super().__init__()
        self.t0, self.seen = t0, []

    def decide(self, view):
        self.seen.append((view.now, time.monotonic() - self.t0))
        return super().decide(view)


def run(specs, policy, targets):
    engine = real.TestbedEngine(specs, cluster(gpus=1), policy, ScriptedTasks(targets), "stop_resume", 0.02,
                                progress=False)
    rec = engine.run()
    return {s.spec.job_id: s for s in rec.states}, rec


def test_real_time_polling_ends_jobs_and_measures_their_starts():
    # one slot: b (arrives at 0.1 s) waits for a, which trains 20 iterations at 100/s after a
    # 0.05 s start: a reports done 0.05 + 20/100 = 0.25 s after its start, b as long after a's end
    t0 = time.monotonic()
    policy = Clocked(t0)
    states, rec = run(jobs(gpu_job("a", 0.0, 1, 1.0, work=20), gpu_job("b", 0.1, 1, 1.0, work=20)),
                      policy, {"a": 20, "b": 20})
    a, b = states["a"], states["b"]
    assert [s.status.value for s in (a, b)] == ["finished", "finished"] and not rec.unfinished
    assert a.progress == a.spec.total_work and b.progress == b.spec.total_work
    assert any(now == pytest.approx(0.1) for now, _ in policy.seen)       # b's arrival was decided at 0.1 s
    assert all(wall >= now for now, wall in policy.seen)                  # never before its time on the wall
    assert a.first_start == 0.0 and b.first_start == a.end_time           # FIFO on one slot: b takes a's
    events = rec.events().to_pylist()
    assert [(e["job_id"], e["kind"]) for e in events] == [("a", "start"), ("a", "finish"), ("b", "start"),
                                                          ("b", "finish")]
    for st in (a, b):   # the measured start: from the decision to the first iteration
        start = next(e for e in events if e["job_id"] == st.spec.job_id and e["kind"] == "start")
        assert START_S <= start["overhead_s"] == st.overhead_s < 1.0


class Never(Policy):
    name = "never"

    def decide(self, view):
        return Decision()


def test_a_run_with_nothing_left_to_happen_ends_with_the_job_unfinished():
    t0 = time.monotonic()
    states, rec = run(jobs(gpu_job("a", 0.0, 1, 1.0, work=20)), Never(), {"a": 20})
    assert time.monotonic() - t0 < 5.0                                   # polling stopped: no hang
    assert states["a"].status.value == "unfinished"
    assert [u["job_id"] for u in rec.unfinished] == ["a"] and "never started" in rec.unfinished[0]["reason"]
