"""Synthetic generators: seeded, faithful to their sources, and the Philly fit reproducible."""

import math

import numpy as np
import pytest

from clustersim import traces
from clustersim.simulator.rng import component_rng
from clustersim.traces import synthetic
from clustersim.traces.load import load
from clustersim.traces.schema import TraceError


def gen(seed=0, **params):
    return synthetic.generate(component_rng(seed, "trace.synthetic"), **params)


def test_same_seed_same_jobs():
    for params in [dict(generator="philly", jobs=200), dict(generator="dlrover", jobs=20),
                   dict(generator="optimus"), dict(generator="sidecar", workload="W2")]:
        assert gen(3, **params).equals(gen(3, **params))
        assert not gen(3, **params).equals(gen(4, **params))


def test_philly_constants_match_a_refit_of_the_bundled_trace():
    t = traces.read("philly_pollux", "bundled:philly_pollux/philly.csv")
    gpus, dur = np.array(t["num_gpus"]), np.array(t["duration"])
    for k, share in synthetic.PHILLY_GPUS.items():
        assert abs((gpus == k).mean() - share) < 1e-6
    for k, (mu, sigma) in synthetic.PHILLY_LOG_DURATION.items():
        logs = np.log(dur[gpus > 8] if k == "larger" else dur[gpus == k])
        assert abs(logs.mean() - mu) < 1e-4 and abs(logs.std() - sigma) < 1e-4
    span_h = (max(t["submit_time"].to_pylist()) - min(t["submit_time"].to_pylist())) / 3600
    assert abs(t.num_rows / span_h - synthetic.PHILLY_RATE_PER_HOUR) < 0.01
    assert synthetic.DURATION_BOUNDS_S == (dur.min(), dur.max())


def test_philly_generator_follows_the_fit():
    t = gen(generator="philly", jobs=20000)
    gpus, dur = np.array(t["num_gpus"]), np.array(t["duration"])
    assert abs((gpus == 1).mean() - synthetic.PHILLY_GPUS[1]) < 0.01
    assert abs(np.log(dur[gpus == 1]).mean() - synthetic.PHILLY_LOG_DURATION[1][0]) < 0.05
    gaps = np.diff(np.array(t["submit_time"]))
    assert abs(gaps.mean() - 3600 / synthetic.PHILLY_RATE_PER_HOUR) < 5  # Poisson at the fitted rate


def test_diurnal_arrivals_peak_at_the_peak_hour():
    t = gen(generator="philly", jobs=20000, arrival=dict(process="diurnal", rate_per_hour=100, amplitude=0.8,
                                                        peak_hour=14))
    hours = (np.array(t["submit_time"]) % 86400) // 3600
    counts = np.bincount(hours.astype(int), minlength=24)
    assert counts[14] > 3 * counts[2]  # rate 1.8x vs 0.2x the mean
    # at a low rate the first arrival comes hours after midnight; the peak must not move with it
    slow = gen(generator="philly", jobs=5000, arrival=dict(process="diurnal", rate_per_hour=2, amplitude=1,
                                                          peak_hour=14))
    hours = (np.array(slow["submit_time"]) % 86400) // 3600
    assert 12 <= np.argmax(np.bincount(hours.astype(int), minlength=24)) <= 16


def test_dlrover_ps_worker_jobs():
    t = gen(generator="dlrover", jobs=30, mix={"wide_deep": 1.0})
    row = t.to_pylist()[0]
    ps, worker = row["roles"]
    assert (ps["name"], ps["count"], ps["cpu"], ps["mem"], ps["gpu"]) == ("ps", 8, 16.0, 8.0, 0.0)
    assert (worker["name"], worker["count"], worker["cpu"], worker["mem"]) == ("worker", 24, 3.0, 4.0)
    assert (worker["min_count"], worker["max_count"]) == (1, 66)  # up to 200 cores per job
    assert row["iterations"] == 200_000 and row["duration"] == pytest.approx(200_000 / 210.0)
    with pytest.raises(traces.TraceError, match="unknown model"):
        gen(generator="dlrover", mix={"dcn": 1.0})


