"""Policy parameters: every bad value is a ConfigError naming the key, reported by ``check``
before anything runs (simulator/params.py: types, bounds, list rules and cross-parameter rules
declared beside the types); one source of defaults, the constructor's, which each
``configs/policy/<name>.yaml`` restates and must not drift from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
import yaml

from clustersim import policies
from clustersim.experiment import check, compose
from clustersim.policies.base import POLICIES
from clustersim.simulator.errors import ConfigError
from clustersim.simulator.params import Increasing, Length, Rule, SchemaError, check_params, parameters, rules
from clustersim.simulator.registry import Registry

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "policy"


# ---------------------------------------------------------------------------- one line naming the key
@pytest.mark.parametrize("overrides, message", [
    (["policy=tiresias", "policy.thresholds=[7200,3250]"],
     r"^policy\.thresholds: must be increasing, got \[7200\.0, 3250\.0\] \(policy\.thresholds\[1\] = 3250\.0 "
     r"after 7200\.0\)$"),
    (["policy=tiresias", "policy.thresholds=[]"], r"^policy\.thresholds: must hold 1 to 16 items, got 0$"),
    (["policy=tiresias", "policy.thresholds=[-5,10]"], r"^policy\.thresholds\[0\]: must be > 0, got -5\.0$"),
    (["policy=tiresias", "policy.gittins=true", "policy.queue_order=pollux"],
     r"^policy\.queue_order: queue_order orders the FIFO queues; with gittins: true leave it 'clustersim'$"),
    (["policy.name=nosuch"], r"^policy\.name: unknown policy 'nosuch'; known: dlrover, drf, "),
    (["policy=elastic_tiresias", "policy.min_fraction=1e12"], r"^policy\.min_fraction: must be <= 1, got 1000000000000\.0$"),
    (["policy=dlrover", "policy.generations=1e12"], r"^policy\.generations: must be <= 10000, got 1000000000000$"),
    (["policy=dlrover", "policy.pop_size=1e12"], r"^policy\.pop_size: must be <= 10000, got 1000000000000$"),
    (["policy=drf", "policy.fair_share=user"], r"^policy\.fair_share: must be one of 'job', 'tenant', got 'user'$"),
    (["policy=drf", "policy.placement=whole_node"], r"^policy\.placement: must be one of .*got 'whole_node'$"),
    (["policy=tetris", "policy.srtf_weight=-1"], r"^policy\.srtf_weight: must be >= 0, got -1\.0$"),
    (["policy=drf", "policy.interval=0"], r"^policy\.interval: must be > 0, got 0\.0$"),
    (["policy=sidecar", "policy.gpu_options=[]"], r"^policy\.gpu_options: must hold 1 to 64 items, got 0$"),
    (["policy=sidecar", "policy.gpu_options=[1,100000]"], r"^policy\.gpu_options\[1\]: must be <= 4096, got 100000$"),
    (["policy=optimus", "policy.prerun=[[1,2,3]]"], r"^policy\.prerun\[0\]: must hold 2 to 2 items, got 3$"),
    (["policy=optimus", "policy.prerun=[[0,2]]"], r"^policy\.prerun\[0\]\[0\]: must be >= 1, got 0$"),
    (["policy=es", "policy.default_step=1e9"], r"^policy\.default_step: must be <= 1024, got 1000000000$"),
])
def test_a_bad_policy_parameter_is_one_config_error_before_the_run(overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        check(compose(overrides))
    assert "\n" not in str(info.value)


def test_a_missing_gittins_file_is_a_trace_error_naming_it():
    from clustersim.simulator.errors import TraceError
    with pytest.raises(TraceError, match=r"^/nonexistent\.csv: no such trace file"):
        check(compose(["policy=tiresias", "policy.gittins=true", "policy.gittins_distribution=/nonexistent.csv"]))


def test_the_command_exits_1_with_one_line_and_a_whole_failed_run_json(tmp_path):
    import json
    import subprocess
    import sys
    run_dir = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "clustersim.cli", "policy=tiresias", "policy.thresholds=[7200,3250]",
                        f"hydra.run.dir={run_dir}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == ["clustersim: error: policy.thresholds: must be increasing, got "
                                             "[7200.0, 3250.0] (policy.thresholds[1] = 3250.0 after 7200.0)"]
    # nothing ran: no outputs, only the record (and Hydra's own .hydra/)
    assert sorted(f.name for f in run_dir.iterdir() if f.name != ".hydra") == ["run.json", "run.log"]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed" and record["error_type"] == "ConfigError"


# ---------------------------------------------------------------------------- the rule machinery
def test_rules_across_parameters_see_defaults_and_name_the_key_set():
    @rules(Rule(("lo", "hi"), lambda lo, hi: lo < hi, "lo must be below hi"))
    def f(lo: float = 1.0, hi: float = 10.0):
        pass
    assert check_params(f, {"lo": 5}) == {"lo": 5.0}
    with pytest.raises(ConfigError, match=r"^x\.hi: lo must be below hi$"):
        check_params(f, {"hi": 0.5}, "x.{}")          # only hi set: hi is named
    with pytest.raises(ConfigError, match=r"^x\.lo: lo must be below hi$"):
        check_params(f, {"lo": 20}, "x.{}")


def test_list_rules():
    def f(xs: Annotated[list[float], Increasing(strict=False), Length(2, 3)] = (1.0, 1.0)):
        pass
    assert check_params(f, {"xs": [1, 1, 2]}) == {"xs": [1.0, 1.0, 2.0]}
    with pytest.raises(ConfigError, match=r"xs: must be non-decreasing"):
        check_params(f, {"xs": [2, 1]})
    with pytest.raises(ConfigError, match=r"xs: must hold 2 to 3 items, got 4"):
        check_params(f, {"xs": [1, 2, 3, 4]})


def test_an_unresolvable_annotation_is_an_error_at_registration_not_silence():
    def f(x: "NoSuchType" = 1):  # noqa: F821
        pass
    with pytest.raises(SchemaError, match=r"annotation cannot be resolved \(NameError: name 'NoSuchType'"):
        parameters(f)

    reg = Registry("widget", "clustersim.simulator.profiles", "clustersim.no_such_group")

    class Widget:
        name = "w"

        def __init__(self, size: "Sise" = 1):  # noqa: F821
            pass
    with pytest.raises(SchemaError, match="Widget.__init__"):
        reg.register()(Widget)
    with pytest.raises(SchemaError):
        policies.register(type("Bad", (policies.Policy,), {"name": "bad-annotation",
                                                              "__init__": Widget.__init__}))


def test_every_registered_component_has_a_resolvable_schema():
    from clustersim.simulator import overhead, profiles
    from clustersim.traces import FORMATS
    for reg in (POLICIES, FORMATS, overhead.OVERHEADS, profiles.SPEED_KINDS):
        for entry in reg.entries():
            assert isinstance(entry.defaults, dict), entry.name
    assert not POLICIES.broken


# ---------------------------------------------------------------------------- one source of defaults
from clustersim.experiment import PolicyConfig  # noqa: E402
def _config(path: Path) -> tuple[str, dict]:
    cfg = yaml.safe_load(path.read_text())
    name = cfg.pop("name")
    for key in PolicyConfig.__dataclass_fields__:   # the keys every policy config has, besides its own
        cfg.pop(key, None)
    return name, cfg


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_policy_config_does_not_drift_from_the_constructor(path):
    """``configs/policy/<name>.yaml`` restates the constructor's defaults (so that Hydra can
    override each key); a preset (``tiresias_edl.yaml``: another file, the same policy) sets
    only keys the policy has, each to a valid value."""
    name, cfg = _config(path)
    entry = POLICIES.get(name)
    check_params(entry.obj.__init__, cfg, f"{path.name}: {{}}")
    if path.stem == name:
        assert cfg == entry.defaults, f"{path.name} drifted from {entry.obj.__qualname__}.__init__'s defaults"
    else:
        assert path.stem.startswith(name + "_"), f"preset {path.name} should be named {name}_<variant>.yaml"


def test_every_policy_has_its_config():
    shipped = [n for n in policies.names() if policies.get(n).__module__.startswith("clustersim.policies.")]
    assert sorted(p.stem for p in CONFIGS.glob("*.yaml") if _config(p)[0] == p.stem) == shipped


# ---------------------------------------------------------------------------- the lazy registry
def test_asking_for_one_policy_imports_only_its_module():
    import subprocess
    import sys
    code = ("import sys; from clustersim import policies; policies.get('fifo'); "
            "print(sorted(m for m in sys.modules if m.startswith('clustersim.policies.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)
    assert "clustersim.policies.fifo" in loaded
    assert not {"clustersim.policies.dlrover", "clustersim.policies.optimus", "clustersim.policies.tiresias"} & set(loaded)


def test_a_broken_module_breaks_only_its_own_names(tmp_path, monkeypatch):
    pkg = tmp_path / "brokenpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text("from tests.policies.test_params import REG\n@REG.register('good')\nclass Good:\n"
                                 "    '''A good one.'''\n    def __init__(self, x: int = 3):\n        pass\n")
    (pkg / "bad.py").write_text("raise RuntimeError('bad module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    global REG
    REG = Registry("gadget", "brokenpkg", "clustersim.no_such_group")
    entry = REG.get("good")
    assert (entry.doc, entry.defaults) == ("A good one.", {"x": 3})
    with pytest.raises(RuntimeError, match="bad module"):   # its own name: its own error
        REG.get("bad")
    with pytest.raises(KeyError, match=r"unknown gadget 'other'; known: good; module brokenpkg.bad did not load "
                                       r"\(RuntimeError: bad module\)"):
        REG.get("other")


REG: Registry | None = None


def test_a_broken_plugin_is_one_config_error_naming_it(tmp_path, monkeypatch):
    """An installed package whose entry point ``policy=<its name>`` loads raises: one line."""
    dist = tmp_path / "brokenplugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[clustersim.policies]\nbroken_policy = brokenplugin_mod\n")
    (tmp_path / "brokenplugin_mod.py").write_text("raise RuntimeError('needs a GPU driver')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"^policy\.name: 'broken_policy': entry point 'broken_policy' = "
                                          r"'brokenplugin_mod' \(group clustersim\.policies\) failed to load: "
                                          r"RuntimeError: needs a GPU driver$"):
        policies.make("broken_policy")
