"""``clustersim-testbed``: calibrate on this host, run a trace for real under each policy, simulate
it with the calibrated profile, report the simulator's error (configs/testbed/config.yaml).

    clustersim-testbed out=tb policies='[fifo,tiresias,elastic_tiresias]' trace.jobs=12

Steps (``run``): 1. ``clustersim-calibrate`` of each model of the trace on this host (resumable:
its points stay in ``<out>/calibration/<model>``); 2. the trace (``trace.parquet``); 3. per policy,
the real run (``<policy>/real``; the ``repeat`` policy twice, ``real_repeat``: the host's noise) and
the simulation (``<policy>/sim``) of the same jobs on the same one-node cluster with the calibrated
profiles and overheads; 4. ``comparison.json`` and ``testbed.png``. Each run directory holds what a
simulation writes (jobs/events/timeline/tenants parquet, summary.json, run.json).
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib.resources import files
from pathlib import Path

import yaml

from clustersim.simulator.errors import ConfigError, TraceError

MODELS = ("mlp", "cnn", "recommendation")


def load_config(argv: list[str]) -> dict:
    """configs/testbed/config.yaml with ``key=value`` overrides; an unknown key is a ConfigError."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    base = OmegaConf.create(yaml.safe_load(files("clustersim.configs").joinpath("testbed/config.yaml").read_text()))
    OmegaConf.set_struct(base, True)
    try:
        cfg = OmegaConf.to_container(OmegaConf.merge(base, OmegaConf.from_dotlist(argv)), resolve=True)
    except OmegaConfBaseException as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    known = sorted(f.name[:-5] for f in files("clustersim.configs").joinpath("policy").iterdir()
                   if f.name.endswith(".yaml"))
    for p in cfg["policies"]:
        if p not in known:
            raise ConfigError(f"policies: {p!r} has no configs/policy/{p}.yaml; known: {', '.join(known)}")
    unknown = [m for m in cfg["trace"]["models"] if m not in MODELS]
    if unknown:
        raise ConfigError(f"trace.models: {unknown[0]!r} is not a calibration workload ({', '.join(MODELS)})")
    if cfg["speed"] not in ("table", "fit", "allreduce"):
        raise ConfigError(f"speed: {cfg['speed']!r} must be table (the measured points) or fit (the calibration's "
                          "fits; allreduce is its old name)")
    for key in ("ps.enabled", "ps.batch", "ps.mode"):
        if any(str(o).startswith(key + "=") for o in cfg["calibrate"]):
            raise ConfigError(f"calibrate: {key} is set by the testbed from trace.ps_share and trace.batch "
                              "(a synchronous PS grid at the trace's global batch)")
    if cfg["repeat"] is not None and cfg["repeat"] not in cfg["policies"]:
        raise ConfigError(f"repeat: {cfg['repeat']!r} must be one of policies {cfg['policies']}")
    return cfg


def host_load() -> dict:
    """The host's load averages (1, 5, 15 min, as ``uptime`` shows them) and its cores."""
    one, five, fifteen = os.getloadavg()
    return {"load_1m": one, "load_5m": five, "load_15m": fifteen, "cpu_cores": os.cpu_count()}


# ---------------------------------------------------------------------------- 1. calibration
def calibrate(cfg: dict, out: Path) -> dict[str, dict]:
    """Each model's calibration (resumable); model -> {profiles file, model config, fit summary}."""
    from hydra import compose, initialize_config_module

    from clustersim.simulator.calibration import cli as calibrate_cli
    from omegaconf import OmegaConf

    done = {}
    ps = float(cfg["trace"]["ps_share"]) > 0     # the PS jobs' speed: a sync grid at the trace's batch
    for m in dict.fromkeys(cfg["trace"]["models"]):
        over = [f"model={m}", f"out={out / 'calibration' / m}", "progress=false", *cfg["calibrate"],
                f"ps.enabled={str(ps).lower()}", "ps.mode=sync", f"ps.batch={int(cfg['trace']['batch'])}"]
        with initialize_config_module(config_module="clustersim.configs.calibrate", version_base=None):
            c = OmegaConf.to_container(compose("config", overrides=over), resolve=True)
        c.pop("hydra", None)
        load = host_load()       # when this run began (a resumed calibration measures only what is missing)
        summary = calibrate_cli.run(c, "clustersim-calibrate " + " ".join(over))
        print(calibrate_cli.report(summary), flush=True)
        done[m] = {"profiles": summary["profiles"], "model": c["model"], "fits": summary["fits"], "load": load}
    return done


