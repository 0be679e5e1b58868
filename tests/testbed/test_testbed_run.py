"""A two-job testbed on CPU, for real (gloo, core-pinned processes: a data-parallel job and a
parameter-server job), and the job protocol of simulator/calibration/jobrun.py (start, stop-free
scale-out and in, checkpoint, resume) for both kinds of job. Skipped when torch is absent
(pip install "clustersim[calibrate]").
"""

import functools
import json
import math
import time

import pytest

pytest.importorskip("torch", reason='torch is not installed: pip install "clustersim[calibrate]" (torch==2.13.0)')

import pyarrow.parquet as pq  # noqa: E402

from clustersim.testbed import cli, compare  # noqa: E402

MLP = ["model.params.samples=512", "model.params.features=64", "model.params.hidden=[64,64]"]
# seed 2, ps_share 0.5: j00 a 1-worker data-parallel job, j01 a PS job (1 PS + 1 worker)
TWO_JOBS = ["policies=[fifo]", "repeat=fifo", "trace.jobs=2", "trace.models=[mlp]", "trace.workers=[1]",
            "trace.work_s=[2,3]", "trace.mean_gap_s=1", "trace.ps_share=0.5", "seed=2", "timeout_s=120", "plot=true"]
CALIBRATE = ["pin=true", "plot=false", "ps.p=[1,2]", "ps.w=[1,2,3]", "ps.steps=4", "ps.warmup=1", "ps.repeats=1",
             "convergence.enabled=false", "dataparallel.workers=[1,2]",
             "dataparallel.batch=[16,32,64]", "dataparallel.steps=4", "dataparallel.warmup=1",
             "dataparallel.repeats=2", "overhead.sizes=[[1,2]]", "overhead.pre_steps=3", "overhead.post_steps=2",
             "fit.repeats=3", *MLP]


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    out = tmp_path_factory.mktemp("tb")
    t0 = time.perf_counter()
    cfg = cli.load_config([*TWO_JOBS, f"out={out}"])
    cfg["calibrate"] = CALIBRATE
    result = cli.run(cfg)
    return out, result, time.perf_counter() - t0


def test_real_run_writes_what_a_simulation_writes(testbed):
    out, _, _ = testbed
    for name in ("jobs", "events", "timeline", "tenants"):
        real, sim = (pq.read_schema(out / "fifo" / d / f"{name}.parquet") for d in ("real", "sim"))
        assert real.equals(sim), name
    real, sim = (json.loads((out / "fifo" / d / "summary.json").read_text()) for d in ("real", "sim"))
    assert set(real) == set(sim)
    assert real["jobs_finished"] == 2 and real["jobs_unfinished"] == 0
    assert json.loads((out / "fifo" / "real" / "run.json").read_text())["kind"] == "testbed"


def test_each_real_job_started_trained_its_work_and_finished(testbed):
    out, _, _ = testbed
    jobs = pq.read_table(out / "fifo" / "real" / "jobs.parquet").to_pylist()
    events = pq.read_table(out / "fifo" / "real" / "events.parquet").to_pylist()
    assert {j["job_id"]: j["profile"] for j in jobs} == {"j00": "mlp", "j01": "mlp_ps"}   # a DP and a PS job
    for j in jobs:
        assert j["status"] == "finished" and j["progress"] == 1.0
        assert [e["kind"] for e in events if e["job_id"] == j["job_id"]] == ["start", "finish"]
        start = next(e for e in events if e["job_id"] == j["job_id"] and e["kind"] == "start")
        # the measured start cost (decision to first iteration: a fresh Python, torch, the group)
        assert 0 < start["overhead_s"] == j["overhead_s"] < j["jct"]
        assert j["first_start"] >= j["submit_time"] and j["end_time"] > j["first_start"]


