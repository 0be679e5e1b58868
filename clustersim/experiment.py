"""One run from a config: check it → trace → jobs → cluster → policy → engine → run directory."""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
from omegaconf import DictConfig, OmegaConf

from clustersim import policies
from clustersim.simulator import rng
from clustersim.simulator import cluster as cluster_mod
from clustersim.simulator import faults as faults_mod
from clustersim.simulator import overhead as overhead_mod
from clustersim.simulator.arrow import compute as pc
from clustersim.simulator.engine import Engine, Limits, Observe, fewer_collections
from clustersim.simulator.errors import ConfigError, OutputError, UnfinishedJobsError
from clustersim.simulator.metrics import Recorder, atomic_write, format_summary
from clustersim.simulator.params import Count, Range, check_params
from clustersim.simulator.workload import Assignment, build_jobs
from clustersim.rundirs import output_digests
from clustersim.traces.cache import pid_alive
from clustersim.traces.load import REJECTS_FILE, LoadReport
from clustersim.traces.load import check_config as check_trace
from clustersim.traces.load import load as load_trace_table
from clustersim.traces.schema import validate
from clustersim.traces.transform import oversize

GROUPS = ("trace", "cluster", "policy", "overhead", "profile", "faults")
OPTIONAL_GROUPS = ("faults",)   # absent: off


@dataclass(frozen=True)
class RunConfig:
    """The top-level keys of config.yaml besides its groups."""

    seed: Count = 0
    until: Annotated[float, Range(gt=0)] | None = None   # stop at this simulated time (s); 0 would end before the first event
    progress: bool | None = None                          # tqdm bar: null = on a terminal only
    limits: dict | None = None                            # simulator.engine.Limits
    observe: dict | None = None                           # simulator.engine.Observe


@dataclass(frozen=True)
class PolicyConfig:
    """Keys every policy config has, besides the policy's own parameters."""

    name: str
    config: str | None = None   # the policy config's own name (configs/policy/<config>.yaml), for the summary line
    decision_interval: Annotated[float, Range(gt=0)] | None = None   # null: event-driven; s: rounds
    decision_slot: Literal["aligned", "from_last"] = "aligned"        # rounds at multiples, or from the last decision


POLICY_KEYS = tuple(PolicyConfig.__dataclass_fields__)   # the keys a policy config has besides its parameters


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
    check_params(PolicyConfig, {k: pol.pop(k) for k in POLICY_KEYS if k in pol}, "policy.{}")
    policies.make(c["policy"]["name"], **pol)   # checks the policy's own parameters
    overhead_mod.make(c["overhead"])
    faults_mod.check_config(c.get("faults"))
    Assignment.from_config(c["profile"], keys_only=True)   # the zoo loads at build time
    return c


def load_trace(cfg: dict | DictConfig, seed: int = 0) -> tuple[pa.Table, LoadReport]:
    """The trace group's job table (read through the cache, concatenated, transformed) and
    the load report (rejects, drops, transforms) for the run's metadata."""
    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    with fewer_collections():   # a row's objects per job, none cyclic (simulator/engine.py)
        return load_trace_table(cfg, seed)


def trace_gpu_demand(table: pa.Table) -> tuple[float, float]:
    """(mean busy GPUs if every job started on arrival, largest job's GPUs)."""
    gpus, dur, submit = table["num_gpus"], table["duration"], table["submit_time"]
    gpu_s = pc.sum(pc.multiply(gpus, dur)).as_py() or 0.0
    span = (pc.max(pc.add(submit, dur)).as_py() or 0.0) - (pc.min(submit).as_py() or 0.0)
    return (gpu_s / span if span > 0 else 0.0), pc.max(gpus).as_py() or 0.0


def build_engine(cfg: DictConfig | dict, table: pa.Table | None = None,
                 trace_report: LoadReport | None = None) -> Engine:
    """The engine ``cfg`` describes (checked first), ready to run. A ``table`` given here is
    checked as a trace's rows are (``traces.schema.validate``: a duration of 0 is a TraceError
    naming the row, not a division by zero in the speed model)."""
    c = check(cfg)
    if table is not None:
        table = validate(table, "build_engine(table=...)")
    return _build(c, table, trace_report)