def test_optimus_testbed_workload():
    t = gen(generator="optimus")
    sub = np.array(t["submit_time"])
    assert t.num_rows == 60 and sub.min() >= 0 and sub.max() <= 12000
    models = t["model"].to_pylist()
    assert {m.removesuffix("/async") for m in models} <= set(synthetic.OPTIMUS_MODELS)
    n_async = sum(m.endswith("/async") for m in models)
    assert 15 <= n_async <= 45   # sync or async at random (§6.1), an even coin by default
    sync_only = gen(generator="optimus", async_share=0.0)   # the draws come last: same jobs, all sync
    assert sync_only["submit_time"].equals(t["submit_time"])
    assert sync_only["model"].to_pylist() == [m.removesuffix("/async") for m in models]
    for row in t.to_pylist():
        ps, worker = row["roles"]
        assert (ps["count"], worker["count"], ps["max_count"]) == (1, 1, 12)
        if row["model"].removesuffix("/async") == "ResNet-50":
            assert (ps["cpu"], ps["mem"], worker["cpu"], worker["mem"], worker["gpu"]) == (3, 9, 2, 8, 1)
    # §6.3.2 (Fig. 16): Poisson, 3 arrivals per 20-minute interval: 59 gaps of mean 400 s
    poisson = np.array(gen(generator="optimus", arrival="poisson")["submit_time"])
    assert poisson[0] == 0.0 and (np.diff(poisson) >= 0).all() and 200 < np.diff(poisson).mean() < 600
    with pytest.raises(TraceError, match="synthetic optimus: arrival must be 'uniform' or 'poisson', got 'google'"):
        gen(generator="optimus", arrival="google")


@pytest.mark.parametrize("workload, n", [("W1", 40), ("W2", 20), ("W3", 40), ("W4", 40)])
def test_sidecar_workloads(workload, n):
    t = gen(generator="sidecar", workload=workload)
    sub = np.array(t["submit_time"])
    assert t.num_rows == n and sub[0] == 0 and sub.max() <= 11000
    assert set(t["num_gpus"].to_pylist()) <= {1, 2, 4, 8}
    from clustersim.traces.synthetic import SIDECAR_PROFILES
    data_of = {profile: d for (_, d), profile in SIDECAR_PROFILES.items()}   # jobs are named by their profile
    for row in t.to_pylist():
        data = data_of[row["model"]]
        assert row["iterations"] == {"ImageNet": 1, "Cifar10": 10, "MNIST": 10}[data] * math.ceil(
            {"ImageNet": 1_281_167, "Cifar10": 50_000, "MNIST": 60_000}[data] / row["batch_size"])
    if workload == "W1":
        assert {"sidecar_resnet18", "sidecar_resnet8_cifar10"} & set(t["model"].to_pylist())


def test_synthetic_through_the_pipeline():
    t, report = load({"name": "s", "format": "synthetic", "options": {"generator": "sidecar", "workload": "W3"}}, seed=5)
    assert report.sources == [{"generator": "sidecar", "seed": 5, "jobs": 40}]
    with pytest.raises(traces.TraceError, match="unknown generator"):
        load({"format": "synthetic", "options": {"generator": "alibaba"}})


