"""Derived metrics worked by hand, the waiting time after preemptions, and the standard plots."""

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from clustersim.experiment import compose, run
from clustersim.simulator.metrics import extra_summary, finish_time_fairness, tenant_summary


def timeline(rows):
    t, gpu, running, pending = zip(*rows)
    z = [0.0] * len(t)
    return pa.table({"time": list(map(float, t)), "gpu_used": list(map(float, gpu)), "cpu_used": z, "mem_used": z,
                     "running": list(running), "pending": list(pending)})


def test_finish_time_fairness_by_hand():
    # 4 GPUs; A and B both ask for 4 GPUs for 10 s and arrive at 0; A runs first, B waits.
    jobs = pa.table({"submit_time": [0.0, 0.0], "end_time": [10.0, 20.0], "num_gpus": [4.0, 4.0],
                     "duration_alone": [10.0, 10.0]})
    tl = timeline([(0, 4, 1, 1), (10, 4, 1, 0), (20, 0, 0, 0)])
    rho = finish_time_fairness(jobs, tl, 4.0)
    # A: N = 2 over [0, 10]; alone on 2 of 4 GPUs, time-shared: 10 * 4 * 2 / 4 = 20 s; rho = 10 / 20
    # B: N = (2 * 10 + 1 * 10) / 20 = 1.5; alone: 10 * 1.5 = 15 s; rho = 20 / 15
    assert rho.tolist() == pytest.approx([0.5, 20 / 15])


def test_a_job_that_fits_its_fair_share_is_measured_against_its_duration_alone():
    jobs = pa.table({"submit_time": [0.0, 5.0], "end_time": [12.0, None], "num_gpus": [1.0, 1.0],
                     "duration_alone": [10.0, 10.0]})
    tl = timeline([(0, 1, 1, 0), (5, 1, 1, 1), (12, 1, 1, 0)])
    rho = finish_time_fairness(jobs, tl, 8.0)
    assert rho[0] == pytest.approx(12 / 10)   # 8 GPUs / N = 1.4 jobs > 1 GPU: no time sharing
    assert math.isnan(rho[1])                 # unfinished: no rho


def test_busy_window_utilization_leaves_out_idle_gaps_and_absent_resources():
    tl = timeline([(0, 4, 1, 0), (10, 0, 0, 0), (30, 2, 1, 0), (40, 0, 0, 0)])
    jobs = pa.table({"status": ["finished", "finished"], "waiting_time": [0.0, 3.0], "gpu_hours": [40 / 3600, 20 / 3600],
                     "ftf_rho": [1.0, 0.5]})
    s = extra_summary(jobs, tl, (4.0, 0.0, 0.0))
    assert s["busy_time"] == 20.0
    assert s["gpu_util_busy"] == pytest.approx((4 * 10 + 2 * 10) / (4 * 20))   # 0.75; over [0, 40] it is 0.375
    assert s["cpu_util_busy"] is None and s["mem_util_busy"] is None          # no CPUs or memory modelled
    assert s["waiting_time_mean"] == 1.5 and s["gpu_hours"] == pytest.approx(60 / 3600)
    assert (s["ftf_rho_mean"], s["ftf_rho_max"], s["ftf_unfair_fraction"]) == (0.75, 1.0, 0.0)


def test_tenant_summary_by_hand():
    jobs = pa.table({"tenant": ["a", "b", "a", None], "status": ["finished", "finished", "unfinished", "finished"],
                     "jct": [10.0, 30.0, None, 7.0], "waiting_time": [2.0, 4.0, 100.0, 0.0],
                     "gpu_hours": [1.0, 2.0, 0.5, 0.25], "ftf_rho": [1.0, 2.0, float("nan"), 0.5]})
    table = tenant_summary(jobs)
    assert table["tenant"].to_pylist() == ["a", "b", None]
    t = table.to_pandas()
    a = t.iloc[0]
    assert (a["jobs"], a["jobs_finished"], a["jct_mean"], a["waiting_time_mean"], a["gpu_hours"]) == (2, 1, 10.0, 2.0, 1.5)
    assert t.iloc[1]["ftf_rho_max"] == 2.0 and t.iloc[2]["jobs"] == 1


def test_waiting_time_counts_the_waits_after_preemptions(tmp_path):
    # SRTF preempts on the contended default cluster; with free reconfiguration a finished job's
    # JCT is exactly the time it waited plus the time it held GPUs
    run(compose(["policy=srtf", "progress=false"]), tmp_path)
    jobs = pd.read_parquet(tmp_path / "jobs.parquet")
    events = pd.read_parquet(tmp_path / "events.parquet").sort_values("time", kind="stable")
    held = {}
    for j, ev in events.groupby("job_id"):
        t, g = ev["time"].to_numpy(), ev["gpus_after"].to_numpy()
        held[j] = float(np.sum(np.diff(t)[g[:-1] > 0]))
    preempted = jobs[jobs["preemptions"] > 0]
    assert len(preempted) > 0
    assert (preempted["waiting_time"] > preempted["queueing_delay"] + 1.0).all()
    assert (jobs["waiting_time"] >= jobs["queueing_delay"] - 1e-9).all()
    for _, r in jobs.iterrows():
        assert r["jct"] == pytest.approx(r["waiting_time"] + held[r["job_id"]], abs=1e-6), r["job_id"]
    assert jobs["gpu_hours"].tolist() == pytest.approx((jobs["gpu_seconds"] / 3600).tolist())


def test_plots_of_a_sweep_are_non_empty_images(tmp_path):
    from matplotlib.image import imread

    from clustersim.plot import plot

    sweep = tmp_path / "sweep"
    for policy in ("fifo", "srtf"):
        for seed in (0, 1):
            run(compose([f"policy={policy}", f"seed={seed}", "progress=false"]), sweep / f"{policy}_s{seed}")
    written = plot(sweep, formats=("png", "svg"))
    names = {p.name for p in written}
    for stem in ("jct_cdf", "jct_makespan_bars", "gpu_util", "queue_length", "gantt_fifo_s0", "gantt_srtf_s0"):
        assert {f"{stem}.png", f"{stem}.svg"} <= names, stem
    for p in written:
        if p.suffix == ".png":
            img = imread(p)
            assert img.shape[0] > 100 and img.shape[1] > 100
            assert img[..., :3].std() > 0.05, p.name   # something is drawn, not a blank canvas
    summary = pd.read_csv(sweep / "plots" / "summary.csv", index_col=0)
    assert summary.loc["srtf", "jct_mean"] < summary.loc["fifo", "jct_mean"]
    assert summary["seeds"].tolist() == [2, 2]


def test_profile_fit_against_its_measured_points(tmp_path):
    from clustersim.analysis import profile_fit, save

    fig = profile_fit("resnet50")
    line = [ln for ln in fig.axes[0].lines if ln.get_linestyle() == "None"]
    assert len(line) == 3   # measured points at three batch sizes
    paths = save(fig, tmp_path / "resnet50", ("png",))
    assert paths[0].stat().st_size > 5000


def test_a_run_never_replaces_a_directory_that_is_not_a_run(tmp_path):
    from clustersim.simulator.errors import ConfigError

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a run directory"):
        run(compose(["progress=false", "until=10"]), tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
