"""Reconfiguration costs: each mechanism's numbers, the presets, and lost time in the outputs."""

from pathlib import Path

import pytest
import yaml

from clustersim.policies.base import Decision, Policy
from clustersim.simulator import profiles
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobSpec, RoleSpec
from clustersim.simulator.overhead import (Change, ConstantOverhead, ElasticFlowOverhead, FlashCheckpoint, PodRestart, SidecarRestart, StopFree, StopResume, ModelCosts,
                                Transition, make)
from tests.factories import cluster, gpu_job, jobs

ZOO = profiles.load()
CONFIGS = Path(__file__).parents[2] / "configs" / "overhead"


def spec_of(profile: str, gpus: int = 4) -> JobSpec:
    return gpu_job("j", 0.0, gpus, 100.0, min_gpus=1, max_gpus=16, profile=profile)


def lost_by_running_workers(tr: Transition, old_rate: float, new_rate: float) -> float:
    """Iterations the old workers did not do during the transition (engine semantics)."""
    return tr.pause_s * old_rate + tr.prepare_s * (old_rate - min(old_rate, new_rate))


def test_constant_overhead_charges_each_kind_of_change_its_own_cost_every_time():
    spec = gpu_job("j", 0.0, 2, 100.0, min_gpus=1, max_gpus=4)
    one, two = {"worker": {0: 1}}, {"worker": {0: 2}}
    m = ConstantOverhead(start_s=3.0, resume_s=5.0, rescale_s=7.0)
    for _ in range(2):   # the second start costs what the first did (pause-only transitions are shared)
        assert m.transition(spec, Change.START, {}, two) == Transition(pause_s=3.0)
        assert m.transition(spec, Change.RESUME, {}, two) == Transition(pause_s=5.0)
        assert m.transition(spec, Change.SCALE_OUT, one, two) == Transition(pause_s=7.0)
        assert m.transition(spec, Change.STOP, two, {}) == Transition()
    free = ConstantOverhead(rescale_s=7.0, stop_free=True, pause_s=0.5)
    assert free.transition(spec, Change.SCALE_IN, two, one) == Transition(prepare_s=7.0, pause_s=0.5)
    assert ConstantOverhead().transition(spec, Change.START, {}, two) == Transition()   # the default replay


@pytest.mark.parametrize("name", ZOO.names())
def test_stop_free_scale_out_costs_running_workers_less_than_stop_resume(name):
    prof = ZOO.profile(name)
    spec = spec_of(name)
    if prof.family == "ps":
        spec = JobSpec(0, "j", 0.0, (RoleSpec("ps", 2, 0, 4, 8, 1, 8), RoleSpec("worker", 4, 0, 4, 8, 1, 16)), 100.0,
                       100.0, profile=name)
        old, new = {"ps": {0: 2}, "worker": {0: 4}}, {"ps": {0: 2}, "worker": {0: 4, 1: 2}}
    else:
        old, new = {"worker": {0: 4}}, {"worker": {0: 4, 1: 1}}
    r_old = ZOO.speed.rate(spec, old, None)
    r_new = ZOO.speed.rate(spec, new, None)
    free = StopFree(ZOO.costs_of).transition(spec, Change.SCALE_OUT, old, new)
    resume = StopResume(ZOO.costs_of).transition(spec, Change.SCALE_OUT, old, new)
    assert free.pause_s < resume.pause_s
    assert lost_by_running_workers(free, r_old, r_new) < lost_by_running_workers(resume, r_old, r_new)


def test_edl_table_2_and_3_numbers_per_model():
    tr = StopFree(ZOO.costs_of).transition(spec_of("resnet152"), Change.SCALE_OUT,
                                                                 {"worker": {0: 4}}, {"worker": {0: 5}})
    assert (tr.prepare_s + tr.pause_s, tr.pause_s) == pytest.approx((36.0, 1.8))          # Table 3 / Table 2
    sr = StopResume(ZOO.costs_of)
    assert sr.transition(spec_of("vgg16"), Change.SCALE_IN, {"worker": {0: 5}}, {"worker": {0: 4}}).pause_s == 35.0
    assert sr.transition(spec_of("alexnet"), Change.RESUME, {}, {"worker": {0: 4}}).pause_s == 30.0
    graceful = StopFree(ZOO.costs_of).transition(
        spec_of("vgg16"), Change.SCALE_IN, {"worker": {0: 5}}, {"worker": {0: 4}})
    # scale-in: in flight for Table 3's time, nobody stops; the leaving workers hold their GPUs until they exit
    assert graceful == Transition(prepare_s=3.3, release_s=3.3)


