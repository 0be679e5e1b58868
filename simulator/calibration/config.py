"""The calibration command's config (configs/calibrate/config.yaml), checked whole before anything is
measured, as ``clustersim`` checks its own: unknown keys (``+nosuch=1`` too), wrong types and
out-of-range values are ``ConfigError``s naming the key (``simulator/params.py``).

Bounds are choices that keep a calibration on one host: at most ``MAX_PROCESSES`` processes per
point (a speed sweep starts one per task), counts and batches positive, fractions in (0, 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from clustersim.simulator.errors import ConfigError
from clustersim.simulator.params import Positive, Range, check_params

MAX_PROCESSES = 1024   # choice: processes one point may start on a host (a calibration is one host's)
Tasks = Annotated[int, Range(ge=1, le=MAX_PROCESSES)]
Steps = Annotated[int, Range(ge=1, le=10_000_000)]   # choice: iterations of one timed window or run
Threads = Annotated[int, Range(ge=1, le=4096)]
Batch = Annotated[int, Range(ge=1, le=1_000_000)]   # choice: samples per batch (the defaults are <= 256)
MAX_MODEL_SIZE = 1_000_000   # choice: a built-in model's samples, rows, widths, ... (the defaults are <= 8,192)
IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class CalibrateConfig:
    name: str
    out: str
    model: dict
    dataparallel: dict
    ps: dict
    overhead: dict
    convergence: dict
    fit: dict
    device: Literal["auto", "cpu", "cuda"] = "auto"
    start_method: Literal["auto", "fork", "spawn", "forkserver"] = "auto"
    timeout_s: Positive = 300.0
    lr: Positive = 0.01
    progress: bool | None = None
    plot: bool = True
    pin: bool = False


@dataclass(frozen=True)
class ModelConfig:
    name: str
    import_path: str | None = None
    params: dict | None = None


@dataclass(frozen=True)
class DataParallelConfig:
    enabled: bool = True
    workers: list[Tasks] | None = None
    batch: list[Batch] | None = None
    steps: Steps = 20
    warmup: Annotated[int, Range(ge=0, le=10_000_000)] = 3
    repeats: Annotated[int, Range(ge=1, le=1000)] = 3
    threads: Threads = 1
    profile_batch: Positive | None = None


@dataclass(frozen=True)
class PSConfig:
    enabled: bool = True
    mode: Literal["sync", "async"] = "sync"
    p: list[Tasks] | None = None
    w: list[Tasks] | None = None
    batch: Batch = 256
    steps: Steps = 20
    warmup: Annotated[int, Range(ge=0, le=10_000_000)] = 3
    repeats: Annotated[int, Range(ge=1, le=1000)] = 3
    threads: dict | None = None


@dataclass(frozen=True)
class PSThreads:
    ps: Threads = 1
    worker: Threads = 1


@dataclass(frozen=True)
class OverheadConfig:
    enabled: bool = True
    sizes: list[list[Tasks]] | None = None
    repeats: Annotated[int, Range(ge=1, le=1000)] = 1
    batch: Batch = 32
    pre_steps: Steps = 20
    post_steps: Steps = 5
    threads: Threads = 1


@dataclass(frozen=True)
class ConvergenceConfig:
    enabled: bool = True
    batch: Batch = 64
    lr: Positive = 0.1
    threshold: Positive = 0.01
    patience: Annotated[int, Range(ge=1, le=100_000)] = 3
    max_epochs: Annotated[int, Range(ge=1, le=100_000)] = 60
    threads: Threads = 1
    seed: Annotated[int, Range(ge=0, le=2**63 - 1)] = 0


@dataclass(frozen=True)
class FitConfig:
    test_fraction: Annotated[float, Range(gt=0, lt=1)] = 0.3
    repeats: Annotated[int, Range(ge=1, le=100_000)] = 20


SECTIONS = {"model": ModelConfig, "dataparallel": DataParallelConfig, "ps": PSConfig, "overhead": OverheadConfig,
            "convergence": ConvergenceConfig, "fit": FitConfig}


def check(cfg: dict) -> dict:
    """``cfg`` (plain data) checked whole; returns it. Errors name the key (``ps.p``, ``+nosuch``)."""
    c = {k: v for k, v in cfg.items() if k != "hydra"}
    check_params(CalibrateConfig, c, "{}")
    for section, schema in SECTIONS.items():
        if not isinstance(c[section], dict):
            raise ConfigError(f"{section}: must be a mapping of keys, got {c[section]!r}")
        check_params(schema, c[section], f"{section}.{{}}")
    check_params(PSThreads, c["ps"].get("threads") or {}, "ps.threads.{}")
    if c.get("pin"):   # a pinned process has one core: more threads would share it
        for where, t in (("dataparallel.threads", c["dataparallel"].get("threads", 1)),
                         *((f"ps.threads.{r}", v) for r, v in (c["ps"].get("threads") or {}).items())):
            if int(t) != 1:
                raise ConfigError(f"{where}: pin runs each process on one core, so it needs 1 thread, got {t}")
    for i, pair in enumerate(c["overhead"].get("sizes") or []):
        if len(pair) != 2 or not pair[0] < pair[1]:
            raise ConfigError(f"overhead.sizes[{i}]: a rescale n -> n' needs [n, n'] with 1 <= n < n', got {pair}")
    path = c["model"].get("import_path")
    if path is not None and not IMPORT_PATH.fullmatch(str(path)):
        raise ConfigError(f"model.import_path: must be 'package.module:function', got {path!r}")
    if path is None:
        _check_builtin(c["model"])
    return cfg


def _check_builtin(model: dict) -> None:
    """A built-in model's name and its ``params`` (the workload function's keyword arguments)."""
    from clustersim.simulator.calibration import have_torch

    builtin = ("mlp", "cnn", "recommendation")   # workloads.BUILTIN, read without importing torch
    if model["name"] not in builtin:
        raise ConfigError(f"model.name: unknown calibration model {model['name']!r}; built in: "
                          f"{', '.join(builtin)}; or set model.import_path")
    params = model.get("params") or {}
    for k, v in params.items():   # sizes of the synthetic data and the network: whole numbers in range
        low = 0 if k == "seed" else 1
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, bool) or not isinstance(x, int) or not low <= x <= MAX_MODEL_SIZE:
                raise ConfigError(f"model.params.{k}: must be whole numbers in [{low}, {MAX_MODEL_SIZE:,}], got {v!r}")
    if have_torch():   # the functions' signatures live beside torch; without it the command stops anyway
        from clustersim.simulator.calibration import workloads

        check_params(workloads.BUILTIN[model["name"]], params, "model.params.{}")