def make_policy(params: dict) -> tuple:
    """The policy a config's ``policy`` node names, with its parameters checked (an unknown key is
    an error naming it), and the engine's settings kept beside them: (policy, decision_interval,
    decision_slot)."""
    params = dict(params)
    name, interval = params.pop("name"), params.pop("decision_interval", None)
    slot = params.pop("decision_slot", "aligned")
    params.pop("config", None)
    return policies.make(name, **params), interval, slot


def _build(c: dict, table: pa.Table | None, trace_report: LoadReport | None) -> Engine:
    seed = c.get("seed", 0)
    if table is None:
        table, trace_report = load_trace(c["trace"], seed)
    demand = trace_gpu_demand(table) if c["cluster"].get("auto") else None   # only an auto cluster needs it
    cluster = cluster_mod.from_config(c["cluster"], demand)
    table, oversize_record = oversize(table, cluster.capacity, c["trace"].get("oversize") or "error")
    if trace_report is not None:
        trace_report.oversize = oversize_record
        trace_report.jobs = table.num_rows
    assignment = Assignment.from_config(c["profile"])
    with fewer_collections():   # a spec per job, none cyclic (simulator/engine.py)
        jobs = build_jobs(table, f"trace {c['trace'].get('name')}", assignment, cluster, seed)
    policy, interval, slot = make_policy(c["policy"])
    ov = overhead_mod.make(c["overhead"], assignment.zoo.costs_of if assignment else None)
    return Engine(jobs, cluster, policy, speed=assignment.zoo.speed if assignment else None, overhead=ov,
                  until=c.get("until"), progress=c.get("progress"), decision_interval=interval, slot_from_last=slot == "from_last",
                  limits=Limits(**check_params(Limits, c.get("limits") or {}, "limits.{}")),
                  observe=Observe(**check_params(Observe, c.get("observe") or {}, "observe.{}")),
                  usage=assignment.zoo.usage if assignment else None, seed=seed,
                  faults=faults_mod.make(c.get("faults"), seed, costs_of=assignment.zoo.costs_of if assignment else None,
                                         table=table))


def run(cfg: DictConfig | dict, run_dir: str | Path, overrides: list[str] | None = None) -> tuple[dict, Recorder]:
    """Run the experiment ``cfg`` and write its outputs to ``run_dir``.

    The outputs are written into a hidden staging directory beside ``run_dir`` and renamed onto
    it whole, with ``run.json`` (status ``complete``) written last: ``run_dir`` never holds a
    mix of two attempts, and an interrupted run leaves no ``run.json`` (see ``is_complete``).
    A run that ends (without ``until``) with jobs unfinished writes its outputs, with the
    unfinished jobs and their reasons in summary.json and status ``failed`` in run.json, then
    raises ``UnfinishedJobsError``."""
    t0 = time.perf_counter()
    c = check(cfg)
    with rng.watch() as draws:   # which random streams the seed fed (warnings below)
        table, trace_report = load_trace(c["trace"], c.get("seed", 0))
        ins = inputs(c)   # as read now: a trace edited while the run goes on does not count as its input
        if trace_report.rejected:  # before anything else can fail: the rejects explain a failed run too
            try:
                Path(run_dir).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise OutputError(f"{run_dir}: cannot write the run directory ({e.strerror or e})") from None
            atomic_write(Path(run_dir) / REJECTS_FILE, trace_report.write_rejects)
        engine = _build(c, table, trace_report)
        del table   # the engine holds what it needs: a long replay keeps no second copy of the trace
        recorder = engine.run()
    wall = time.perf_counter() - t0
    meta = {**provenance(), "status": "complete", "config": c, "inputs": ins, "overrides": list(overrides or []),
            "wall_time_s": wall, "jobs": len(engine.jobs), "nodes": engine.cluster.num_nodes,
            "cluster": describe_cluster(engine.cluster), "events": engine.events, "decisions": engine.decisions,
            "limits": asdict(engine.limits), "observe": asdict(engine.observe), "trace": trace_report.as_dict()}
    error = None
    if recorder.unfinished and c.get("until") is None:
        listed = "; ".join(f"{u['job_id']}: {u['reason']}" for u in recorder.unfinished[:5])
        more = len(recorder.unfinished) - 5
        error = (f"{len(recorder.unfinished)} job(s) never finished under policy {c['policy']['name']!r} "
                 f"({listed}{f'; and {more} more' if more > 0 else ''}); see {Path(run_dir) / 'summary.json'}")
        meta.update(status="failed", error=error, error_type="UnfinishedJobsError")
    with staged(run_dir) as tmp:
        if trace_report.rejected:
            atomic_write(tmp / REJECTS_FILE, trace_report.write_rejects)
        summary = recorder.write(tmp)
        meta["warnings"] = run_warnings(c, engine, summary, draws)
        write_log(tmp, report(c, summary, run_dir, meta["warnings"]), meta)
        meta["outputs"] = output_digests(tmp)   # clustersim-collect checks each output against these
        write_meta(tmp, meta)
    if error:
        raise UnfinishedJobsError(error, summary)
    return summary, recorder