def test_sidecar_restarts_the_process_in_place_and_the_pod_across_hosts():
    m = SidecarRestart()
    s = spec_of("resnet50")
    assert m.transition(s, Change.SCALE_IN, {"worker": {0: 4}}, {"worker": {0: 2}}).pause_s == 17 + 5 * 2   # 27 s
    assert m.transition(s, Change.SCALE_OUT, {"worker": {0: 2}}, {"worker": {0: 4}}).pause_s == 17 + 5 * 4   # 37 s
    assert m.transition(s, Change.SCALE_OUT, {"worker": {0: 2}}, {"worker": {0: 2, 1: 2}}).pause_s == 30 + 136 + 19 * 4
    pod = PodRestart()
    assert pod.transition(s, Change.SCALE_OUT, {"worker": {0: 2}}, {"worker": {0: 4}}).pause_s == 242.0      # §II-C
    assert pod.transition(s, Change.START, {}, {"worker": {0: 2}}).pause_s == 174.0


def test_a_restart_writes_and_reads_back_the_models_own_checkpoint():
    """VGG16's 1.104 GB (8 B x 138 M parameters) at 0.25 GB/s: 4.416 s each way. A fresh start has
    no checkpoint; a resume reads one back; a restart writes one and reads it back."""
    vgg = spec_of("sidecar_vgg16")
    costs = ZOO.costs_of
    assert ZOO.costs_of(vgg).checkpoint_gb == pytest.approx(1.104)
    pod = PodRestart(costs_of=costs, checkpoint_gb_per_s=0.25)
    two, four = {"worker": {0: 2}}, {"worker": {0: 4}}
    assert pod.transition(vgg, Change.START, {}, two).pause_s == 136 + 19 * 2                            # 174 s
    assert pod.transition(vgg, Change.RESUME, {}, four).pause_s == pytest.approx(30 + 212 + 4.416)        # 246.416 s
    assert pod.transition(vgg, Change.SCALE_OUT, two, four).pause_s == pytest.approx(242 + 2 * 4.416)    # 250.832 s
    sc = SidecarRestart(costs_of=costs, checkpoint_gb_per_s=0.25, early_init=True)
    assert sc.transition(vgg, Change.START, {}, two).pause_s == 17 + 5 * 2                               # 27 s
    assert sc.transition(vgg, Change.SCALE_IN, four, two).pause_s == pytest.approx(27 + 2 * 4.416)       # 35.832 s
    across = {"worker": {0: 2, 1: 2}}   # a pod restart: kill, the process start (early init), and both ways
    assert sc.transition(vgg, Change.SCALE_OUT, two, across).pause_s == pytest.approx(30 + 37 + 2 * 4.416)
    # off (the default): the §II-C constants alone, whatever the model
    assert PodRestart(costs_of=costs).transition(vgg, Change.SCALE_OUT, two, four).pause_s == 242.0


def test_flash_checkpoint_adds_workers_without_pause_and_pauses_for_ps_changes():
    m = FlashCheckpoint(ZOO.costs_of)
    s = JobSpec(0, "j", 0.0, (RoleSpec("ps", 2, 0, 16, 8, 1, 8), RoleSpec("worker", 4, 0, 3, 4, 1, 32)), 1.0, 1.0,
                profile="wide_deep")
    more_workers = m.transition(s, Change.SCALE_OUT, {"ps": {0: 2}, "worker": {0: 4}}, {"ps": {0: 2}, "worker": {0: 8}})
    assert more_workers == Transition(prepare_s=120.0, pause_s=0.0)
    more_ps = m.transition(s, Change.SCALE_OUT, {"ps": {0: 2}, "worker": {0: 4}}, {"ps": {0: 3}, "worker": {0: 4}})
    assert more_ps == Transition(prepare_s=300.0, pause_s=180.0 + 2.0 / 20.0)
    assert m.transition(s, Change.RESUME, {}, {"ps": {0: 2}}).pause_s == 660.0   # remote storage, Fig. 12


def test_elasticflow_formula():
    ef = ElasticFlowOverhead()
    s = spec_of("bert", 8)
    assert ef.transition(s, Change.START, {}, {"worker": {0: 8}}).pause_s == 2 + 2 * (3 + 1)
    assert ef.transition(s, Change.RESUME, {}, {"worker": {0: 8}}).pause_s == 29 + 2 * (3 + 1)
    assert ElasticFlowOverhead(large_cluster=True).transition(s, Change.MIGRATE, {}, {"worker": {0: 1}}).pause_s == 56
    assert ef.transition(s, Change.STOP, {"worker": {0: 8}}, {}) == Transition()


