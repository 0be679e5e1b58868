"""EDL §5.2 (seed 001, Fig. 10b): transient idle GPUs, and the break-even idle interval of a
scaling mechanism.

A job on ``persistent`` GPUs of one machine with ``persistent + idle`` GPUs; the ``idle`` other GPUs
are taken by another job for L s, then idle for L s, over and over. An elastic policy
(Elastic-Tiresias) scales the job out onto them when they are idle and back in when the other job
arrives, by the run's mechanism (stop-free or stop-resume, simulator/overhead.py, EDL Tables 2-3
costs from the profile); the baseline (Tiresias) never uses them. A mechanism gains when the job
trains more iterations than the baseline's; its *break-even* is the shortest L at which it does
(EDL: stop-resume needs L >= 11.7 min with one idle GPU; EDL's stop-free scaling gains from any
interval longer than a worker's launch).

``transient(mechanism, interval, ...)`` runs one pattern and returns the job's iterations;
``break_even(mechanism, ...)`` finds the interval by bisection on the gain over whole cycles (so the
window's end cuts no cycle). ``python -m clustersim.edl_transient [key=value ...]`` reads
configs/experiment/edl_transient.yaml and prints the break-evens next to the paper's.
"""

from __future__ import annotations

import sys
from importlib import resources

import yaml

from clustersim import policies
from clustersim.simulator import overhead
from clustersim.simulator.cluster import Cluster, NodeGroup
from clustersim.simulator.engine import Engine
from clustersim.simulator.job import JobSpec, RoleSpec

CONFIG = "edl_transient.yaml"


def _job(index: int, job_id: str, submit: float, gpus: int, work: float, lo: int, hi: int, model: str,
         batch: int | None = None) -> JobSpec:
    role = RoleSpec("worker", gpus, 1.0, 0.0, 0.0, lo, hi)
    return JobSpec(index=index, job_id=job_id, submit_time=submit, roles=(role,), total_work=work, duration=None,
                   model=model, profile=model, batch_size=batch)


class _Speed:
    """The profile's speed for the observed job; the other jobs train 1000 it/s, so that each
    lasts exactly its sized interval."""

    def __init__(self, zoo):
        self.zoo = zoo

    def rate(self, spec, alloc, cluster=None):
        return self.zoo.speed.rate(spec, alloc, cluster) if spec.job_id == "main" else 1e3


def transient(mechanism: str, interval: float, policy: str = "elastic_tiresias", horizon: float = 2400.0,
              persistent: int = 4, idle: int = 1, model: str = "resnet50", zoo=None, batch: str = "per_gpu") -> float:
    """Iterations the job on ``persistent`` GPUs trains in ``horizon`` s while ``idle`` GPUs of its
    machine are busy for ``interval`` s, then idle for ``interval`` s, from t = 0 (busy first, so
    that every use of them is a scale-out of the running job). ``batch``: ``per_gpu`` (EDL's jobs:
    the profile's per-GPU batch on the persistent GPUs, that global batch kept as the job scales,
    EDL §3.1) or ``profile`` (the profile's global ``batch_size``)."""
    if zoo is None:
        from clustersim.simulator.profiles import load
        zoo = load()
    if batch not in ("per_gpu", "profile"):
        raise ValueError(f"edl_transient: batch must be 'per_gpu' or 'profile', got {batch!r}")
    total = persistent + idle
    global_batch = zoo.profile(model).per_gpu_batch(persistent) if batch == "per_gpu" else None
    specs = [_job(0, "main", 0.0, persistent, 1e12, persistent, total, model, global_batch)]
    t = 0.0
    while t < horizon:
        specs.append(_job(len(specs), f"t{len(specs)}", t, idle, interval * 1e3, idle, idle, model))
        t += 2 * interval
    # "ideal": the same scaling at no cost at all (EDL Fig. 10b's Ideal line)
    ov = overhead.make({"kind": "constant"} if mechanism == "ideal" else {"kind": mechanism, "charge_start": False},
                       zoo.costs_of)
    pol = policies.make(policy, thresholds=[1e12, 2e12])   # one queue: no priority changes in the window
    eng = Engine(specs, Cluster([NodeGroup(1, total, 32, 256)]), pol, speed=_Speed(zoo), overhead=ov, until=horizon)
    eng.run()
    return eng.states["main"].progress


def gain(mechanism: str, interval: float, cycles: int = 6, policy: str = "elastic_tiresias",
         baseline: str = "tiresias", **kw) -> float:
    """Relative gain in iterations of ``policy`` scaling by ``mechanism`` over ``baseline`` (a
    policy that never scales), over ``cycles`` whole busy-idle cycles."""
    horizon = cycles * 2 * interval
    base = transient("stop_free", interval, policy=baseline, horizon=horizon, **kw)
    return transient(mechanism, interval, policy=policy, horizon=horizon, **kw) / base - 1.0


def break_even(mechanism: str, lo: float = 10.0, hi: float = 3600.0, tol: float = 1.0, cycles: int = 6,
               **kw) -> float | None:
    """The shortest idle interval (s) at which ``mechanism`` gains, by bisection between ``lo``
    and ``hi``: ``lo`` if it gains already there, None if it does not gain even at ``hi``."""
    if gain(mechanism, lo, cycles, **kw) > 0:
        return lo
    if gain(mechanism, hi, cycles, **kw) <= 0:
        return None
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if gain(mechanism, mid, cycles, **kw) > 0:
            hi = mid
        else:
            lo = mid
    return hi


def load_config(overrides: list[str] = ()) -> dict:
    """configs/experiment/edl_transient.yaml with ``key=value`` overrides (values parsed as YAML)."""
    cfg = yaml.safe_load(resources.files("clustersim.configs.experiment").joinpath(CONFIG).read_text())
    for o in overrides:
        key, sep, value = o.partition("=")
        if not sep or key not in cfg:
            raise SystemExit(f"edl_transient: unknown override {o!r}; keys: {', '.join(cfg)}")
        cfg[key] = yaml.safe_load(value)
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = load_config(sys.argv[1:] if argv is None else argv)
    from clustersim.simulator.profiles import load
    zoo = load()
    print(f"EDL §5.2 transient idle GPUs: {cfg['model']} on {cfg['persistent_gpus']} GPUs, {cfg['policy']} "
          f"vs {cfg['baseline_policy']}, {cfg['cycles']} idle-busy cycles")
    for k in cfg["idle_gpus"]:
        for mech in cfg["mechanisms"]:
            s = break_even(mech, cfg["lo_s"], cfg["hi_s"], cfg["tol_s"], cfg["cycles"], policy=cfg["policy"],
                           baseline=cfg["baseline_policy"], persistent=cfg["persistent_gpus"], idle=k,
                           model=cfg["model"], zoo=zoo, batch=cfg["batch"])
            paper = (cfg.get("paper") or {}).get(f"{mech}_{k}")
            shown = ("never (up to hi_s)" if s is None else f"<= {s:.0f} s (gains at lo_s already)" if s == cfg["lo_s"]
                     else f"{s:7.1f} s = {s / 60:5.2f} min")
            print(f"  {k} idle GPU(s), {mech:12s} break-even {shown}" + (f"   (paper: {paper})" if paper else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
