"""Real measurements with torch.distributed on CPU (gloo, 1-5 processes, a few steps each).

One tiny calibration runs once for the module (about 80 s on 2 cores at load 6-8); the tests read its
points, fits and profile. Skipped when torch is absent (pip install "clustersim[calibrate]").
"""

import json
import time

import pytest

pytest.importorskip("torch", reason='torch is not installed: pip install "clustersim[calibrate]" (torch==2.13.0)')

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from clustersim.simulator import profiles  # noqa: E402
from clustersim.simulator.calibration import cli, dataparallel, ps  # noqa: E402
from clustersim.simulator.calibration.store import PointStore  # noqa: E402
from clustersim.simulator.speed import AllReduceSpeed, OptimusSpeed  # noqa: E402

TINY = ["model=mlp", "model.params.samples=512", "model.params.features=64", "model.params.hidden=[64,64]",
        "device=cpu", "timeout_s=120", "progress=false", "plot=true",
        "ps.p=[1,2]", "ps.w=[1,2,3]", "ps.batch=48", "ps.steps=4", "ps.warmup=1", "ps.repeats=2",
        "dataparallel.workers=[1,2]", "dataparallel.batch=[8,16,32]", "dataparallel.steps=4", "dataparallel.warmup=1", "dataparallel.repeats=2",
        "overhead.sizes=[[1,2]]", "overhead.pre_steps=3", "overhead.post_steps=2",
        "convergence.max_epochs=8", "convergence.batch=32",
        "fit.test_fraction=0.2", "fit.repeats=3"]


def compose(overrides):
    from hydra import compose as hydra_compose, initialize_config_module
    with initialize_config_module(config_module="clustersim.configs.calibrate", version_base=None):
        return OmegaConf.to_container(hydra_compose("config", overrides=list(overrides)), resolve=True)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal")
    cfg = compose([*TINY, f"out={out}"])
    t0 = time.perf_counter()
    summary = cli.run(cfg)
    return cfg, summary, time.perf_counter() - t0


def records(summary, kind):
    return [r for r in PointStore(f"{summary['out']}/points.jsonl").of_kind(kind)]


def test_ps_runner_measures_every_point_with_positive_throughput_and_cpu(calibrated):
    cfg, summary, _ = calibrated
    assert len(records(summary, "ps")) == 6 * 2                 # every round stored as measured
    pts = ps.measure(cfg, f"{summary['out']}/points.jsonl")       # all stored: the rounds' medians
    assert sorted((r["p"], r["w"]) for r in pts) == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert all(len(r["windows_samples_per_s"]) == 2 for r in pts)
    for r in pts:
        assert r["samples_per_s"] > 0 and r["ps_cores"] > 0 and r["worker_cores"] > 0
        assert r["worker_batch"] == round(48 / r["w"])          # sync: global batch M split over workers


def test_dataparallel_runner_measures_every_point(calibrated):
    cfg, summary, _ = calibrated
    assert len(records(summary, "dataparallel")) == 6 * 2            # every round stored as measured
    pts = dataparallel.measure(cfg, f"{summary['out']}/points.jsonl")   # all stored: the rounds' medians
    assert sorted((r["n"], r["batch"]) for r in pts) == [(n, b) for n in (1, 2) for b in (8, 16, 32)]
    for r in pts:
        assert len(r["windows_iter_s"]) == 2 and r["iter_s"] == pytest.approx(np.median(r["windows_iter_s"]))
        assert r["iters_per_s"] > 0 and r["samples_per_s"] == pytest.approx(r["iters_per_s"] * r["n"] * r["batch"])
        assert r["backend"] == "gloo"


def test_fits_report_a_finite_heldout_error(calibrated):
    _, summary, _ = calibrated
    for what in ("ps", "dataparallel"):
        h = summary["fits"][what]["heldout"]
        assert np.isfinite(h["error"]) and h["error"] >= 0 and h["test_points"] >= 1, what
    assert "held-out" in cli.report(summary)


def test_stop_free_pauses_running_workers_less_than_stop_resume(calibrated):
    _, summary, _ = calibrated
    by = {r["mechanism"]: r for r in records(summary, "rescale") if r["n_new"] > r["n_old"]}     # scale-outs
    assert 0 < by["stop_free"]["pause_s"] < by["stop_resume"]["pause_s"]
    assert by["stop_free"]["prepare_s"] > 0 and by["stop_resume"]["checkpoint_gb"] > 0
    assert by["stop_free"]["steps_during_prepare"] >= 1      # the running workers trained meanwhile


def test_scale_in_is_measured_with_both_mechanisms_and_goes_into_the_profile(calibrated):
    _, summary, _ = calibrated
    ins = {r["mechanism"]: r for r in records(summary, "rescale") if r["n_new"] < r["n_old"]}
    assert {(m, r["n_old"], r["n_new"]) for m, r in ins.items()} == {("stop_resume", 2, 1), ("stop_free", 2, 1)}
    free = ins["stop_free"]
    # the pause starts at the switch, after the command: never longer than command -> trained
    assert 0 < free["pause_s"] <= free["scale_in_s"] < ins["stop_resume"]["pause_s"]
    costs = summary["fits"]["overhead"]["costs"]
    assert costs["scale_in_s"] == free["scale_in_s"]                # one repeat: its median
    assert profiles.load([summary["profiles"]]).profile("mlp").costs.scale_in_s == costs["scale_in_s"]


