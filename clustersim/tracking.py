"""Log runs to an experiment tracker (MLflow): each run's config as parameters, its summary as
metrics, its provenance and warnings as tags, and its summary.json, run.json and run.log as
artifacts.

As a Hydra callback, for every run of a command or sweep (``pip install -e '.[mlflow]'``)::

    clustersim -m policy=fifo,tiresias seed=0,1 \\
        +hydra.callbacks.mlflow._target_=clustersim.tracking.MLflowCallback \\
        +hydra.callbacks.mlflow.experiment=first-study      # tracking_uri=...: a server; default ./mlruns

or afterwards, for run directories already written::

    from clustersim.tracking import log_run
    for d in Path("runs/first").glob("*/run.json"):
        log_run(d.parent, experiment="first-study")

``tracker`` is the ``mlflow`` module unless given (any object with MLflow's ``set_tracking_uri``,
``set_experiment``, ``start_run``, ``log_params``, ``log_metrics``, ``set_tags``, ``log_artifact``).
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

PARAM_MAX = 500   # MLflow's limit on a parameter's value (characters), as of its 2.x releases


def log_run(run_dir: str | Path, tracker: Any = None, experiment: str | None = None,
            tracking_uri: str | None = None) -> None:
    """Log the run in ``run_dir`` (a complete or failed run: its run.json) as one tracker run."""
    run_dir = Path(run_dir)
    meta_file = run_dir / "run.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"{run_dir}: no run.json (not a finished run)")
    meta = json.loads(meta_file.read_text())
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    t = _tracker(tracker)
    if tracking_uri:
        t.set_tracking_uri(tracking_uri)
    if experiment:
        t.set_experiment(experiment)
    with t.start_run(run_name=run_dir.name):
        t.log_params(params(meta.get("config") or {}))
        t.log_metrics(metrics(summary))
        t.set_tags({"clustersim.run_dir": str(run_dir.resolve()), "clustersim.status": str(meta.get("status")),
                    "clustersim.version": str(meta.get("version")), "clustersim.git_commit": str(meta.get("git_commit")),
                    "clustersim.overrides": " ".join(meta.get("overrides") or []),
                    "clustersim.warnings": str(len(meta.get("warnings") or []))})
        for name in ("summary.json", "run.json", "run.log"):
            if (run_dir / name).is_file():
                t.log_artifact(str(run_dir / name))


def params(config: dict, prefix: str = "") -> dict[str, str]:
    """A nested config as flat ``a.b.c`` keys with string values (lists as JSON), cut to the
    tracker's length limit."""
    out: dict[str, str] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(params(v, key + "."))
        else:
            s = v if isinstance(v, str) else json.dumps(v, default=str)
            out[key] = s if len(s) <= PARAM_MAX else s[: PARAM_MAX - 1] + "…"
    return out


def metrics(summary: dict) -> dict[str, float]:
    """The summary's finite numbers (counts and times; lists, maps and nulls are left out)."""
    return {k: float(v) for k, v in summary.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _tracker(tracker: Any) -> Any:
    if tracker is None or isinstance(tracker, str):
        name = tracker or "mlflow"
        try:
            return importlib.import_module(name)
        except ImportError:
            raise ImportError(f"clustersim.tracking: the tracker module {name!r} is not installed "
                              "(for MLflow: pip install -e '.[mlflow]')") from None
    return tracker


try:   # a Hydra callback where Hydra is installed (always, with clustersim)
    from hydra.experimental.callback import Callback as _Callback
except ImportError:   # pragma: no cover
    _Callback = object


class MLflowCallback(_Callback):
    """Hydra callback: after each run of ``clustersim`` (one run, or every run of a sweep, on
    whatever launcher), log its run directory with ``log_run``. ``tracker``: a module name (default
    ``mlflow``)."""

    def __init__(self, experiment: str | None = None, tracking_uri: str | None = None, tracker: str | None = None):
        self.experiment, self.tracking_uri, self.tracker = experiment, tracking_uri, tracker

    def on_job_end(self, config, job_return, **kwargs) -> None:
        run_dir = Path(job_return.hydra_cfg.hydra.runtime.output_dir)
        if (run_dir / "run.json").is_file():   # a run that wrote nothing (killed) has nothing to log
            log_run(run_dir, self.tracker, self.experiment, self.tracking_uri)