def test_the_simulation_uses_the_calibrated_ps_grid_and_rescale_costs(testbed):
    """The PS job's simulated speed is the measured PS grid at (1 PS, 1 worker), every profile
    carries the calibration's measured costs (scale-in, not EDL's 1.8 s; resume and each
    direction's stop-resume apart), and the simulation charges them."""
    import yaml

    out, _, _ = testbed
    fit = json.loads((out / "calibration" / "mlp" / "fit.json").read_text())
    fitted = yaml.safe_load((out / "calibration" / "mlp" / "profiles.yaml").read_text())
    table = yaml.safe_load((out / "calibration" / "mlp" / "profiles.table.yaml").read_text())
    assert fitted["mlp_ps"]["speed"]["kind"] == "optimus" and table["mlp_ps"]["speed"]["kind"] == "table"
    grid = table["mlp_ps"]["speed"]["grid"]
    assert grid["p"] == [1, 2] and grid["w"] == [1, 2, 3]
    for p, w, rate in fitted["mlp_ps"]["speed"]["points"]:     # the same measured points, as a p x w grid
        assert grid["samples_per_s"][p - 1][w - 1] == rate
    costs = fit["fits"]["overhead"]["costs"]
    assert costs["scale_in_s"] > 0 and fit["fits"]["overhead"]["not_measured"] == []
    assert table["mlp"]["overhead"]["scale_in_s"] == table["mlp_ps"]["overhead"]["scale_in_s"] == costs["scale_in_s"]
    for key in ("resume_s", "stop_resume_out_s", "stop_resume_in_s"):
        assert table["mlp"]["overhead"][key] == table["mlp_ps"]["overhead"][key] == costs[key] > 0
    sim = json.loads((out / "fifo" / "sim" / "run.json").read_text())["config"]["overhead"]
    assert sim["kind"] == "stop_free" and sim["ps_stop_resume"] is True     # a new PS count: a stop-resume
    # FIFO starts each job once and never changes it: each simulated job is charged launch_s alone
    jobs = pq.read_table(out / "fifo" / "sim" / "jobs.parquet").to_pylist()
    assert [j["overhead_s"] for j in jobs] == pytest.approx([costs["launch_s"]] * 2)


def test_comparison_is_the_arithmetic_of_the_written_runs(testbed):
    out, result, _ = testbed
    e = result["policies"]["fifo"]["error"]
    real, sim = compare.jcts(out / "fifo" / "real"), compare.jcts(out / "fifo" / "sim")
    for j in real:
        assert e["per_job"][j] == pytest.approx((sim[j] - real[j]) / real[j])
    mean_r, mean_s = sum(real.values()) / 2, sum(sim.values()) / 2
    assert e["jct_mean"] == pytest.approx((mean_s - mean_r) / mean_r)
    spans = [json.loads((out / "fifo" / d / "summary.json").read_text())["makespan"] for d in ("sim", "real")]
    assert e["makespan"] == pytest.approx((spans[0] - spans[1]) / spans[1])
    noise = result["policies"]["fifo"]["noise"]
    assert noise["jobs"] == 2 and math.isfinite(noise["jct_mean"])
    saved = json.loads((out / "comparison.json").read_text())
    assert saved["policies"]["fifo"]["error"]["jct_mean"] == pytest.approx(e["jct_mean"])
    assert (out / "testbed.png").stat().st_size > 0 and "load_1m" in saved["host"]


def test_a_job_done_before_its_newcomers_are_ready_ends_them(tmp_path):
    import os

    from clustersim.testbed.real import Tasks

    t = Tasks(sorted(os.sched_getaffinity(0)), tmp_path, 120.0, 0.05, 0.02, 0.01)
    t.add("j", {"name": "mlp", "params": {"samples": 512, "features": 64, "hidden": [64, 64]}}, 16, 1, 500.0)
    try:
        t.start("j", 1)
        t.resize("j", 2)                 # the job's one iteration is done long before a Python starts
        deadline = time.monotonic() + 120
        while t.done("j") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert t.done("j")["it"] == 1
        t.finish("j")
        assert t.jobs["j"].procs == {} and all(v == 0 for v in t.load.values())
    finally:
        t.close()


