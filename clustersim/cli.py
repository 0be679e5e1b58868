"""The ``clustersim`` command: Hydra composes configs/config.yaml with its groups.

Errors a user can fix (a bad key or value, a bad trace file, a policy that broke the
contract or ran away, jobs left unfinished) print one message naming the cause and exit 1;
a run with unfinished jobs still writes its outputs first. Every run, failed or not, leaves
``run.json`` saying so, written last. In a sweep (``-m``) a failed run does not stop the
others: the sweep reports every failure at its end and then exits 1, and a run whose
directory already holds a complete run of the same config is skipped, so re-running an
interrupted sweep into its directory (``hydra.sweep.dir=...``) redoes only what is missing.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

import clustersim.sweep  # noqa: F401  (registers ${run_name:...} for the run directories)
from clustersim.experiment import is_complete, mark_failed, report, run
from clustersim.simulator.errors import ConfigError, PolicyError, TraceError, UnfinishedJobsError

USER_ERRORS = (ConfigError, TraceError, PolicyError, UnfinishedJobsError)


@hydra.main(version_base=None, config_path="pkg://clustersim.configs", config_name="config")
def main(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    run_dir, overrides = hc.runtime.output_dir, list(hc.overrides.task)
    sweep = hc.mode == RunMode.MULTIRUN
    if sweep and cfg.get("progress") is None:
        with open_dict(cfg):
            cfg.progress = False   # the sweep has its own bar
    try:
        if is_complete(run_dir, cfg):
            print(f"clustersim: {run_dir} already holds this run, complete: skipped", flush=True)
            return
        summary, _ = run(cfg, run_dir, overrides)
    except USER_ERRORS as e:
        if isinstance(e, UnfinishedJobsError):
            if e.summary is not None:
                print(report(cfg, e.summary, run_dir), flush=True)
        else:
            mark_failed(run_dir, e, cfg, overrides)
        print(f"clustersim: error: {e}", file=sys.stderr, flush=True)
        if sweep:
            return   # the sweep's report lists it and the command exits 1 at the end
        raise SystemExit(1) from None
    print(report(cfg, summary, run_dir), flush=True)


if __name__ == "__main__":
    main()