def measured_speed(path: Path) -> Path:
    """The calibrated profiles with ``speed.kind: table``: the measured iterations/s (interpolated
    between measured worker counts and batches, simulator/profiles) instead of the all-reduce fit
    to them, and the measured PS grid (samples/s over (p, w)) instead of its Optimus Eq. 4 fit.
    Beside the original, ``<name>.table.yaml``; everything else (overheads) unchanged."""
    from clustersim.simulator.calibration.write import write_profiles

    head = "".join(ln + "\n" for ln in path.read_text().splitlines() if ln.startswith("#"))
    profiles = yaml.safe_load(path.read_text())
    for p in profiles.values():
        if p["speed"]["kind"] == "allreduce":
            p["speed"] = {**p["speed"], "kind": "table"}
        elif p["speed"]["kind"] == "optimus":
            p["speed"] = {"kind": "table", "grid": ps_grid(p["speed"]["points"])}
    return write_profiles(path.parent, profiles, head + "# speed.kind table: the measured points, for clustersim-testbed\n",
                          f"{path.stem}.table.yaml")


def ps_grid(points: list) -> dict:
    """Rows [p, w, samples/s] as a profile's PS grid (a p x w matrix; null where not measured)."""
    ps, ws = sorted({r[0] for r in points}), sorted({r[1] for r in points})
    at = {(r[0], r[1]): r[2] for r in points}
    return {"p": ps, "w": ws, "samples_per_s": [[at.get((p, w)) for w in ws] for p in ps]}


# ---------------------------------------------------------------------------- 2-3. the runs
def _policy(name: str, over: dict) -> dict:
    p = yaml.safe_load(files("clustersim.configs").joinpath(f"policy/{name}.yaml").read_text())
    return {**p, **(over or {})}


def sim_config(cfg: dict, policy: str, profiles: list[str], cores: int) -> dict:
    """The simulation's config: this host as one node of ``cores`` slots, the calibrated profiles."""
    mech = cfg["mechanism"]
    overhead = {"name": mech, "kind": mech, "charge_start": True}
    if mech == "stop_free":
        overhead["ps_stop_resume"] = True     # a new PS count re-cuts the shards: real.py relaunches the job
    models = list(dict.fromkeys(cfg["trace"]["models"]))
    ps = [f"{m}_ps" for m in models] if float(cfg["trace"]["ps_share"]) > 0 else []
    return {"seed": cfg["seed"], "until": None, "progress": False, "limits": None, "observe": None,
            "trace": {"name": "testbed", "oversize": "error"},
            "cluster": {"name": "testbed", "groups": [{"count": 1, "gpus": cores, "cpus": cores, "mem": 64 * cores,
                                                       "gpu_type": "cpu_core"}]},
            "policy": _policy(policy, cfg["policy"].get(policy)),
            "overhead": overhead,
            "profile": {"name": "testbed", "zoo": True, "files": profiles, "unknown": "error",
                        "pool": {"gpu": models, "ps": ps}},
            "faults": None}


def simulate(c: dict, table, run_dir: Path) -> dict:
    from clustersim import experiment

    engine = experiment._build(c, table, None)      # the checked wiring of `clustersim`, on this table
    rec = engine.run()
    meta = {**experiment.provenance(), "status": "complete", "kind": "simulation", "config": c,
            "jobs": len(engine.jobs), "events": engine.events, "decisions": engine.decisions}
    with experiment.staged(run_dir) as tmp:
        return rec.write(tmp, meta)


def real(cfg: dict, c: dict, table, models: dict, run_dir: Path, cores: list[int]) -> dict:
    """The trace run for real under ``c``'s policy: the same wiring, the engine on the wall clock."""
    from clustersim import experiment
    from clustersim.testbed.real import Tasks, TestbedEngine
    from clustersim.simulator.workload import packed

    sim = experiment._build(c, table, None)           # jobs, cluster, policy, speed exactly as simulated
    work = run_dir.parent / f".{run_dir.name}.work"
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("*.pt"):
        old.unlink()
    tasks = Tasks(cores, work, cfg["timeout_s"], cfg["report_s"], cfg["check_s"], cfg["lr"])
    for spec in sim.jobs:
        rate = sim.speed.rate(spec, packed(spec, sim.cluster), sim.cluster)
        tasks.add(spec.job_id, models[spec.model]["model"], spec.batch_size, max(1, round(spec.total_work)), rate)
    load = host_load()
    t0 = time.perf_counter()
    engine = TestbedEngine(sim.jobs, sim.cluster, sim.policy, tasks, cfg["mechanism"], cfg["poll_s"],
                           speed=sim.speed, usage=sim.usage, seed=c["seed"], progress=False)
    rec = engine.run()
    meta = {**experiment.provenance(), "status": "complete", "kind": "testbed", "config": c,
            "mechanism": cfg["mechanism"], "cores": cores, "wall_time_s": time.perf_counter() - t0,
            "load_before": load, "load_after": host_load(), "jobs": len(engine.jobs), "decisions": engine.decisions}
    with experiment.staged(run_dir) as tmp:
        summary = rec.write(tmp, meta)
    for old in work.glob("*.pt"):
        old.unlink()
    work.rmdir()
    if rec.unfinished:
        raise RuntimeError(f"testbed: {len(rec.unfinished)} job(s) unfinished under {c['policy']['name']}; "
                           f"see {run_dir / 'summary.json'}")
    return summary


