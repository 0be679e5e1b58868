"""The model zoo: every required model is there, names match, bad files are named."""

import pytest

from clustersim.simulator import profiles
from clustersim.simulator.profiles import ProfileError, normalise

ZOO = profiles.load()

OPTIMUS_TABLE_1 = ["resnext110", "resnet50_ps", "inceptionbn", "kaggle", "cnnrand", "dssm", "rnnlstm", "seq2seq",
                   "deepspeech2_ps"]
TF_CNN = ["vgg11", "vgg16", "vgg19", "alexnet", "resnet50", "resnet101", "resnet152", "inception3", "inception4"]
ELASTICFLOW = ["bert", "deepspeech2", "gpt2", "resnet50", "vgg16", "yolov3", "ncf", "cifar10", "inception3"]
RECOMMENDATION = ["wide_deep", "deepfm", "xdeepfm", "dcn"]


def test_the_zoo_has_every_model_the_traces_and_papers_name():
    names = set(ZOO.names())
    assert set(OPTIMUS_TABLE_1 + TF_CNN + ELASTICFLOW + RECOMMENDATION) <= names
    assert {ZOO.profile(n).family for n in OPTIMUS_TABLE_1 + RECOMMENDATION} == {"ps"}
    assert {ZOO.profile(n).family for n in TF_CNN + ELASTICFLOW} == {"gpu"}


def test_ps_profiles_give_memory_per_ps_and_per_worker():
    for name in OPTIMUS_TABLE_1 + RECOMMENDATION:
        tasks = ZOO.profile(name).tasks
        assert tasks["ps"]["mem"] > 0 and tasks["worker"]["mem"] > 0, name
    assert ZOO.profile("wide_deep").tasks == {"ps": {"cpu": 16, "mem": 8, "count": 8}, "worker": {"cpu": 3, "mem": 4}}  # DLRover T2


@pytest.mark.parametrize("model, family, expected", [
    ("ResNet-50", "gpu", "resnet50"), ("ResNet-50", "ps", "resnet50_ps"), ("resnet50", "ps", "resnet50_ps"),
    ("ResNet-50 (batch size 64)", "gpu", "resnet50"), ("Wide&Deep", "ps", "wide_deep"), ("xDeepFM", "ps", "xdeepfm"),
    ("Inception-BN", "ps", "inceptionbn"), ("vgg19", "gpu", "vgg19"), ("gpt2", "ps", None), ("", "gpu", None),
])
def test_trace_model_names_match_profiles_of_the_job_family(model, family, expected):
    got = ZOO.match(model, family)
    assert (got.name if got else None) == expected


def test_normalise():
    assert normalise("ResNet-50 (batch size 64)") == "resnet50"
    assert normalise("Wide & Deep") == "widedeep"


def test_profiles_without_own_measurements_fall_back_to_default_costs():
    from clustersim.simulator.overhead import DEFAULT_COSTS
    from tests.factories import gpu_job
    assert ZOO.costs_of(gpu_job("j", 0, 1, 1.0, profile="googlenet")) == DEFAULT_COSTS
    assert ZOO.costs_of(gpu_job("j", 0, 1, 1.0, profile=None)) == DEFAULT_COSTS
    assert ZOO.costs_of(gpu_job("j", 0, 1, 1.0, profile="resnet152")).stop_resume_s == 70.0   # EDL Table 2


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, message", [
    ("m: {family: tpu, batch_size: 1, speed: {kind: table}}", "profile 'm': family must be one of"),
    ("m: {family: gpu, speed: {kind: table}}", "profile 'm': batch_size must be a number > 0"),
    ("m: {family: gpu, batch_size: 8, speed: {kind: warp}}", "profile 'm': speed.kind must be one of"),
    ("m: {family: gpu, batch_size: 8, speed: {kind: table, table: {gpus: [1, 2], batch: {8: [1.0]}}}}",
     "speed.table.batch.8 needs 2 values"),
    ("m: {family: gpu, batch_size: 8, speed: {kind: allreduce, derive: {from: n, flops: 1, size_mb: 1}}}\n"
     "n: {family: gpu, batch_size: 8, speed: {kind: allreduce, derive: {from: m, flops: 1, size_mb: 1}}}",
     "derive from each other in a loop"),
    ("m: {family: ps, batch_size: 8, speed: {kind: table, grid: {p: [1], w: [1]}}}", "speed.grid needs p, w"),
    ("m: {family: gpu, batch_size: 8, speed: {kind: allreduce, theta: [1, 1, 1, 1, 1]}, overhead: {pause: 1}}",
     "unknown overhead key"),
    ("m: {family: gpu, batch_size: 8, speed: {kind: allreduce, theta: [1, 1, 1, 1, 1]}, convergence: {b0: 1}}",
     "convergence needs b0, b1, b2"),
    ("m: {family: ps, batch_size: 8, dataset_size: 0, speed: {kind: table, grid: {p: [1], w: [1], "
     "samples_per_s: [[1.0]]}}}", "dataset_size must be a number > 0"),
    ("m: {family: ps, batch_size: 8, speed: {kind: dlrover, shares: [1, 2], points: [[1, 1, 4, 4, 2.0]]}}",
     "speed: term shares: need 5 finite numbers"),
    ("m: {family: ps, batch_size: 8, speed: {kind: worker_need, w_hat: 2, s_hat: 1}}",
     "worker_need needs sample_steps_per_s"),
    ("m: {family: ps, batch_size: 8, speed: {kind: worker_need, w_hat: 0, s_hat: 1, sample_steps_per_s: 3}}",
     "w_hat, s_hat and sample_rate > 0"),
    ("m: {family: gpu, batch_size: 8, speed: {kind: worker_need, w_hat: 2, s_hat: 1, sample_steps_per_s: 3}}",
     "worker_need is for ps profiles"),
    ("m: {family: ps, batch_size: 8, embedding: {static_share: 1.5}, speed: {kind: worker_need, w_hat: 2, "
     "s_hat: 1, sample_steps_per_s: 3}}", "embedding needs static_share in"),
])
def test_bad_profile_files_are_named(tmp_path, text, message):
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ProfileError, match=message) as e:
        profiles.load([path])
    assert "bad.yaml" in str(e.value)


def test_a_profile_defined_twice_is_an_error(tmp_path):
    body = "m: {family: gpu, batch_size: 8, speed: {kind: allreduce, theta: [1, 1, 1, 1, 1]}}"
    a, b = write(tmp_path, "a.yaml", body), write(tmp_path, "b.yaml", body)
    with pytest.raises(ProfileError, match="'m' is also defined in"):
        profiles.load([a, b])
