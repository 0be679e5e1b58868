"""Every shipped experiment composes, and the policy, overhead and fault model it sets up take the
keys it gives them: a key set for the wrong policy (say a SideCar key on Kubernetes' default
baseline) is an error here, not at the experiment's first run."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from clustersim.experiment import compose, make_policy
from clustersim.simulator import faults as faults_mod, overhead as overhead_mod
from clustersim.simulator.errors import ConfigError

EXPERIMENTS = sorted(p.stem for p in (Path(__file__).parent.parent / "configs" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_an_experiment_builds_its_policy_overhead_and_faults(name):
    c = OmegaConf.to_container(compose([f"+experiment={name}"]), resolve=True)
    policy, _, _ = make_policy(c["policy"])
    assert policy.name == c["policy"]["name"]
    overhead_mod.make(c["overhead"])
    faults_mod.make(c.get("faults"), 0)


def test_a_key_the_policy_does_not_take_is_named():
    c = OmegaConf.to_container(compose(["+experiment=sidecar_default", "+policy.checkpoint_gb_per_s=0.25"]), resolve=True)
    with pytest.raises(ConfigError, match="policy.checkpoint_gb_per_s: unknown key"):
        make_policy(c["policy"])
