"""Every shipped config composes and builds what it names."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from clustersim.simulator.cluster import from_config

CONFIGS = Path(__file__).parent.parent / "configs"


@pytest.mark.parametrize("path", sorted((CONFIGS / "cluster").glob("*.yaml")), ids=lambda p: p.stem)
def test_cluster_configs_build(path):
    cfg = OmegaConf.load(path)
    assert cfg.name == path.stem
    cluster = from_config(cfg, (100.0, 8.0))
    assert cluster.num_nodes > 0 and cluster.total.sum() > 0


def test_tiresias_cluster_specs_match_their_csv():
    import csv
    from clustersim.traces import DATA
    for name in ("n32g4", "n160g8", "n256g8"):
        row = list(csv.DictReader(open(DATA / "tiresias" / f"{name}.csv")))[0]
        cluster = from_config(OmegaConf.load(CONFIGS / "cluster" / f"{name}.yaml"))
        nodes = int(row["num_switch"]) * int(row["num_node_p_switch"])
        assert cluster.num_nodes == nodes
        assert tuple(cluster.capacity[0]) == (float(row["num_gpu_p_node"]), float(row["num_cpu_p_node"]),
                                              float(row["mem_p_node"]))
        assert max(cluster.rack) + 1 == int(row["num_switch"])


def test_openb_cluster_has_every_node_of_the_node_list():
    import pandas as pd
    from clustersim.traces import DATA
    nodes = pd.read_csv(DATA / "alibaba_v2023" / "openb_node_list_all_node.csv")
    cluster = from_config(OmegaConf.load(CONFIGS / "cluster" / "openb.yaml"))
    assert cluster.num_nodes == len(nodes)
    assert cluster.total_gpus == nodes["gpu"].sum()
    assert cluster.total[1] == pytest.approx(nodes["cpu_milli"].sum() / 1000)