def _wait(tasks, what, at_least=None, timeout_s=120.0):
    """Poll ``what()`` (a job's report, checking its tasks each time) until it reports, at iteration
    ``at_least`` or later when given; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tasks.check()
        got = what()
        if got is not None and (at_least is None or got["it"] >= at_least):
            return got
        time.sleep(0.05)
    raise AssertionError("the job did not report in time")


def test_job_protocol_scale_out_in_checkpoint_resume(tmp_path):
    """One job through every real change: start at 1, stop-free to 2 and back to 1, checkpoint
    and exit, resume from the checkpoint (its work, 10^7 iterations, is never reached)."""
    import os

    from clustersim.testbed.real import Tasks

    t = Tasks(sorted(os.sched_getaffinity(0)), tmp_path, 120.0, 0.05, 0.02, 0.01)
    model = {"name": "mlp", "params": {"samples": 512, "features": 64, "hidden": [64, 64]}}
    t.add("j", model, 16, 10_000_000, 500.0)
    try:
        wait = functools.partial(_wait, t)
        t.start("j", 1)
        it0 = wait(lambda: t.progress("j"), 20)["it"]
        t.resize("j", 2)                                   # newcomer prepares, rank 0 keeps training
        switched = wait(lambda: t.first("j", 1))
        assert switched["it"] >= it0                       # the newcomer continues, not restarts
        t.resize("j", 1)                                   # graceful scale-in: rank 1 leaves
        wait(lambda: t.first("j", 2))
        stopped_at = t.stop("j")                           # checkpoint, every task exits
        assert stopped_at >= switched["it"] and (tmp_path / "j.pt").exists()
        t.start("j", 1)                                    # resume: restores the checkpoint
        assert wait(lambda: t.first("j", 3))["it"] == stopped_at
        assert t.stop("j") >= stopped_at
        t.check()
        assert all(v == 0 for v in t.load.values())        # every core given back
    finally:
        t.close()


def test_ps_job_trains_exactly_sgd_through_rescales_checkpoint_and_resume(tmp_path, torch_one_thread):
    """A tiny synchronous PS job (global batch 16) through every real change: 1 PS + 1 worker,
    stop-free scale-out to 2 workers and back, checkpoint, resume on 2 PS + 1 worker, checkpoint.

    Hand-checkable: a synchronous PS applies the mean of its w workers' gradients, each of
    16 / w samples, so iteration k is one plain SGD step, theta -= lr * mean_i g_i, on worker i's
    samples ``batch(k, 16 / w, offset=i * 16 / w)``. The saved parameters must therefore equal
    that SGD run in this process, given the iteration at which each generation began."""
    import os

    import torch

    from clustersim.simulator.calibration import workloads
    from clustersim.simulator.calibration.launch import flat_grad, set_flat
    from clustersim.testbed.real import Tasks

    model = {"name": "mlp", "params": {"samples": 256, "features": 16, "hidden": [16]}}
    lr = 0.05
    t = Tasks(sorted(os.sched_getaffinity(0)), tmp_path, 120.0, 0.05, 0.02, lr)
    t.add("p", model, 16, 10_000_000, 500.0)
    try:
        wait = functools.partial(_wait, t)
        t.start("p", 2, ps=1)                              # rank 0: the PS, rank 1: the worker
        wait(lambda: t.progress("p"), 10)
        t.resize("p", 3)                                   # a second worker prepares, then joins
        at1 = wait(lambda: t.first("p", 1))["it"]
        t.resize("p", 2)                                   # graceful scale-in: the second worker leaves
        at2 = wait(lambda: t.first("p", 2))["it"]
        stop1 = t.stop("p")                                # PS 0 saves the whole parameters
        saved1 = torch.load(tmp_path / "p.pt")
        assert saved1["iteration"] == stop1 and at1 < at2 <= stop1
        t.start("p", 3, ps=2)                              # resume on 2 PS: the shards re-cut
        assert wait(lambda: t.first("p", 3))["it"] == stop1
        wait(lambda: t.progress("p"), stop1 + 5)
        stop2 = t.stop("p")
        saved2 = torch.load(tmp_path / "p.pt")
        t.check()
        assert all(v == 0 for v in t.load.values())        # every core given back
    finally:
        t.close()

    # the same iterations as plain SGD here: workers per iteration 1, then 2 from at1, 1 from at2
    torch.manual_seed(0)
    wl = workloads.build(model)
    theta = torch.cat([q.detach().reshape(-1) for q in wl.model.parameters()])
    for k in range(stop2):
        w = 2 if at1 <= k < at2 else 1
        m = 16 // w
        grads = []
        for i in range(w):
            set_flat(wl.model, theta)
            x, y = wl.batch(k, m, offset=i * m)
            wl.model.zero_grad(set_to_none=False)
            wl.loss(wl.model(*x), y).backward()
            grads.append(flat_grad(wl.model))
        theta = theta - lr * torch.stack(grads).mean(0)
        if k + 1 == stop1:
            assert torch.allclose(saved1["params"], theta, rtol=1e-4, atol=1e-6)
    assert saved2["iteration"] == stop2
    assert torch.allclose(saved2["params"], theta, rtol=1e-4, atol=1e-6)
    assert not torch.allclose(saved2["params"], saved1["params"])     # it trained after the resume
