"""The calibration's outputs in the model-zoo format (docs/models/profiles.md).

``profiles.yaml`` holds up to two profiles of the calibrated model:
- ``<name>`` (family gpu, data-parallel): ``speed.kind: allreduce`` with the measured
  iterations/s as a table (rows: global batch, columns: workers), fitted by the loader with
  ``AllReduceSpeed`` exactly as the zoo's tables are;
- ``<name>_ps`` (family ps): ``speed.kind: optimus`` with the measured (p, w, samples/s) points,
  fitted by the loader with ``OptimusSpeed`` (Eq. 4 sync / Eq. 3 async).
Both carry the measured ``overhead`` (ModelCosts) and ``convergence`` (Eq. 1) where those were
measured, and a ``calibration`` block the loader ignores: every measured point, the fitted
parameters, in-sample and held-out errors, the hardware and the command.

``profile/<name>.yaml`` is a ``profile`` group config (the bundled ``zoo`` with only these
profiles in ``files`` and the pools), so ``clustersim --config-dir <out> profile=<name>`` runs
every job on the calibrated model.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import yaml

from clustersim.simulator.calibration.fit import public


def _plain(x):
    """numpy scalars and tuples -> YAML-safe Python values."""
    if isinstance(x, dict):
        return {str(k) if not isinstance(k, (int, float)) else k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, str):
        return str(x)                     # str subclasses (torch's version string)
    if hasattr(x, "item"):
        return x.item()
    return x


def ps_profile(cfg: dict, records: list[dict], fit: dict, common: dict, about: dict) -> dict:
    s = cfg["ps"]
    batch = fit["batch"]
    return {
        "family": "ps", "aliases": [cfg["model"]["name"]], "batch_size": batch, **common,
        "tasks": {"ps": {"cpu": float(s["threads"]["ps"])}, "worker": {"cpu": float(s["threads"]["worker"])}},
        "speed": {"kind": "optimus", "mode": s["mode"],
                  "points": [[r["p"], r["w"], r["samples_per_s"]] for r in records]},
        "calibration": {**about, "hardware": {**about["hardware"], "device": "cpu", "backend": "gloo"},
                        "fit": public(fit),
                        "measured": [{k: r.get(k) for k in ("p", "w", "worker_batch", "samples_per_s",
                                                            "windows_samples_per_s", "steps_per_s", "ps_cores",
                                                            "worker_cores")} for r in records]}}


def dp_profile(cfg: dict, records: list[dict], fit: dict, common: dict, about: dict) -> dict:
    d = cfg["dataparallel"]
    gpus = sorted({r["n"] for r in records})
    rows: dict[float, list] = {}
    for r in records:
        rows.setdefault(float(r["global_batch"]), [None] * len(gpus))[gpus.index(r["n"])] = r["iters_per_s"]
    batch = float(d.get("profile_batch") or max(rows))
    on_gpu = any(r.get("device") == "cuda" for r in records)
    return {
        "family": "gpu", "batch_size": batch, **common,
        "tasks": {"worker": {"gpu": 1.0 if on_gpu else 0.0, "cpu": float(d["threads"])}},
        "speed": {"kind": "allreduce", "fit": {"gpus_per_node": max(gpus)},
                  "table": {"gpus": gpus, "batch": {b: rows[b] for b in sorted(rows)}}},
        "calibration": {**about, "fit": public(fit),
                        "measured": [{k: r[k] for k in ("n", "batch", "global_batch", "iter_s", "iters_per_s",
                                                        "samples_per_s", "worker_cores")} for r in records]}}


def common_block(conv: dict | None, conv_fit: dict | None, overhead_fit: dict | None) -> dict:
    out = {}
    if overhead_fit and overhead_fit["costs"]:
        out["overhead"] = overhead_fit["costs"]
    if conv_fit:
        out["convergence"] = conv_fit["b"]
        out["dataset_size"] = conv["dataset_size"]
    return out


def header(cfg: dict, hw: dict, command: str) -> str:
    lines = [
        f"Calibrated profiles of model {cfg['model']['name']!r}, written by clustersim-calibrate",
        f"({_dt.datetime.now().isoformat(timespec='seconds')}). Every number below was measured on this host:",
        f"{hw.get('cpu_model') or hw.get('processor')}, {hw.get('cpu_cores')} cores, device {hw['device']}"
        + (f" ({', '.join(hw['gpus'])})" if hw.get("gpus") else "") + f", torch {hw['torch']}.",
        f"Command: {command}",
        "Speed: the measured points; the loader fits AllReduceSpeed / OptimusSpeed to them",
        "(docs/calibration.md). calibration.fit holds the fitted parameters and held-out errors.",
        "overhead: medians of the measured rescales, scale-outs and scale-ins (calibration blocks in",
        "fit.json; a cost not measured takes the simulator's default, EDL Tables 2-3). convergence:",
        "Optimus Eq. 1 fitted to the measured loss per epoch (normalised by the first epoch's loss).",
    ]
    return "".join(f"# {ln}\n" for ln in lines)


def write_profiles(out: Path, profiles: dict, head: str, name: str = "profiles.yaml") -> Path:
    path = out / name
    text = head + "\n" + yaml.safe_dump(_plain(profiles), sort_keys=False, default_flow_style=None, width=110)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def write_group(out: Path, name: str, profiles_path: Path, profiles: dict) -> Path:
    """A ``profile`` group config: the bundled zoo's settings, these profiles only."""
    from importlib.resources import files

    base = yaml.safe_load(files("clustersim.configs").joinpath("profile/zoo.yaml").read_text())
    base.update(name=name, files=[str(profiles_path.resolve())],
                pool={fam: [n for n, p in profiles.items() if p["family"] == fam] for fam in ("gpu", "ps")})
    path = out / "profile" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# clustersim --config-dir {out.resolve()} profile={name}: every job on the calibrated "
                    f"profiles\n" + yaml.safe_dump(base, sort_keys=False))
    return path