def test_every_overhead_config_builds_and_none_is_free():
    for path in sorted(CONFIGS.glob("*.yaml")):
        model = make(yaml.safe_load(path.read_text()), ZOO.costs_of)
        assert hasattr(model, "transition"), path
    none = make(yaml.safe_load((CONFIGS / "none.yaml").read_text()))
    for change in Change:
        assert none.transition(spec_of("vgg16"), change, {"worker": {0: 4}}, {"worker": {0: 5}}) == Transition()
    assert make({"name": "x", "kind": "constant", "resume_s": 30}) == ConstantOverhead(resume_s=30.0)


@pytest.mark.parametrize("cfg, message", [
    ({"kind": "magic"}, "overhead.kind: unknown overhead model 'magic'; known: constant, elasticflow"),
    ({"kind": "constant", "resum_s": 3}, "overhead.resum_s: unknown key; valid keys: pause_s, rescale_s"),
    ({"kind": "stop_free", "mechanism": "teleport"}, "overhead.mechanism: unknown key"),
    ({"kind": "constant", "resume_s": -1}, "overhead.resume_s: must be >= 0, got -1"),
    ({"kind": "constant", "resume_s": float("nan")}, "overhead.resume_s: must be a finite number"),
    ({"kind": "constant", "stop_free": "no"}, "overhead.stop_free: must be true or false, got 'no'"),
])
def test_bad_overhead_configs_are_named(cfg, message):
    with pytest.raises(ValueError, match=message):
        make(cfg)


def test_bad_profile_overhead_values_are_named():
    with pytest.raises(ValueError, match="prof: overhead stop_resume_s must be a number >= 0"):
        ModelCosts.from_dict({"stop_resume_s": -1}, "prof")


class PreemptOnce(Policy):
    """Starts the job, preempts it at t=10, resumes it at t=20."""

    name = "preempt_once"

    def decide(self, view):
        d = Decision()
        if view.now == 0:
            d.allocations["j"] = {"worker": {0: 4}}
            d.wakeup = 10.0
        elif view.now == 10:
            d.allocations["j"] = None
            d.wakeup = 10.0
        elif view.now == 20:
            d.allocations["j"] = {"worker": {0: 4}}
        return d


def test_lost_time_is_charged_per_job_and_written_to_the_jobs_table():
    spec = jobs(spec_of("resnet152"))
    engine = Engine(spec, cluster(1, 8), PreemptOnce(), speed=ZOO.speed,
                    overhead=StopResume(ZOO.costs_of, charge_start=False), progress=False)
    rec = engine.run()
    st = rec.states[0]
    assert st.overhead_s == pytest.approx(70.0)            # EDL Table 2 stop-resume, ResNet152
    assert st.overhead_gpu_s == pytest.approx(4 * 70.0)
    table = rec.jobs().to_pydict()
    assert table["overhead_s"] == [pytest.approx(70.0)] and table["overhead_gpu_s"] == [pytest.approx(280.0)]


# Costs a calibration measures (clustersim-calibrate, simulator/calibration/fit.py): a restart from
# the checkpoint apart from a fresh start, and each direction's stop-resume. Round numbers, so that
# every charge below can be read off: start 4 s, resume 6 s, scale-out 15 s, scale-in 7 s, any
# other stop-resume 10 s; stop-free: 3 s preparing, 0.5 s paused; graceful scale-in 0.2 s.
MEASURED = ModelCosts(launch_s=4.0, resume_s=6.0, stop_resume_s=10.0, stop_resume_out_s=15.0, stop_resume_in_s=7.0,
                      stop_free_prepare_s=3.0, stop_free_pause_s=0.5, scale_in_s=0.2)
ONE, TWO = {"worker": {0: 1}}, {"worker": {0: 2}}


def ps_spec(max_ps: int = 2) -> JobSpec:
    return JobSpec(0, "p", 0.0, (RoleSpec("ps", 1, 1.0, 0, 0, 1, max_ps), RoleSpec("worker", 1, 1.0, 0, 0, 1, 2)),
                   1000.0, 1000.0)


