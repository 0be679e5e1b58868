"""clustersim's sweeper (hydra_plugins/clustersim_sweeper): the basic sweeper's sweeps, each
run's config composed once."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import importlib


def plugin():
    """The plugin module as it is now: Hydra's plugin scan runs the module again (new classes)."""
    return importlib.import_module("hydra_plugins.clustersim_sweeper.sweeper")


class CountingLoader:
    def __init__(self):
        self.calls = []

    def load_sweep_config(self, master, overrides):
        self.calls.append(tuple(overrides))
        return {"composed": tuple(overrides), "n": len(self.calls)}


def test_a_config_composed_for_the_check_is_handed_to_the_launcher_once():
    loader, master = CountingLoader(), object()
    once = plugin().ComposeOnce(loader, keep=2)
    for job in (["seed=0"], ["seed=1"], ["seed=2"]):
        once.compose(master, job)
    assert loader.calls == [("seed=0",), ("seed=1",), ("seed=2",)]
    assert once.load_sweep_config(master, ["seed=0"]) == {"composed": ("seed=0",), "n": 1}   # kept
    assert once.load_sweep_config(master, ["seed=1"])["n"] == 2
    assert once.load_sweep_config(master, ["seed=2"])["n"] == 4     # past keep: composed again
    assert once.load_sweep_config(master, ["seed=0"])["n"] == 5     # handed out once only
    once.compose(master, ["seed=3"])
    assert once.load_sweep_config(object(), ["seed=3"])["n"] == 7   # another sweep's master: composed
    assert pickle.loads(pickle.dumps(once)).kept == {}               # other processes compose


def test_kept_files_are_copies_shared_by_the_repositorys_copies():
    import copy

    class Repo:
        reads = 0

        def get_sources(self):
            return []

        def load_config(self, path):
            Repo.reads += 1
            return {"path": path, "body": [1, 2]}

    kept = plugin().KeptFiles(Repo())
    a = kept.load_config("x")
    a["body"].append(3)                                  # composing changes what it loaded
    b = copy.deepcopy(kept).load_config("x")             # Hydra copies the repository per composition
    assert b == {"path": "x", "body": [1, 2]} and Repo.reads == 1


def sweep(tmp_path, name, *args, check=True):
    out = tmp_path / name
    p = subprocess.run([sys.executable, "-m", "clustersim.cli", "-m", f"hydra.sweep.dir={out}", "progress=false",
                        *args], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "PYTHONPATH": ""})
    assert (p.returncode == 0) == check, p.stderr
    return out, p


def test_the_sweep_equals_the_basic_sweepers(tmp_path):
    args = ["policy=fifo,sjf", "seed=0,1"]
    mine, _ = sweep(tmp_path, "mine", *args)
    basic, _ = sweep(tmp_path, "basic", *args, "hydra/sweeper=basic")
    runs = sorted(p.name for p in mine.iterdir() if p.is_dir())
    assert len(runs) == 4 and runs == sorted(p.name for p in basic.iterdir() if p.is_dir())
    assert json.loads((mine / "sweep.json").read_text()) == json.loads((basic / "sweep.json").read_text())
    for r in runs:
        for f in ("summary.json", ".hydra/config.yaml", ".hydra/overrides.yaml"):
            assert (mine / r / f).read_text() == (basic / r / f).read_text(), (r, f)
        assert "ClustersimSweeper" in (mine / r / ".hydra/hydra.yaml").read_text()


def test_a_bad_run_fails_the_sweep_before_any_run(tmp_path):
    out, p = sweep(tmp_path, "bad", "policy=fifo,no_such_policy", check=False)
    assert "no_such_policy" in p.stderr
    assert "Could not find 'policy/no_such_policy'" in p.stderr
    assert not list(Path(out).glob("*/run.json"))   # checked before the first run started


def composer():
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    import clustersim.sweep  # noqa: F401  (the ${run_name:...} resolver)

    return ConfigLoaderImpl(config_search_path=create_config_search_path("pkg://clustersim.configs"))


def test_runs_made_from_a_composed_run_equal_hydras_composition():
    """Runs that differ from a composed one only in plain values are made from its config; every
    run's config (hydra node, override list, override_dirname included) is what Hydra composes."""
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from clustersim.sweep import expand

    args = ["seed=0,1,2", "policy=tiresias", "policy.thresholds=[3600,7200],[100,200]", "trace=tiresias_60,philly",
            "+foo=1,2", "policy.starvation_knob=0,2.5", "until=null,100", "limits={max_events:5}"]
    master = composer().load_configuration("config", [*args, "hydra/sweeper=clustersim", "hydra.mode=MULTIRUN"],
                                           RunMode.MULTIRUN)
    jobs = expand(master)
    once, reference = plugin().ComposeOnce(composer(), keep=256), composer()
    for job in jobs:
        once.compose(master, job)
    assert len(jobs) == 96 and len(once.templates) == 8   # one per thresholds x trace x foo
    for job in jobs:
        assert OmegaConf.to_yaml(once.load_sweep_config(master, job)) == \
            OmegaConf.to_yaml(reference.load_sweep_config(master, job)), job


def test_only_plain_values_are_taken_from_another_run():
    once = plugin().ComposeOnce(composer(), keep=0)
    assert once.plain(["seed=1", "policy=srtf"])[2][0].input_line == "seed=1"   # policy is a config group
    assert [o.input_line for o in once.plain(["seed=1", "+foo=2", "x={a:1}", "y=[1]"])[2]] == ["seed=1"]
    assert once.plain(["seed=1", "hydra.job.name=x"]) is None     # goes to hydra's own override list
    assert once.plain(["observe=null", "observe.samples_kept=3"]) is None   # the order of the two matters