def test_dlrm_users_over_provision_each_task_as_the_papers_measured():
    """dlrm_jobs' habit: tuned task counts, per-task factors whose aggregate utilisation is [RM]
    §6.3's before-DLRover figure and with 80 % of jobs under half ([RM] Fig. 3); memory has no
    rounding, so its factors show directly (W&D worker: 4 GB tuned; PS: 8 GB)."""
    from clustersim.traces.synthetic import dlrm_jobs
    cols = dlrm_jobs(np.random.default_rng(3), jobs=4000, users=4000, mix={"wide_deep": 1.0, "deepfm": 0.0,
                                                                            "xdeepfm": 0.0, "dcn": 0.0})
    ps = [r[0] for r in cols["roles"]]
    wk = [r[1] for r in cols["roles"]]
    assert {(p.count, w.count) for p, w in zip(ps, wk)} == {(8, 24)}          # [D] Table 2's counts
    from clustersim.traces.synthetic import habit_lognormal
    short = np.zeros(len(ps), dtype=bool)
    for roles, tuned, util in ((wk, 4.0, 0.152), (ps, 8.0, 0.138)):
        f = np.array([r.mem for r in roles]) / tuned
        # [D] §2's under-provisioned jobs: one role at half its need, a PS or a worker alike (4.7 % / 2 each)
        half = f == 0.5
        assert half.mean() == pytest.approx(0.047 / 2, abs=0.008)
        assert not (short & half).any()   # one role a job
        short |= half
        f = f[~half]
        assert f.min() >= 1.0 - 1e-3 and f.max() <= 192.0 / tuned + 1e-3    # the need .. one machine
        assert (f > 2.0).mean() == pytest.approx(0.8, abs=0.03)
        # the law's own mean gives the utilisation (clipped at 1 and at the pod's 192 GB: a PS's
        # factor stops at 24, which lifts its 13.8 % to ~15 %)
        law = np.clip(np.random.default_rng(0).lognormal(*habit_lognormal(util), 400_000), 1.0, 192.0 / tuned)
        assert 1.0 / f.mean() == pytest.approx(1.0 / law.mean(), rel=0.08)
        assert 1.0 / law.mean() == pytest.approx(util, rel=0.1)
    tuned = dlrm_jobs(np.random.default_rng(3), jobs=5, habit="tuned")
    for roles, m in zip(tuned["roles"], tuned["model"]):
        want = {"wide_deep": (8, 16, 8, 24, 3, 4), "deepfm": (8, 16, 8, 24, 3, 4), "xdeepfm": (2, 16, 8, 8, 20, 8),
                "dcn": (2, 16, 8, 8, 20, 8)}[m]
        assert (roles[0].count, roles[0].cpu, roles[0].mem, roles[1].count, roles[1].cpu, roles[1].mem) == want
    # from scratch ([RM] §6.2, [D] §6.3): Table 2's per-task figures and PSes, one worker
    scratch = dlrm_jobs(np.random.default_rng(3), jobs=5, habit="scratch")
    for roles, m in zip(scratch["roles"], scratch["model"]):
        want = {"wide_deep": (8, 16, 8, 1, 3, 4), "deepfm": (8, 16, 8, 1, 3, 4), "xdeepfm": (2, 16, 8, 1, 20, 8),
                "dcn": (2, 16, 8, 1, 20, 8)}[m]
        assert (roles[0].count, roles[0].cpu, roles[0].mem, roles[1].count, roles[1].cpu, roles[1].mem) == want


def test_dlrm_under_provisioned_memory_leaves_the_other_jobs_as_they_were(monkeypatch):
    """The owners' under-provisioned memory ([D] §2) is drawn after every other draw: the jobs it
    does not touch are those the same seed gives without it, and a touched job differs in one
    role's GB only, half Table 2's need (W&D: PS 8 -> 4 GB, worker 4 -> 2; xDeepFM/DCN: 8 -> 4)."""
    from clustersim.traces import synthetic
    a = synthetic.dlrm_jobs(np.random.default_rng(5), jobs=400)
    monkeypatch.setattr(synthetic, "DLRM_MEM_SHORT", (0.0, 0.5))
    b = synthetic.dlrm_jobs(np.random.default_rng(5), jobs=400)
    assert np.array_equal(a["submit"], b["submit"]) and a["model"] == b["model"] and a["user"] == b["user"]
    changed = [(m, ra, rb) for m, ra, rb in zip(a["model"], a["roles"], b["roles"]) if ra != rb]
    assert 8 <= len(changed) <= 30   # ~4.7 % of 400 = 19
    for m, ra, rb in changed:
        diff = [(x, y) for x, y in zip(ra, rb) if x != y]
        assert len(diff) == 1
        x, y = diff[0]
        assert (x.name, x.count, x.cpu) == (y.name, y.count, y.cpu) and x.mem < y.mem
        wd = m in ("wide_deep", "deepfm")
        assert x.mem == {"ps": 4.0, "worker": 2.0 if wd else 4.0}[x.name]