def test_written_profile_loads_and_simulated_jobs_run_at_the_fitted_speed(calibrated):
    from clustersim.experiment import build_engine, compose as sim_compose
    from clustersim.simulator.workload import packed

    cfg, summary, _ = calibrated
    zoo = profiles.load([summary["profiles"]])
    ps_fit, dp_fit = summary["fits"]["ps"], summary["fits"]["dataparallel"]
    prof = zoo.profile("mlp_ps")
    assert prof.convergence and prof.costs.stop_free_pause_s == summary["fits"]["overhead"]["costs"]["stop_free_pause_s"]
    fitted = OptimusSpeed("sync", 48.0, ps_fit["theta"])
    gpu = AllReduceSpeed(dp_fit["theta"])
    assert zoo.profile("mlp").model.predict((2, 1, 32))[0] == pytest.approx(gpu.predict((2, 1, 32))[0])

    sim = sim_compose(["trace=synthetic_optimus", "cluster=optimus_testbed", "progress=false"])
    sim.profile = OmegaConf.load(summary["group"])
    engine = build_engine(sim)
    jobs = {j.job_id: j for j in engine.jobs}
    table = engine.run().jobs().to_pylist()
    assert len(table) == len(jobs) and all(r["status"] == "finished" for r in table)
    for row in table[:10]:
        spec = jobs[row["job_id"]]
        counts = {r.name: r.count for r in spec.roles}
        want = fitted.predict((counts["ps"], counts["worker"]))[0] / prof.batch(spec)
        assert spec.profile == "mlp_ps"
        assert engine.speed.rate(spec, packed(spec, engine.cluster), engine.cluster) == pytest.approx(want, rel=1e-9)


def test_plot_and_fit_summary_are_written(calibrated):
    _, summary, _ = calibrated
    fits = json.loads(open(f"{summary['out']}/fit.json").read())
    assert set(fits["fits"]) == {"ps", "dataparallel", "overhead", "convergence"}
    assert fits["hardware"]["torch"] == torch.__version__
    with open(summary["png"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_killed_sweep_keeps_its_points_and_the_rerun_measures_only_the_missing(calibrated, tmp_path):
    cfg, summary, _ = calibrated
    lines = open(f"{summary['out']}/points.jsonl").read().splitlines()
    keep = [ln for ln in lines if not (json.loads(ln)["kind"] == "dataparallel" and json.loads(ln)["n"] == 1
                                       and json.loads(ln)["batch"] == 8)]
    assert len(keep) == len(lines) - 2                # its 2 rounds
    (tmp_path / "points.jsonl").write_text("\n".join(keep) + '\n{"key": "cut sh')   # killed mid-write
    before = {json.loads(ln)["key"]: ln for ln in keep}
    dp = dataparallel.measure(cfg, str(tmp_path / "points.jsonl"))
    after = PointStore(tmp_path / "points.jsonl")
    assert all(r is not None for r in dp) and len(after.points) == len(lines)
    for k, ln in before.items():                     # measured points untouched
        assert after.get(k) == json.loads(ln)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this host: the NCCL path needs a GPU")
def test_gpu_dataparallel_uses_nccl(tmp_path):
    n = min(torch.cuda.device_count(), 2)
    cfg = compose([*TINY, f"out={tmp_path}", "device=cuda", f"dataparallel.workers=[{n}]", "dataparallel.batch=[32]"])
    (r,) = dataparallel.measure(cfg, str(tmp_path / "points.jsonl"))
    assert r["backend"] == "nccl" and r["device"] == "cuda" and r["iters_per_s"] > 0


def test_the_whole_module_stays_short(calibrated):
    assert calibrated[2] < 120, f"the tiny calibration took {calibrated[2]:.0f} s"


def tiny_user_model(width: int = 4):
    """A user's own model, reached through model.import_path."""
    from clustersim.simulator.calibration.workloads import Workload
    x = torch.randn(32, width)
    return Workload(torch.nn.Linear(width, 2), (x,), (x.sum(1) > 0).long(), torch.nn.functional.cross_entropy)


def test_a_users_model_is_built_through_its_import_path():
    from clustersim.simulator.calibration import workloads
    wl = workloads.build({"name": "mine", "import_path": f"{__name__}:tiny_user_model", "params": {"width": 6}})
    (x,), y = wl.batch(step=3, size=8)
    assert wl.parameter_count() == 6 * 2 + 2 and x.shape == (8, 6) and y.shape == (8,)
    with pytest.raises(TypeError, match="must return"):
        workloads.build({"import_path": "torch.nn:Linear", "params": {"in_features": 2, "out_features": 2}})
    with pytest.raises(ValueError, match="package.module:function"):
        workloads.build({"import_path": "nocolon"})