def run_warnings(c: dict, engine: Engine, summary: dict, draws: rng.Draws) -> list[str]:
    """What makes a run less than it seems, said in run.json and under the printed summary."""
    out = []
    if not draws.drawn():
        out.append(f"seed {c.get('seed', 0)} has no effect: nothing in this run draws a random number (every job "
                   "names a known model or profile=linear, no trace generator or sampling, no faults, no observation "
                   "noise), so runs that differ only in seed are identical; a spread over such seeds is zero")
    if "elastic" in engine.policy.tags and summary["rescales"] == 0:
        out.append(f"policy {c['policy']['name']!r} is elastic but rescaled no job: the trace's jobs have no "
                   "elastic range (add a trace transform {op: elastic}, docs/traces/), so it ran as a rigid policy")
    return out


RUN_META = "run.json"   # written last; its ``status`` says whether the run is complete or failed
RUN_LOG = "run.log"     # what the command printed, with the trace's load report and any error


def write_log(run_dir: Path, text: str, meta: dict) -> None:
    """The run's log: the printed summary and warnings, then what the trace load rejected, dropped
    or changed, and the error of a failed run (the command's output is otherwise only on screen)."""
    lines = [text]
    trace = meta.get("trace") or {}
    for key in ("rejected", "dropped", "transforms", "oversize"):
        if trace.get(key) and (key != "oversize" or trace[key].get("count")):
            lines.append(f"trace {key}: {json.dumps(trace[key], default=str)}")
    if meta.get("error"):
        lines.append(f"error ({meta.get('error_type')}): {meta['error']}")
    atomic_write(Path(run_dir) / RUN_LOG, lambda p: Path(p).write_text("\n".join(lines) + "\n"))
_STAGING = ".{}.partial-{}-{}"   # run name, host, pid
_OLD = ".{}.old-{}-{}"


def write_meta(run_dir: Path, meta: dict) -> None:
    atomic_write(Path(run_dir) / RUN_META, lambda p: Path(p).write_text(json.dumps(meta, indent=2, default=str)))