def run(cfg: dict) -> dict:
    from clustersim.simulator.metrics import atomic_write
    from clustersim.testbed import compare, trace

    import pyarrow.parquet as pq

    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)
    cores = sorted(cfg["cores"] or os.sched_getaffinity(0))
    models = calibrate(cfg, out)
    table = trace.make(cfg["trace"], cfg["seed"], len(cores))
    atomic_write(out / "trace.parquet", lambda p: pq.write_table(table, p))
    kinds = compare.kinds(table)
    profiles = [models[m]["profiles"] for m in models]
    if cfg["speed"] == "table":
        profiles = [str(measured_speed(Path(p))) for p in profiles]
    result = {"host": host_load(), "cores": cores, "mechanism": cfg["mechanism"], "policies": {},
              "calibration": {m: {"fits": v["fits"], "load": v["load"]} for m, v in models.items()}}
    for policy in cfg["policies"]:
        c = sim_config(cfg, policy, profiles, len(cores))
        pdir = out / policy
        sims = simulate(c, table, pdir / "sim")
        reals = real(cfg, c, table, models, pdir / "real", cores)
        entry = {"sim": _brief(sims), "real": _brief(reals), "error": compare.runs(pdir / "sim", pdir / "real")}
        if cfg["repeat"] == policy:
            real(cfg, c, table, models, pdir / "real_repeat", cores)
            entry["noise"] = compare.runs(pdir / "real_repeat", pdir / "real")
        for e in (entry["error"], entry.get("noise")):
            if e:
                e["by_kind"] = compare.by_kind(e["per_job"], kinds)
        result["policies"][policy] = entry
        print(report_policy(policy, entry), flush=True)
    atomic_write(out / "comparison.json", lambda p: Path(p).write_text(json.dumps(result, indent=2)))
    if cfg["plot"]:
        from clustersim.testbed.plot import plot
        result["png"] = str(plot(out, result))
    return result


def _brief(s: dict) -> dict:
    return {k: s[k] for k in ("jobs_finished", "jct_mean", "makespan", "preemptions", "rescales", "overhead_s")}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _kinds(err: dict) -> str:
    parts = [f"{k} {100 * v['job_abs_mean']:.1f}% ({v['jobs']})" for k, v in (err.get("by_kind") or {}).items()
             if v["job_abs_mean"] is not None]
    return f" [{', '.join(parts)}]" if parts else ""


def report_policy(policy: str, e: dict) -> str:
    err = e["error"]
    line = (f"{policy}: mean JCT real {err['jct_mean_measured']:.1f} s, simulated {err['jct_mean_predicted']:.1f} s "
            f"({_pct(err['jct_mean'])}); makespan real {err['makespan_measured']:.1f} s, simulated "
            f"{err['makespan_predicted']:.1f} s ({_pct(err['makespan'])}); per job |error| mean "
            f"{100 * err['job_abs_mean']:.1f}%" + _kinds(err))
    if "noise" in e:
        n = e["noise"]
        line += (f"\n  host noise (the same run repeated): mean JCT {_pct(n['jct_mean'])}, makespan "
                 f"{_pct(n['makespan'])}, per job |error| mean {100 * n['job_abs_mean']:.1f}%" + _kinds(n))
    return line


def main() -> None:
    from clustersim.simulator.calibration import INSTALL_HINT, have_torch

    if not have_torch():
        sys.exit(f"clustersim-testbed: {INSTALL_HINT}")
    try:
        cfg = load_config(sys.argv[1:])
        result = run(cfg)
    except (ConfigError, TraceError) as e:      # e.g. a job asking for more workers than this host has cores
        sys.exit(f"clustersim-testbed: {e}")
    print(f"clustersim-testbed -> {cfg['out']}/comparison.json" + (f", {result['png']}" if "png" in result else ""))


if __name__ == "__main__":
    main()
