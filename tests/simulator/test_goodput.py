"""GPU-type-aware speed and Pollux's goodput model on the bundled T4 measurements."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from clustersim.simulator import profiles
from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.goodput import Application
from clustersim.simulator.job import JobSpec, RoleSpec
from clustersim.traces import resolve

T4 = Cluster([NodeGroup(count=16, gpus=4, cpus=64, mem=256, gpu_type="t4")])
MIXED = Cluster([NodeGroup(count=1, gpus=4, cpus=64, mem=256, gpu_type="t4"),
                 NodeGroup(count=1, gpus=4, cpus=64, mem=256, gpu_type="a100")])


@pytest.fixture(scope="module")
def zoo():
    return profiles.load()


def spec(model, n, batch):
    return JobSpec(index=0, job_id="j", submit_time=0.0, roles=(RoleSpec("worker", n, 1.0, 0.0, 0.0, n, n),),
                   total_work=1.0, duration=None, model=model, profile=model, batch_size=batch)


def measured(app):
    with open(resolve(f"bundled:pollux/profiles_t4/{app}/placements.csv")) as f:
        return [(r["placement"], int(r["local_bsz"]), float(r["step_time"])) for r in csv.DictReader(f)]


@pytest.mark.parametrize("app,profile", [("bert", "bert"), ("cifar10", "cifar10"), ("imagenet", "resnet50")])
def test_a_job_on_t4_nodes_runs_at_the_measured_step_time_of_each_placement(zoo, app, profile):
    app_ = zoo.profile(profile).by_type["t4"].app
    init, largest = min(app_.validation), max(app_.validation)
    checked = 0
    for placement, local, step in measured(app):
        per_node = [int(c) for c in placement]
        n = sum(per_node)
        if n == 1 and local > init:
            continue   # one replica above the reference batch accumulates (the Pollux simulator's rule)
        if local * n > largest:
            continue   # beyond the largest validated batch the simulator caps the per-GPU batch
        alloc = {"worker": {node: c for node, c in enumerate(per_node)}}
        assert zoo.speed.rate(spec(profile, n, local * n), alloc, T4) == pytest.approx(1.0 / step, rel=1e-9)
        checked += 1
    assert checked > 100


def test_t4_speed_is_not_a100_speed_and_agrees_with_elasticflows_t4_table(zoo):
    # ElasticFlow's throughputs_T4/bert.csv, batch 384: 0.0344069 it/s on 1 GPU, 0.142717 on 4
    one = zoo.speed.rate(spec("bert", 1, 384), {"worker": {0: 1}}, T4)
    four = zoo.speed.rate(spec("bert", 4, 384), {"worker": {0: 4}}, T4)
    assert one == pytest.approx(0.03440690542609718, rel=1e-6) and four == pytest.approx(0.14271706368522086, rel=1e-6)
    a100 = Cluster([NodeGroup(count=1, gpus=4, cpus=64, mem=256, gpu_type="a100")])
    assert zoo.speed.rate(spec("bert", 1, 384), {"worker": {0: 1}}, a100) > 30 * one   # the profile's `speed`


def test_a_fragmented_placement_is_slower(zoo):
    packed = zoo.speed.rate(spec("cifar10", 4, 1024), {"worker": {0: 4}}, T4)
    split = zoo.speed.rate(spec("cifar10", 4, 1024), {"worker": {0: 1, 1: 1, 2: 1, 3: 1}}, T4)
    assert split < packed


def test_a_job_spanning_gpu_types_runs_at_its_slowest_types_rate(zoo):
    s = spec("bert", 2, 48)
    t4 = zoo.speed.rate(s, {"worker": {0: 2}}, MIXED)
    a100 = zoo.speed.rate(s, {"worker": {1: 2}}, MIXED)
    both = zoo.speed.rate(s, {"worker": {0: 1, 1: 1}}, MIXED)
    assert a100 > t4 and both <= t4


def test_a_type_without_an_entry_uses_speed_and_a_profile_without_speed_fails_naming_it(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("m:\n  family: gpu\n  batch_size: 8\n  speed_by_type:\n"
                 "    t4: {kind: allreduce, theta: [0.1, 0.01, 0.0, 0.0, 0.0]}\n")
    z = profiles.load([f])
    assert z.speed.rate(spec("m", 1, 8), {"worker": {0: 1}}, T4) == pytest.approx(1 / 0.81)
    other = Cluster([NodeGroup(count=1, gpus=4, cpus=64, mem=256, gpu_type="v100")])
    with pytest.raises(profiles.ProfileError, match="profile 'm' has no speed for GPU type 'v100'"):
        z.speed.rate(spec("m", 1, 8), {"worker": {0: 1}}, other)


def _efficiency_by_hand(app, batch, epochs):
    """Pollux's gain per epoch from the validation files, read here without simulator code."""
    vals = {}
    for p in resolve(f"bundled:pollux/profiles_t4/{app}").glob("validation-*.csv"):
        with open(p) as f:
            vals[int(p.stem.split("-")[1])] = list(csv.DictReader(f))
    b0 = min(vals)
    prog = [0.0] + [min(float(v[e]["progress"]) for v in vals.values()) for e in range(epochs)]
    v = vals[batch]
    s = batch / b0
    iters = sum((prog[e + 1] - prog[e]) * (float(v[e]["grad_var"]) / s + float(v[e]["grad_sqr"]))
                / (float(v[e]["grad_var"]) + float(v[e]["grad_sqr"])) for e in range(epochs))
    return prog[epochs] * b0 / (batch * iters)


@pytest.mark.parametrize("app,epochs", [("cifar10", 100), ("deepspeech2", 80), ("yolov3", 50)])
def test_efficiency_is_one_at_the_reference_batch_and_falls_as_the_gradient_statistics_say(app, epochs):
    a = Application(resolve(f"bundled:pollux/profiles_t4/{app}"), epochs, perf=_ANY_PERF)
    sizes = sorted(a.validation)
    eff = [a.efficiency(b) for b in sizes]
    assert eff[0] == pytest.approx(1.0)
    assert all(x > y for x, y in zip(eff, eff[1:]))
    for b, e in zip(sizes, eff):
        assert e == pytest.approx(_efficiency_by_hand(app, b, epochs), rel=1e-9)


def test_the_pollux_workloads_batches_need_1_to_1_8_times_the_examples(zoo):
    # the batches of the bundled Pollux workloads, per application
    for profile, batches in (("cifar10", (2048, 4096)), ("deepspeech2", (320, 640)), ("bert", (384,)),
                             ("resnet50", (3200, 6400)), ("ncf", (32768,)), ("yolov3", (64,))):
        app = zoo.profile(profile).goodput_app()
        for b in batches:
            assert 1.0 <= 1.0 / app.efficiency(b) <= 1.8


_ANY_PERF = None


def test_refitting_reproduces_the_stored_throughput_parameters(zoo):
    stored = zoo.profile("ncf").by_type["t4"].app
    fitted = Application(stored.directory, stored.max_epochs).perf
    for p in ((1, 1, 256), (1, 4, 1024), (2, 8, 4096)):
        assert float(fitted.step_time(*p)) == pytest.approx(float(stored.perf.step_time(*p)), rel=0.02)
