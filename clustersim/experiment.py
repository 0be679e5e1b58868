"""One run from a config: check it → trace → jobs → cluster → policy → engine → run directory."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.compute as pc
from omegaconf import DictConfig, OmegaConf

from clustersim import policies
from clustersim.simulator import cluster as cluster_mod
from clustersim.simulator import faults as faults_mod
from clustersim.simulator import overhead as overhead_mod
from clustersim.simulator.engine import Engine, Limits, Observe
from clustersim.simulator.errors import ConfigError, UnfinishedJobsError
from clustersim.simulator.metrics import Recorder, atomic_write, format_summary
from clustersim.simulator.params import Count, Range, check_params
from clustersim.simulator.workload import Assignment, build_jobs
from clustersim.traces.load import REJECTS_FILE, LoadReport
from clustersim.traces.load import check_config as check_trace
from clustersim.traces.load import load as load_trace_table
from clustersim.traces.transform import oversize

GROUPS = ("trace", "cluster", "policy", "overhead", "profile", "faults")
OPTIONAL_GROUPS = ("faults",)   # absent: off


@dataclass(frozen=True)
class RunConfig:
    """The top-level keys of config.yaml besides its groups."""

    seed: Count = 0
    until: Annotated[float, Range(ge=0)] | None = None   # stop at this simulated time (s)
    progress: bool | None = None                          # tqdm bar: null = on a terminal only
    limits: dict | None = None                            # simulator.engine.Limits
    observe: dict | None = None                           # simulator.engine.Observe


@dataclass(frozen=True)
class PolicyConfig:
    """Keys every policy config has, besides the policy's own parameters."""

    name: str
    decision_interval: Annotated[float, Range(gt=0)] | None = None   # null: event-driven; s: rounds


def check(cfg: DictConfig | dict) -> dict:
    """The config as plain data, every key checked before anything runs: unknown keys (``+key``
    too), wrong types, out-of-range values. Errors name the key and list the valid ones."""
    c = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    c.pop("hydra", None)
    top = {k: v for k, v in c.items() if k not in GROUPS}
    unknown = sorted(set(top) - set(RunConfig.__dataclass_fields__))
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown key; valid keys: "
                          f"{', '.join(sorted([*GROUPS, *RunConfig.__dataclass_fields__]))}")
    check_params(RunConfig, top, "{}")
    for g in GROUPS:
        if g in OPTIONAL_GROUPS and c.get(g) is None:
            continue
        if not isinstance(c.get(g), dict):
            raise ConfigError(f"{g}: missing; choose one with {g}=<name> (see clustersim --help)")
    check_params(Limits, c.get("limits") or {}, "limits.{}")
    check_params(Observe, c.get("observe") or {}, "observe.{}")
    check_trace(c["trace"])
    cluster_mod.check_config(c["cluster"])
    pol = dict(c["policy"])
    check_params(PolicyConfig, {k: pol.pop(k) for k in ("name", "decision_interval") if k in pol}, "policy.{}")
    policies.make(c["policy"]["name"], **pol)   # checks the policy's own parameters
    overhead_mod.make(c["overhead"])
    faults_mod.check_config(c.get("faults"))
    Assignment.from_config({**c["profile"], "zoo": False})   # keys only; the zoo loads at build time
    return c


def load_trace(cfg: dict | DictConfig, seed: int = 0) -> tuple[pa.Table, LoadReport]:
    """The trace group's job table (read through the cache, concatenated, transformed) and
    the load report (rejects, drops, transforms) for the run's metadata."""
    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    return load_trace_table(cfg, seed)


def trace_gpu_demand(table: pa.Table) -> tuple[float, float]:
    """(mean busy GPUs if every job started on arrival, largest job's GPUs)."""
    gpus, dur, submit = table["num_gpus"], table["duration"], table["submit_time"]
    gpu_s = pc.sum(pc.multiply(gpus, dur)).as_py() or 0.0
    span = (pc.max(pc.add(submit, dur)).as_py() or 0.0) - (pc.min(submit).as_py() or 0.0)
    return (gpu_s / span if span > 0 else 0.0), pc.max(gpus).as_py() or 0.0