def test_stop_resume_charges_a_resume_and_each_direction_its_own_measured_cost():
    sr, s = StopResume(lambda spec: MEASURED), spec_of("x")
    assert sr.transition(s, Change.START, {}, ONE) == Transition(pause_s=4.0)         # launch_s
    assert sr.transition(s, Change.RESUME, {}, ONE) == Transition(pause_s=6.0)        # resume_s, not stop_resume_s 10
    assert sr.transition(s, Change.SCALE_OUT, ONE, TWO) == Transition(pause_s=15.0)   # stop_resume_out_s
    assert sr.transition(s, Change.SCALE_IN, TWO, ONE) == Transition(pause_s=7.0)     # stop_resume_in_s
    assert sr.transition(s, Change.MIGRATE, ONE, {"worker": {1: 1}}) == Transition(pause_s=10.0)   # stop_resume_s
    # without the new keys, every one of them is stop_resume_s (EDL Table 2's one figure), as before
    plain = StopResume(lambda spec: ModelCosts(stop_resume_s=10.0))
    for change, old, new in ((Change.RESUME, {}, ONE), (Change.SCALE_OUT, ONE, TWO), (Change.SCALE_IN, TWO, ONE)):
        assert plain.transition(s, change, old, new) == Transition(pause_s=10.0)


def test_stop_free_charges_a_change_of_the_ps_count_as_a_stop_resume_when_asked():
    s = ps_spec()
    one_ps, two_ps = {"ps": {0: 1}, "worker": {0: 1}}, {"ps": {0: 2}, "worker": {0: 1}}
    more_workers = {"ps": {0: 1}, "worker": {0: 2}}
    sf = make({"kind": "stop_free", "ps_stop_resume": True}, lambda spec: MEASURED)
    # the shards are re-cut: checkpoint, relaunch, restore; a scale-out of the PS costs 15 s, a scale-in 7 s
    assert sf.transition(s, Change.SCALE_OUT, one_ps, two_ps) == Transition(pause_s=15.0)
    assert sf.transition(s, Change.SCALE_IN, two_ps, one_ps) == Transition(pause_s=7.0)
    # one PS more, one worker fewer: a rescale, stop_resume_s
    assert sf.transition(s, Change.RESCALE, more_workers, two_ps) == Transition(pause_s=10.0)
    # workers alone still scale stop-free (3 s preparing, 0.5 s paused) and scale in gracefully (0.2 s)
    assert sf.transition(s, Change.SCALE_OUT, one_ps, more_workers) == Transition(prepare_s=3.0, pause_s=0.5)
    assert sf.transition(s, Change.SCALE_IN, more_workers, one_ps) == Transition(prepare_s=0.2, release_s=0.2)
    assert sf.transition(s, Change.RESUME, {}, one_ps) == Transition(pause_s=6.0)
    # off (the default): a new PS count is charged stop-free, as earlier configs were
    assert StopFree(lambda spec: MEASURED).transition(s, Change.SCALE_OUT, one_ps, two_ps) == \
        Transition(prepare_s=3.0, pause_s=0.5)
    with pytest.raises(ValueError, match="overhead.ps_stop_resume: must be true or false"):
        make({"kind": "stop_free", "ps_stop_resume": "yes"})


class GrowPS(Policy):
    """Starts the PS job at 1 PS + 1 worker, gives it a second PS at t=20, preempts it at t=50 and
    resumes it (2 PS + 1 worker) at t=60."""

    name = "grow_ps"
    plan = {0: {"ps": {0: 1}, "worker": {0: 1}}, 20: {"ps": {0: 2}, "worker": {0: 1}}, 50: None,
            60: {"ps": {0: 2}, "worker": {0: 1}}}

    def decide(self, view):
        d = Decision()
        if view.now in self.plan:
            d.allocations["p"] = self.plan[view.now]
            later = [t for t in self.plan if t > view.now]
            d.wakeup = min(later) - view.now if later else None
        return d


def test_a_ps_job_is_charged_its_start_stop_resume_and_resume_in_the_jobs_table():
    engine = Engine(jobs(ps_spec()), cluster(1, 4), GrowPS(), progress=False,
                    overhead=make({"kind": "stop_free", "ps_stop_resume": True}, lambda spec: MEASURED))
    st = engine.run().states[0]
    # start 4 s (launch_s) + the second PS 15 s (stop_resume_out_s) + the resume 6 s (resume_s) = 25 s
    assert st.overhead_s == pytest.approx(4.0 + 15.0 + 6.0)
    # GPU-seconds: 2 GPUs (1 PS + 1 worker) for the start, 3 for the stop-resume and the resume
    assert st.overhead_gpu_s == pytest.approx(2 * 4.0 + 3 * 15.0 + 3 * 6.0)
