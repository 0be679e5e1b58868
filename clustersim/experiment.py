"""One run from a config: trace → jobs → cluster → policy → engine → run directory."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from omegaconf import DictConfig, OmegaConf

from clustersim import policies
from clustersim.simulator import cluster as cluster_mod
from clustersim.simulator.engine import Engine
from clustersim.simulator.metrics import Recorder, atomic_write, format_summary
from clustersim.simulator import overhead as overhead_mod
from clustersim.simulator.workload import Assignment, build_jobs
from clustersim.traces.load import REJECTS_FILE, LoadReport
from clustersim.traces.load import load as load_trace_table
from clustersim.traces.transform import oversize


def load_trace(cfg: DictConfig, seed: int = 0) -> tuple[pa.Table, LoadReport]:
    """The trace group's job table (read through the cache, concatenated, transformed) and
    the load report (rejects, drops, transforms) for the run's metadata."""
    return load_trace_table(OmegaConf.to_container(cfg, resolve=True), seed)


def trace_gpu_demand(table: pa.Table) -> tuple[float, float]:
    """(mean busy GPUs if every job started on arrival, largest job's GPUs)."""
    gpus, dur, submit = table["num_gpus"], table["duration"], table["submit_time"]
    gpu_s = pc.sum(pc.multiply(gpus, dur)).as_py() or 0.0
    span = (pc.max(pc.add(submit, dur)).as_py() or 0.0) - (pc.min(submit).as_py() or 0.0)
    return (gpu_s / span if span > 0 else 0.0), pc.max(gpus).as_py() or 0.0


def build_engine(cfg: DictConfig, table: pa.Table | None = None, trace_report: LoadReport | None = None) -> Engine:
    if table is None:
        table, trace_report = load_trace(cfg.trace, cfg.get("seed", 0))
    cluster = cluster_mod.from_config(cfg.cluster, trace_gpu_demand(table))
    table, oversize_record = oversize(table, cluster.capacity, cfg.trace.get("oversize") or "error")
    if trace_report is not None:
        trace_report.oversize = oversize_record
        trace_report.jobs = table.num_rows
    profile_cfg = cfg.get("profile")
    assignment = Assignment.from_config(OmegaConf.to_container(profile_cfg, resolve=True) if profile_cfg else None)
    jobs = build_jobs(table, f"trace {cfg.trace.name}", assignment, cluster, cfg.get("seed", 0))
    params = OmegaConf.to_container(cfg.policy, resolve=True)
    policy = policies.make(params.pop("name"), **params)
    ov = overhead_mod.make(OmegaConf.to_container(cfg.overhead, resolve=True),
                           assignment.zoo.costs_of if assignment else None)
    return Engine(jobs, cluster, policy, speed=assignment.zoo.speed if assignment else None, overhead=ov,
                  until=cfg.get("until"),
                  progress=cfg.get("progress"))


def run(cfg: DictConfig, run_dir: str | Path) -> tuple[dict, Recorder]:
    """Run the experiment ``cfg`` and write its outputs to ``run_dir``."""
    t0 = time.perf_counter()
    table, trace_report = load_trace(cfg.trace, cfg.get("seed", 0))
    if trace_report.rejected:  # before anything else can fail: the rejects explain a failed run too
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        atomic_write(Path(run_dir) / REJECTS_FILE, trace_report.write_rejects)
    engine = build_engine(cfg, table, trace_report)
    recorder = engine.run()
    wall = time.perf_counter() - t0
    meta = {"config": OmegaConf.to_container(cfg, resolve=True), "wall_time_s": wall,
            "jobs": len(engine.jobs), "nodes": engine.cluster.num_nodes, "trace": trace_report.as_dict()}
    summary = recorder.write(run_dir, meta)
    return summary, recorder


def report(cfg: DictConfig, summary: dict, run_dir: str | Path) -> str:
    head = f"clustersim: policy={cfg.policy.name} trace={cfg.trace.name} seed={cfg.seed} -> {run_dir}"
    return f"{head}\n{format_summary(summary)}"


def compose(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The config `clustersim <overrides>` would run, for notebooks and scripts."""
    from hydra import compose as hydra_compose, initialize_config_module

    with initialize_config_module(config_module="clustersim.configs", version_base=None):
        return hydra_compose("config", overrides=list(overrides))
