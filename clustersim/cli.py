"""The ``clustersim`` command: Hydra composes configs/config.yaml with its groups.

Errors a user can fix (a bad key or value, a bad trace file, a policy that broke the
contract or ran away, jobs left unfinished) print one message naming the cause and exit 1;
a run with unfinished jobs still writes its outputs first.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from clustersim.experiment import report, run
from clustersim.simulator.errors import ConfigError, PolicyError, TraceError, UnfinishedJobsError

USER_ERRORS = (ConfigError, TraceError, PolicyError, UnfinishedJobsError)


@hydra.main(version_base=None, config_path="pkg://clustersim.configs", config_name="config")
def main(cfg: DictConfig) -> None:
    run_dir = HydraConfig.get().runtime.output_dir
    try:
        summary, _ = run(cfg, run_dir)
    except USER_ERRORS as e:
        if isinstance(e, UnfinishedJobsError) and e.summary is not None:
            print(report(cfg, e.summary, run_dir), flush=True)
        print(f"clustersim: error: {e}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    print(report(cfg, summary, run_dir), flush=True)


if __name__ == "__main__":
    main()
