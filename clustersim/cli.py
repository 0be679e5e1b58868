"""The ``clustersim`` command: Hydra composes configs/config.yaml with its groups."""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from clustersim.experiment import report, run


@hydra.main(version_base=None, config_path="pkg://clustersim.configs", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = HydraConfig.get().runtime.output_dir
    summary, _ = run(cfg, run_dir)
    print(report(cfg, summary, run_dir), flush=True)


if __name__ == "__main__":
    main()
