"""One run from a config: trace → jobs → cluster → policy → engine → run directory."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from omegaconf import DictConfig, OmegaConf

import policies
import traces
from simulator import cluster as cluster_mod
from simulator.engine import Engine
from simulator.metrics import Recorder, format_summary
from simulator.overhead import ConstantOverhead
from simulator.workload import build_jobs
from traces.schema import validate


def load_trace(cfg: DictConfig) -> pa.Table:
    """The trace group's files, read and concatenated into one validated job table."""
    paths = cfg.path if OmegaConf.is_list(cfg.path) else [cfg.path]
    options = OmegaConf.to_container(cfg.options, resolve=True) if cfg.get("options") else {}
    tables = [traces.read(cfg.format, p, **options) for p in paths]
    table = tables[0] if len(tables) == 1 else validate(pa.concat_tables(tables), f"trace {cfg.name}")
    return table


def trace_gpu_demand(table: pa.Table) -> tuple[float, float, float]:
    """(mean busy GPUs if every job started on arrival, largest job's GPUs, total GPU-seconds)."""
    gpus, dur, submit = table["num_gpus"], table["duration"], table["submit_time"]
    gpu_s = pc.sum(pc.multiply(gpus, dur)).as_py() or 0.0
    span = (pc.max(pc.add(submit, dur)).as_py() or 0.0) - (pc.min(submit).as_py() or 0.0)
    return (gpu_s / span if span > 0 else 0.0), pc.max(gpus).as_py() or 0.0, gpu_s


def build_engine(cfg: DictConfig, table: pa.Table | None = None) -> Engine:
    table = load_trace(cfg.trace) if table is None else table
    cluster = cluster_mod.from_config(cfg.cluster, trace_gpu_demand(table))
    jobs = build_jobs(table, f"trace {cfg.trace.name}")
    params = OmegaConf.to_container(cfg.policy, resolve=True)
    policy = policies.make(params.pop("name"), **params)
    ov = OmegaConf.to_container(cfg.overhead, resolve=True)
    ov.pop("name", None)
    return Engine(jobs, cluster, policy, overhead=ConstantOverhead(**ov), until=cfg.get("until"),
                  progress=cfg.get("progress"))


def run(cfg: DictConfig, run_dir: str | Path) -> tuple[dict, Recorder]:
    """Run the experiment ``cfg`` and write its outputs to ``run_dir``."""
    t0 = time.perf_counter()
    engine = build_engine(cfg)
    recorder = engine.run()
    wall = time.perf_counter() - t0
    meta = {"config": OmegaConf.to_container(cfg, resolve=True), "wall_time_s": wall,
            "jobs": len(engine.jobs), "nodes": engine.cluster.num_nodes}
    summary = recorder.write(run_dir, meta)
    return summary, recorder


def report(cfg: DictConfig, summary: dict, run_dir: str | Path) -> str:
    head = f"clustersim: policy={cfg.policy.name} trace={cfg.trace.name} seed={cfg.seed} -> {run_dir}"
    return f"{head}\n{format_summary(summary)}"


def compose(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The config `clustersim <overrides>` would run, for notebooks and scripts."""
    from hydra import compose as hydra_compose, initialize_config_module

    with initialize_config_module(config_module="configs", version_base=None):
        return hydra_compose("config", overrides=list(overrides))