@contextmanager
def staged(run_dir: str | Path):
    """A fresh hidden directory beside ``run_dir`` to write into; on success it replaces
    ``run_dir`` whole (keeping Hydra's ``.hydra`` record of the run), on failure it is removed."""
    final = Path(run_dir)
    tmp = final.parent / _STAGING.format(final.name, socket.gethostname(), os.getpid())
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        _refuse_foreign(final)
        remove_leftovers(final)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as e:
        raise OutputError(f"{final}: cannot write the run directory ({e.strerror or e})") from None
    try:
        yield tmp
        try:
            if (final / ".hydra").is_dir():
                shutil.copytree(final / ".hydra", tmp / ".hydra", dirs_exist_ok=True)
            _replace(tmp, final)
        except OSError as e:
            raise OutputError(f"{final}: cannot move the finished run into place ({e.strerror or e})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


RUN_FILES = {"jobs.parquet", "timeline.parquet", "events.parquet", "tenants.parquet", "summary.json", RUN_META,
             RUN_LOG, REJECTS_FILE, ".hydra"}


def _refuse_foreign(final: Path) -> None:
    """A run replaces its directory whole: never one that holds anything but a run's files."""
    if not final.is_dir():
        return
    foreign = sorted(p.name for p in final.iterdir()
                     if p.name not in RUN_FILES and not p.name.endswith((".tmp", ".log")))
    if foreign:
        raise ConfigError(f"{final}: not a run directory (it holds {', '.join(foreign[:3])}); a run replaces its "
                          f"directory whole: give a new or empty one")


def _replace(tmp: Path, final: Path) -> None:
    """Move ``tmp`` onto ``final``: whatever was at ``final`` goes first (a rename of a directory
    cannot replace a non-empty one)."""
    for _ in range(5):
        old = final.parent / _OLD.format(final.name, socket.gethostname(), os.getpid())
        try:
            os.rename(final, old)
        except FileNotFoundError:
            old = None
        try:
            os.rename(tmp, final)
            return
        except OSError:   # another run of the same name put its directory there meanwhile
            continue
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    raise OSError(f"{final}: could not move the finished run into place")


def remove_leftovers(run_dir: str | Path) -> None:
    """Staging and replaced directories of this run name left by killed processes on this host."""
    final = Path(run_dir)
    for pattern in (_STAGING, _OLD):
        prefix = pattern.format(final.name, socket.gethostname(), "")
        for d in final.parent.glob(f"{prefix}*"):
            pid = d.name[len(prefix):]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)


def mark_failed(run_dir: str | Path, error: BaseException, cfg: DictConfig | dict | None = None,
                overrides: list[str] | None = None) -> None:
    """Record in ``run_dir`` that the run failed before writing outputs (a bad key, a bad trace, a
    policy that broke the contract), so that collect lists it as failed, not as interrupted."""
    config = None
    if cfg is not None:
        config = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else dict(cfg)
    meta = {**provenance(), "status": "failed", "error": str(error), "error_type": type(error).__name__,
            "config": config, "overrides": list(overrides or [])}
    with staged(run_dir) as tmp:
        write_log(tmp, f"clustersim: run failed -> {run_dir}", meta)
        write_meta(tmp, meta)


def is_complete(run_dir: str | Path, cfg: DictConfig | dict) -> bool:
    """``run_dir`` holds a complete run of exactly this config (``progress`` aside) on the same
    inputs (``inputs``: the trace and profile files' contents and the code), so a re-run of a
    sweep may skip it. A run recorded without its inputs (an older clustersim) is run again."""
    from clustersim.collect import damage

    meta = read_meta(run_dir)
    if not isinstance(meta, dict) or meta.get("status") != "complete" or not isinstance(meta.get("config"), dict) \
            or not (Path(run_dir) / "summary.json").is_file():
        return False
    if damage(Path(run_dir), meta):   # an output deleted or altered since: the run is made again
        return False
    same = lambda d: {k: v for k, v in (d or {}).items() if k != "progress"}  # noqa: E731
    c = check(cfg)
    if same(meta.get("config")) != same(json.loads(json.dumps(c, default=str))):
        return False
    try:
        return meta.get("inputs") == inputs(c)
    except (OSError, ValueError):   # an input gone or unreadable: the run says why when it reads it
        return False


def inputs(c: dict) -> dict:
    """What a run reads besides its config, by content (SHA-256): every trace file (its further
    files and companions included), every profile file of the zoo, and clustersim's own code.
    With the config, this is a run's identity: editing a trace and re-running a sweep into the
    same directory runs again what that trace feeds."""
    from clustersim.traces.cache import file_digest
    from clustersim.traces.load import input_files

    files = dict(input_files(c["trace"]))
    if c["profile"].get("zoo"):
        from clustersim.simulator.profiles import PROFILE_FILES

        listed = c["profile"].get("files") or [e.obj for e in PROFILE_FILES.entries()]
        files.update({f"profile:{f}": Path(str(f)).expanduser() for f in listed})
    return {"files": {k: file_digest(Path(p)) for k, p in files.items()}, "code": code_digest()}