def build_engine(cfg: DictConfig | dict, table: pa.Table | None = None,
                 trace_report: LoadReport | None = None) -> Engine:
    """The engine ``cfg`` describes (checked first), ready to run."""
    return _build(check(cfg), table, trace_report)


def _build(c: dict, table: pa.Table | None, trace_report: LoadReport | None) -> Engine:
    seed = c.get("seed", 0)
    if table is None:
        table, trace_report = load_trace(c["trace"], seed)
    cluster = cluster_mod.from_config(c["cluster"], trace_gpu_demand(table))
    table, oversize_record = oversize(table, cluster.capacity, c["trace"].get("oversize") or "error")
    if trace_report is not None:
        trace_report.oversize = oversize_record
        trace_report.jobs = table.num_rows
    assignment = Assignment.from_config(c["profile"])
    jobs = build_jobs(table, f"trace {c['trace'].get('name')}", assignment, cluster, seed)
    params = dict(c["policy"])
    name, interval = params.pop("name"), params.pop("decision_interval", None)
    policy = policies.make(name, **params)
    ov = overhead_mod.make(c["overhead"], assignment.zoo.costs_of if assignment else None)
    return Engine(jobs, cluster, policy, speed=assignment.zoo.speed if assignment else None, overhead=ov,
                  until=c.get("until"), progress=c.get("progress"), decision_interval=interval,
                  limits=Limits(**check_params(Limits, c.get("limits") or {}, "limits.{}")),
                  observe=Observe(**check_params(Observe, c.get("observe") or {}, "observe.{}")),
                  usage=assignment.zoo.usage if assignment else None, seed=seed,
                  faults=faults_mod.make(c.get("faults"), seed, costs_of=assignment.zoo.costs_of if assignment else None,
                                         table=table))


def run(cfg: DictConfig | dict, run_dir: str | Path) -> tuple[dict, Recorder]:
    """Run the experiment ``cfg`` and write its outputs to ``run_dir``.

    A run that ends (without ``until``) with jobs unfinished writes its outputs, with the
    unfinished jobs and their reasons in summary.json, then raises ``UnfinishedJobsError``."""
    t0 = time.perf_counter()
    c = check(cfg)
    table, trace_report = load_trace(c["trace"], c.get("seed", 0))
    if trace_report.rejected:  # before anything else can fail: the rejects explain a failed run too
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        atomic_write(Path(run_dir) / REJECTS_FILE, trace_report.write_rejects)
    engine = _build(c, table, trace_report)
    recorder = engine.run()
    wall = time.perf_counter() - t0
    meta = {"config": c, "wall_time_s": wall, "jobs": len(engine.jobs), "nodes": engine.cluster.num_nodes,
            "events": engine.events, "decisions": engine.decisions,
            "limits": asdict(engine.limits), "observe": asdict(engine.observe), "trace": trace_report.as_dict()}
    summary = recorder.write(run_dir, meta)
    if recorder.unfinished and c.get("until") is None:
        listed = "; ".join(f"{u['job_id']}: {u['reason']}" for u in recorder.unfinished[:5])
        more = len(recorder.unfinished) - 5
        raise UnfinishedJobsError(
            f"{len(recorder.unfinished)} job(s) never finished under policy {c['policy']['name']!r} "
            f"({listed}{f'; and {more} more' if more > 0 else ''}); see {Path(run_dir) / 'summary.json'}",
            summary)
    return summary, recorder


def report(cfg: DictConfig | dict, summary: dict, run_dir: str | Path) -> str:
    head = f"clustersim: policy={cfg['policy']['name']} trace={cfg['trace']['name']} seed={cfg['seed']} -> {run_dir}"
    return f"{head}\n{format_summary(summary)}"


def compose(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The config `clustersim <overrides>` would run, for notebooks and scripts."""
    from hydra import compose as hydra_compose, initialize_config_module

    with initialize_config_module(config_module="clustersim.configs", version_base=None):
        return hydra_compose("config", overrides=list(overrides))
