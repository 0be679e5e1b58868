"""experiment.compose keeps what the config group choices compose (clustersim/composing.py): each config
it hands out is the one Hydra composes whole, node for node, errors included, and an edited config
file or a newly registered structured config is seen at once."""

import time

import pytest
from hydra import compose as hydra_compose, initialize_config_module
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from clustersim import composing
from clustersim.experiment import compose

ITP = ["trace=elasticflow_raw", "trace.cache.enabled=false", "cluster=auto8", "policy=fifo", "profile=zoo",
       "progress=false"]
CASES = [
    [],
    ["seed=3"],
    ITP + ["trace.path=bundled:elasticflow/raw/cluster01.csv"],
    ITP + ["trace.path=bundled:elasticflow/raw/cluster02.csv"],
    ["+experiment=sidecar_sidecar", "seed=2"],
    ["+experiment=edl_table4_philly_elastic", "policy=tiresias", "trace.cache.enabled=false"],
    ["~faults", "until=100"],
    ["policy=tiresias", "policy.decision_interval=300", "seed=1", "seed=2"],   # the last value wins, as in Hydra
    ["cluster.groups=[{count:1,gpus:4,cpus:40,mem:256}]", "trace.oversize=drop"],
    ["+trace.transforms=[{op: window, start: 0, end: 86400}]"],   # a config override that is a list
    ["++observe.extra_key=1", "~observe.samples_kept"],
    ["trace={name: mine, format: csv, path: x.csv}"],   # a dict value for a group key: a config override
]


def whole(overrides):
    with initialize_config_module(config_module="clustersim.configs", version_base=None):
        return hydra_compose("config", overrides=list(overrides))


def same_nodes(a, b, where="cfg"):
    """Same class, metadata (flags, types, key) and value at every node."""
    assert type(a) is type(b), where
    meta_a, meta_b = a._metadata, b._metadata
    assert (meta_a.ref_type, meta_a.object_type, meta_a.optional, meta_a.key, meta_a.flags) == \
           (meta_b.ref_type, meta_b.object_type, meta_b.optional, meta_b.key, meta_b.flags), where
    if isinstance(a, DictConfig):
        assert list(a.keys()) == list(b.keys()), where
        for k in a.keys():
            same_nodes(a._get_node(k), b._get_node(k), f"{where}.{k}")
    elif isinstance(a, ListConfig):
        assert len(a) == len(b), where
        for i in range(len(a)):
            same_nodes(a._get_node(i), b._get_node(i), f"{where}[{i}]")
    else:
        assert a._value() == b._value() and type(a._value()) is type(b._value()), where


@pytest.mark.parametrize("overrides", CASES, ids=range(len(CASES)))
def test_a_kept_composition_gives_hydras_config(overrides):
    first, again, reference = compose(overrides), compose(overrides), whole(overrides)
    for cfg in (first, again):
        assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(reference)
        same_nodes(cfg, reference)
        assert OmegaConf.is_struct(cfg) and not OmegaConf.is_readonly(cfg)


def test_each_config_is_a_copy_of_its_own():
    a = compose(["seed=1"])
    a.policy.name = "changed"
    a.trace.cache.enabled = False
    assert compose(["seed=1"]).policy.name == whole(["seed=1"]).policy.name != "changed"


@pytest.mark.parametrize("overrides", [
    ["no_such_key=1"],                 # not in the config: Hydra's "Could not override"
    ["+seed=1"],                       # appending a key that is there
    ["~no_such_key"],
    ["policy=no_such_policy"],
    ["seed=[1,2"],                     # cannot be parsed
    ["seed.x=1"],                      # a key below a value
    ["seed=1,2"],                      # a sweep: the command's -m only
])
def test_a_bad_override_raises_what_hydra_raises(overrides):
    with pytest.raises((HydraException, OmegaConfBaseException)) as kept:
        compose(overrides)
    with pytest.raises((HydraException, OmegaConfBaseException)) as reference:
        whole(overrides)
    assert type(kept.value) is type(reference.value) and str(kept.value) == str(reference.value)
    assert str(kept.value.__cause__) == str(reference.value.__cause__)


def test_an_edited_config_file_is_read_again(tmp_path, monkeypatch):
    """A plug-in's config package (found through clustersim.plugins.config_packages, as an
    installed one is): a file rewritten with the same size, or a new file, shows at once."""
    package = tmp_path / "edited_configs"
    (package / "policy").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "policy" / "__init__.py").write_text("")
    mine = package / "policy" / "mine.yaml"
    mine.write_text("name: fifo\nconfig: aaaa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("clustersim.plugins.config_packages", lambda: [("edited", "edited_configs")])
    assert compose(["policy=mine", "seed=1"]).policy.config == "aaaa"
    time.sleep(0.01)
    mine.write_text("name: fifo\nconfig: bbbb\n")   # same size
    assert compose(["policy=mine", "seed=2"]).policy.config == "bbbb"
    (package / "policy" / "other.yaml").write_text("name: fifo\nconfig: cccc\n")
    assert compose(["policy=other", "seed=1"]).policy.config == "cccc"
    assert compose(["policy=mine"]) == whole(["policy=mine"])


def test_a_structured_config_registered_later_is_composed(monkeypatch):
    store = ConfigStore.instance()
    assert compose(["seed=1"]).seed == 1   # kept before the new entry
    monkeypatch.setitem(store.repo, "extra_test_group", {})
    store.store(group="extra_test_group", name="one", node={"x": 1})
    assert compose(["+extra_test_group=one", "seed=1"]).extra_test_group.x == 1
    store.store(group="extra_test_group", name="one", node={"x": 2})   # replaced
    assert compose(["+extra_test_group=one", "seed=1"]).extra_test_group.x == 2


def test_only_a_few_compositions_are_kept():
    for policy in ("fifo", "srtf", "tiresias", "drf", "tetris", "sjf", "edf", "themis", "optimus", "es",
                   "max_min_fairness", "elastic_tiresias", "dlrover", "sidecar", "manual", "k8s_default",
                   "elasticflow"):
        compose([f"policy={policy}", "seed=1"])
    assert len(composing._kept) <= composing.KEEP