@functools.cache
def code_digest() -> str:
    """SHA-256 over clustersim's source and bundled configs (``.py``, ``.yaml``), in path order:
    a changed simulator, policy or reader changes every run's identity, installed or not, committed
    or not (a git commit alone misses uncommitted edits)."""
    import hashlib

    import clustersim.configs.policy
    from clustersim.policies import base
    from clustersim.simulator import engine
    from clustersim.traces import schema

    # each package's folder from a module of its own: started beside a clone named clustersim, a
    # process may see that folder as the (namespace) package itself, without a __file__ (provenance)
    roots = {"clustersim": Path(__file__).resolve().parent, "clustersim.simulator": Path(engine.__file__).parent,
             "clustersim.policies": Path(base.__file__).parent, "clustersim.traces": Path(schema.__file__).parent,
             "clustersim.configs": Path(clustersim.configs.policy.__file__).parent.parent}
    h = hashlib.sha256()
    for name, root in roots.items():
        for p in sorted(root.rglob("*")):
            if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts:
                h.update(f"{name}/{p.relative_to(root)}".encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def read_meta(run_dir: str | Path) -> dict | None:
    try:
        return json.loads((Path(run_dir) / RUN_META).read_text())
    except (OSError, ValueError):   # none, or not JSON (UnicodeDecodeError is a ValueError)
        return None


def describe_cluster(cluster) -> dict:
    """The cluster a run actually had (after overrides and ``auto`` sizing)."""
    by_type: dict[str, float] = {}
    for t, g in zip(cluster.gpu_type, cluster.capacity[:, 0]):
        by_type[t] = by_type.get(t, 0.0) + float(g)
    shapes: dict[tuple, int] = {}
    for (g, cpu, mem), t in zip(cluster.capacity.tolist(), cluster.gpu_type):
        shapes[(g, t)] = shapes.get((g, t), 0) + 1
    shape = "+".join(f"{n}x{g:g}g" + ("" if t == "generic" else f"-{t}") for (g, t), n in shapes.items())
    return {"shape": shape, "nodes": cluster.num_nodes, "gpus": float(cluster.total[0]),
            "cpus": float(cluster.total[1]), "mem": float(cluster.total[2]), "gpus_by_type": by_type}


@functools.cache
def provenance() -> dict:
    """clustersim's version and, from a git checkout, its commit (``+dirty`` with local changes).

    Read from this module's own file, not from ``clustersim.__file__``: a process started in the
    folder that holds a clone named ``clustersim`` (a submitit_local or Slurm job: ``python -m``
    puts the working folder first on the path) imports ``clustersim`` as a namespace package of
    that folder, which has no ``__file__`` and no ``__version__``."""
    here = Path(__file__).resolve().parent
    version = _version()
    commit = None
    if not (here.parent / "simulator" / "engine.py").is_file():   # an installed copy: no checkout to ask
        return {"version": version, "git_commit": None}
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        if out.returncode == 0:
            commit = out.stdout.strip()
            dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            commit += "+dirty" if dirty else ""
    except (OSError, subprocess.SubprocessError):
        pass
    return {"version": version, "git_commit": commit}


def _version() -> str:
    import clustersim

    if hasattr(clustersim, "__version__"):
        return clustersim.__version__
    from importlib.metadata import version   # the namespace case above: the installed distribution's

    return version("clustersim")


def report(cfg: DictConfig | dict, summary: dict, run_dir: str | Path, warnings: list[str] | None = None) -> str:
    """The summary the command prints, with the run's warnings (default: from its run.json)."""
    pol = cfg["policy"]
    shown = pol["name"] if pol.get("config") in (None, pol["name"]) else f"{pol['config']} ({pol['name']})"
    head = f"clustersim: policy={shown} trace={cfg['trace']['name']} seed={cfg['seed']} -> {run_dir}"
    if warnings is None:
        warnings = (read_meta(run_dir) or {}).get("warnings", [])
    warnings = "".join(f"\nwarning: {w}" for w in warnings)
    return f"{head}\n{format_summary(summary)}{warnings}"


def compose(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The config `clustersim <overrides>` would run, for notebooks and scripts (a choice of config
    groups is composed once per process: clustersim/composing.py)."""
    from clustersim.composing import compose as composed

    return composed(list(overrides))
