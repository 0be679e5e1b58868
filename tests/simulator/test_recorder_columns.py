"""Ended jobs as the recorder's columns: the engine lets a job's state go once policies have seen
it end, and what stands in its place (``Ended``), the jobs table and the summary read the same
numbers the state held. A fault model's fields live in a ``FaultState`` made only when needed."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np
import pytest

from clustersim.policies.fifo import Fifo
from clustersim.policies.tiresias import Tiresias
from clustersim.simulator import faults
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import FAULT_FIELDS, TALLY_FIELDS, JobSpec, JobState, RoleSpec, Status
from clustersim.simulator import metrics
from clustersim.simulator.metrics import Ended, EndedAt, Recorder, efficiency
from clustersim.simulator.overhead import ConstantOverhead
from tests.factories import cluster, gpu_job, jobs


def test_a_fault_field_makes_its_record_only_when_it_is_not_the_default():
    st = JobState(gpu_job("a", 0.0, 1, 10.0))
    st.ckpts, st.factor, st.lost_s, st.recoveries = None, 1.0, 0.0, 0   # the defaults: nothing to keep
    assert st.fault is None and st.lost_s == 0.0 and st.failed_by is None
    st.lost_s = -0.0   # not the default's sign: kept as written
    assert st.fault is not None and math.copysign(1.0, st.lost_s) == -1.0
    st.lost_s += 2.5
    st.failed_by = {"oom": 1}
    assert (st.fault.lost_s, st.fault.failed_by, st.fault.factor) == (2.5, {"oom": 1}, 1.0)


def test_hand_worked_fifo_run_reads_the_same_from_the_columns():
    # one 4-GPU node. a: 4 GPUs for 100 s from t=0; b: 4 GPUs for 50 s, arrives at t=10 and waits for a:
    # it starts at 100 and ends at 150. JCT a 100, b 150 - 10 = 140; queueing 0 and 90; GPU-seconds
    # 4 x 100 = 400 and 4 x 50 = 200
    specs = jobs(gpu_job("a", 0.0, 4, 100.0), gpu_job("b", 10.0, 4, 50.0))
    eng = Engine(specs, cluster(), Fifo(), progress=False)
    rec = eng.run()
    # a was reported ended at the decision at t=100: the state is let go at the next one (t=150);
    # b ended last, reported by the run's last decision, and keeps its state
    assert isinstance(eng.states["a"], Ended) and isinstance(eng.states["b"], JobState)
    a = eng.states["a"]
    assert (a.status, a.first_start, a.end_time, a.service, a.progress, a.waited) == \
        (Status.FINISHED, 0.0, 100.0, 400.0, 100.0, 0.0)
    assert (a.allocation, a.gpus, a.rate, a.fault, a.lost_s, a.failed_by) == ({}, 0.0, 0.0, None, 0.0, None)
    t = rec.jobs().to_pydict()
    assert t["job_id"] == ["a", "b"]
    assert t["first_start"] == [0.0, 100.0] and t["end_time"] == [100.0, 150.0]
    assert t["jct"] == [100.0, 140.0] and t["queueing_delay"] == [0.0, 90.0] and t["waiting_time"] == [0.0, 90.0]
    assert t["gpu_seconds"] == [400.0, 200.0] and t["progress"] == [1.0, 1.0] and t["status"] == ["finished"] * 2
    s = rec.summary()
    assert (s["jobs"], s["jobs_finished"], s["jct_mean"], s["makespan"]) == (2, 2, 120.0, 150.0)
    assert s["gpu_seconds_by_type"] == {next(iter(s["gpu_seconds_by_type"])): 600.0}


def test_an_unfinished_job_counts_its_open_allocation_up_to_the_end():
    # c holds 2 GPUs from t=0 and would need 100 s; the run stops at until=30: 2 x 30 = 60 GPU-seconds,
    # no end time, no JCT; d (4 GPUs) never fits beside it
    specs = jobs(gpu_job("c", 0.0, 2, 100.0), gpu_job("d", 5.0, 4, 10.0))
    rec = Engine(specs, cluster(), Fifo(), progress=False, until=30.0).run()
    t = rec.jobs().to_pydict()
    assert t["status"] == ["unfinished", "unfinished"]
    assert t["end_time"] == [None, None] and t["jct"] == [None, None] and t["first_start"] == [0.0, None]
    assert t["gpu_seconds"] == [60.0, 0.0] and t["gpu_types"][1] is None and t["gpu_types"][0]
    s = rec.summary()
    assert list(s["gpu_seconds_by_type"].values()) == [60.0] and s["jobs_unfinished"] == 2
    assert [u["job_id"] for u in s["unfinished_jobs"]] == ["c", "d"]


def _faulty_run(seed: int):
    """Tiresias preempting with overheads, tasks failing, restarting from checkpoints, one job out of retries."""
    specs = [gpu_job(f"j{i}", 100.0 * i, 2 + 2 * (i % 2), 1500.0 + 300.0 * (i % 5), index=i) for i in range(16)]
    fm = faults.make({"enabled": True, "task": {"per_pod_day": 0.99, "size_exponent": 1.0}, "retries": 1,
                      "checkpoint": {"interval_s": 60.0}}, seed)
    return Engine(specs, cluster(nodes=2, gpus=4), Tiresias(), progress=False, faults=fm,
                  overhead=ConstantOverhead(start_s=3.0, resume_s=5.0))


@pytest.mark.parametrize("seed", [0, 1])
def test_ended_reads_every_field_its_state_held(seed):
    eng = _faulty_run(seed)
    # the states themselves, kept alive here (read before their jobs arrive: the arrivals take these)
    kept = {j.job_id: eng.states[j.job_id] for j in eng.jobs}
    rec = eng.run()
    # all but the engine's bookkeeping of a running job (and the samples, dropped once reported)
    skip = ("spec", "samples", "busy_until", "pending_since", "version", "tally")
    names = [f.name for f in fields(JobState) if f.name not in skip] + list(FAULT_FIELDS) + list(TALLY_FIELDS)
    ended = [j for j, e in eng.states.items() if isinstance(e, Ended)]
    assert len(ended) >= 12
    failed = preempted = 0
    for job in ended:
        e, st = eng.states[job], kept[job]
        assert e.spec is st.spec
        for name in names:
            assert getattr(e, name) == getattr(st, name) or (getattr(st, name) is None and getattr(e, name) is None), \
                (job, name)
        failed += st.failures
        preempted += st.preemptions
    assert failed > 0 and preempted > 0   # the run exercised both paths, and a job's failed end
    assert any(eng.states[job].status is Status.FAILED for job in ended)
    t = rec.jobs().to_pydict()
    for i, job in enumerate(t["job_id"]):
        st = kept[job]
        assert t["end_time"][i] == st.end_time and t["gpu_seconds"][i] == st.service
        assert t["failures_failed"][i] == (st.failed_by or {}).get("failed", 0)
        assert t["lost_s"][i] == st.lost_s and t["recover_s"][i] == st.recover_s
    s = rec.summary()
    states = [kept[j] for j in t["job_id"]]
    assert s["lost_gpu_s"] == sum(st.lost_gpu_s for st in states)   # the same order, the same rounding
    assert s["overhead_s"] == sum(st.overhead_s for st in states)
    assert s["failures"] == sum(st.failures for st in states)


def test_ended_is_read_only():
    role = RoleSpec("worker", 4, 1.0, 0.0, 0.0, 4, 4)
    specs = [JobSpec(i, f"j{i}", float(i), (role,), 5.0, 5.0) for i in range(3)]   # one after another
    eng = Engine(specs, cluster(), Fifo(), progress=False)
    eng.run()
    e = eng.states["j0"]
    assert isinstance(e, Ended)
    with pytest.raises(AttributeError):
        e.end_time = 1.0


def test_event_kinds_kept_as_codes_come_back_as_recorded():
    # kinds are kept a byte an event and decoded when the table is built: the same strings, in order
    rec = Recorder(cluster())
    st = JobState(gpu_job("a", 0.0, 1, 10.0))
    kinds = ["start", "scale_out", "preempt", "resume", "scale_in", "scale_out", "finish"]
    for t, (kind, lost) in enumerate(zip(kinds, [0.0, 2.0, 0.0, 0.0, 0.5, 0.25, 0.0])):
        rec.event(float(t), st, kind, lost)
    t = rec.events().to_pydict()
    assert t["kind"] == kinds and t["job_id"] == ["a"] * 7 and t["time"] == [0.0, 1, 2, 3, 4, 5, 6]
    st.status, st.first_start, st.end_time = Status.FINISHED, 0.0, 6.0
    rec.finish([st], 6.0)
    e = efficiency(rec, 0.0, 6.0)
    # 2 scale-outs, 1 scale-in; reshaping (scale out/in) lost 2.0 + 0.5 + 0.25 = 2.75 s of a 6 s run
    assert (e["scale_out_events"], e["scale_in_events"], e["overhead_ratio"]) == (2, 1, 2.75 / 6.0)


def test_rows_at_the_trace_index_or_in_the_order_jobs_end_give_the_same_tables():
    # a (t=0, 100 s) ends last, b (t=1, 10 s) first, reported at c's arrival (t=20, ends at 30):
    # with indices 0, 1, 2 an ended job's row is its index (Ended holds no row number); with
    # indices 7, 3, 9 (not 0 .. n-1) rows go in the order jobs end (EndedAt)
    def run(ia, ib, ic):
        specs = [gpu_job("a", 0.0, 2, 100.0, index=ia), gpu_job("b", 1.0, 2, 10.0, index=ib),
                 gpu_job("c", 20.0, 2, 10.0, index=ic)]
        eng = Engine(specs, cluster(), Fifo(), progress=False)
        t = eng.run().jobs().to_pylist()
        return eng.states["b"], {r["job_id"]: {k: v for k, v in r.items() if k != "index"} for r in t}, t
    b, dense, t = run(0, 1, 2)
    assert isinstance(b, Ended) and not isinstance(b, EndedAt) and b._row == 1 and b.end_time == 11.0
    assert [r["job_id"] for r in t] == ["a", "b", "c"] and [r["end_time"] for r in t] == [100.0, 11.0, 30.0]
    b, sparse, t = run(7, 3, 9)
    assert isinstance(b, EndedAt) and b._row == 0 and b.end_time == 11.0   # b ended first
    assert [r["job_id"] for r in t] == ["b", "a", "c"]   # the trace's order: 3, 7, 9
    assert sparse == dense


def test_areas_are_the_per_event_loop():
    # level 0, area 0; three events, each dt after the previous one: (lower, raise, dt) =
    # (0, 4, 0), (0, 2, 10), (4, 0, 5): area = 0 x 0 + 4 x 10 + 6 x 5 = 70, level 4 + 2 - 4 = 2
    level, area = metrics._areas(0.0, 0.0, [0.0, 0.0, 4.0], [4.0, 2.0, 0.0], np.array([0.0, 10.0, 5.0]))
    assert (level, area) == (2.0, 70.0)
    # from a carried level and area (the next chunk of events): 2 x 3 added, then the level falls to 0
    assert metrics._areas(2.0, 70.0, [2.0], [0.0], np.array([3.0])) == (0.0, 76.0)
    # values whose sum depends on the order: numpy's cumulative sum adds one after another, as the loop
    rng = np.random.default_rng(3)
    minus, plus, dt = rng.random(500).tolist(), (rng.random(500) * 1e6).tolist(), rng.random(500) * 7.3
    lvl, ar = 0.1, 0.2
    for m, p, d in zip(minus, plus, dt.tolist()):
        ar += lvl * d
        lvl = lvl - m + p
    assert metrics._areas(0.1, 0.2, minus, plus, dt) == (lvl, ar)


def test_efficiency_is_the_same_in_chunks_of_any_size(monkeypatch):
    # jobs start in one chunk and finish in a later one (at chunk 1, every event is a chunk): the
    # running sums and the jobs' held GPUs carried from chunk to chunk give one pass's figures, to the bit
    specs = jobs(*(gpu_job(f"j{i}", float(i * 7 % 50), 1 + i % 4, 30.0 + i % 9 * 10) for i in range(60)))
    eng = Engine(specs, cluster(nodes=2), Tiresias(), progress=False)
    rec = eng.run()
    whole = efficiency(rec, 0.0, rec.end_time)
    assert whole["gpu_efficiency_mean"] is not None
    for chunk in (1, 7, 64):
        monkeypatch.setattr(metrics._by_time, "__defaults__", (chunk,))
        assert efficiency(rec, 0.0, rec.end_time) == whole
