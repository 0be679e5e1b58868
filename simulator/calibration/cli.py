"""``clustersim-calibrate``: measure, fit, write (Hydra config ``configs/calibrate/config.yaml``).

    clustersim-calibrate model=recommendation ps.p='[1,2,3]' ps.w='[1,2,3,4]' out=cal/rec

``run(cfg)`` does the work: each enabled sweep measures its pending points (every point is on
disk as soon as it is measured, so a rerun resumes), then the fits, ``profiles.yaml``, the
``profile`` group config, ``fit.json`` and ``calibration.png`` are (re)written from all points.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from clustersim.simulator.calibration import INSTALL_HINT, have_torch
from clustersim.simulator.calibration.config import check
from clustersim.simulator.errors import ConfigError


def run(cfg: dict, command: str = "clustersim-calibrate") -> dict:
    from clustersim.simulator.calibration import converge, dataparallel, fit, ps, rescale, write
    from clustersim.simulator.calibration.launch import device_for, hardware

    check(cfg)
    _check_sweeps(cfg)
    out = Path(cfg["out"])
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"out: {out}: cannot create the folder ({e.strerror})") from None
    store = str(out / "points.jsonl")
    progress = cfg.get("progress")
    progress = sys.stderr.isatty() if progress is None else bool(progress)
    f = cfg["fit"]
    kind, backend = device_for(cfg["device"], 1)
    hw = hardware(kind, backend)
    about = {"hardware": hw, "command": command}
    fits: dict = {}

    ps_recs = dp_recs = conv = resc = None
    if cfg["ps"]["enabled"]:
        ps_recs = ps.measure(cfg, store, progress)
        fits["ps"] = fit.fit_ps(ps_recs, cfg["ps"]["mode"], int(cfg["ps"]["batch"]), f["test_fraction"], f["repeats"])
        ps_recs = fits["ps"]["_records"]          # each point from its windows, outliers rejected
    if cfg["dataparallel"]["enabled"]:
        dp_recs = dataparallel.measure(cfg, store, progress)
        fits["dataparallel"] = fit.fit_dp(dp_recs, f["test_fraction"], f["repeats"])
        dp_recs = fits["dataparallel"]["_records"]
    if cfg["overhead"]["enabled"]:
        resc = rescale.measure(cfg, store, progress)
        fits["overhead"] = fit.fit_overhead(resc)
    if cfg["convergence"]["enabled"]:
        conv = converge.measure(cfg, store, progress)
        try:
            fits["convergence"] = fit.fit_convergence(conv["losses"], 1.0 - float(f["test_fraction"]),
                                                      float(cfg["convergence"]["threshold"]),
                                                      int(cfg["convergence"]["patience"]))
        except ValueError as e:      # e.g. fewer than 3 epochs, or a loss of exactly 0
            print(f"clustersim-calibrate: no convergence fit: {e}", file=sys.stderr)
            conv = None

    common = write.common_block(conv, fits.get("convergence"), fits.get("overhead"))
    name, profiles = cfg["name"], {}
    if dp_recs:
        profiles[name] = write.dp_profile(cfg, dp_recs, fits["dataparallel"], common, about)
    if ps_recs:
        profiles[f"{name}_ps"] = write.ps_profile(cfg, ps_recs, fits["ps"], common, about)
    summary = {"out": str(out), "hardware": hw, "fits": {k: fit.public(v) for k, v in fits.items()},
               "rescales": [{k: v for k, v in r.items() if k != "key"} for r in resc or []]}
    if profiles:
        path = write.write_profiles(out, profiles, write.header(cfg, hw, command))
        summary["profiles"] = str(path)
        summary["group"] = str(write.write_group(out, name, path, profiles))
    (out / "fit.json").write_text(json.dumps(write._plain(summary), indent=2, default=str))
    if cfg.get("plot", True):
        from clustersim.simulator.calibration.plot import plot
        summary["png"] = str(plot(out / "calibration.png", ps_recs and (ps_recs, fits["ps"]),
                                  dp_recs and (dp_recs, fits["dataparallel"]),
                                  conv and (conv["losses"], fits["convergence"]), resc))
    return summary


def _check_sweeps(cfg: dict) -> None:
    """Refuse, before measuring, a speed sweep with fewer points than its model has coefficients."""
    from clustersim.simulator.calibration import dataparallel, ps

    need = {"ps": 5 if cfg["ps"]["mode"] == "sync" else 4, "dataparallel": 5}   # Eq. 4 / Eq. 3 / all-reduce
    for name, mod in (("ps", ps), ("dataparallel", dataparallel)):
        if cfg[name]["enabled"] and len(mod.points(cfg)) < need[name]:
            raise ConfigError(f"{name}: {len(mod.points(cfg))} points cannot fit {need[name]} coefficients; "
                             f"sweep more sizes or set {name}.enabled=false")


def report(summary: dict) -> str:
    lines = [f"clustersim-calibrate -> {summary['out']}"]
    pct = lambda e: "n/a" if e is None else f"{100 * e:.1f}%"  # noqa: E731
    fits = summary["fits"]
    if "ps" in fits:
        h = fits["ps"]["heldout"]
        lines.append(f"  PS {fits['ps']['model']}: in-sample MAPE {pct(fits['ps']['mape'])}, held-out "
                     f"{pct(h.get('error'))} (worst split {pct(h.get('worst'))}; "
                     f"{h.get('train_points')} fit / {h.get('test_points')} held out); measurement noise "
                     f"{pct(fits['ps']['window_spread'])} {h.get('reason', '')}\n    {fits['ps']['verdict']}")
    if "dataparallel" in fits:
        h = fits["dataparallel"]["heldout"]
        lines.append(f"  data-parallel all-reduce: in-sample {pct(fits['dataparallel']['mape'])}, held-out "
                     f"{pct(h.get('error'))}; measurement noise {pct(fits['dataparallel']['window_spread'])} "
                     f"{h.get('reason', '')}\n    {fits['dataparallel']['verdict']}")
    if "overhead" in fits:
        c = fits["overhead"]["costs"]
        lines.append("  overhead: " + ", ".join(f"{k} {v:.3g}" for k, v in c.items()))
    if "convergence" in fits:
        b, h = fits["convergence"]["b"], fits["convergence"]["heldout"]
        lines.append(f"  convergence: b0 {b['b0']:.3g} b1 {b['b1']:.3g} b2 {b['b2']:.3g}; held-out error "
                     f"{pct(h.get('error'))} of the first loss, converges at epoch {h.get('epochs_measured')} "
                     f"(predicted from the first {h.get('train_epochs')}: {h.get('epochs_predicted')})")
    if "group" in summary:
        lines.append(f"  profile: {summary['profiles']}\n  use it: clustersim --config-dir "
                     f"{Path(summary['group']).parent.parent.resolve()} profile={Path(summary['group']).stem}")
    return "\n".join(lines)


def help_text() -> str:
    """``clustersim-calibrate --help``: how to call it, the models, and every key with its default
    and meaning (configs/calibrate/config.yaml itself, its comments being the keys' documentation)."""
    from importlib import resources

    configs = resources.files("clustersim.configs.calibrate")
    models = sorted(f.name[:-5] for f in configs.joinpath("model").iterdir() if f.name.endswith(".yaml"))
    text = configs.joinpath("config.yaml").read_text().split("\nhydra:")[0]   # Hydra's own block left out
    keys = text.split("  - _self_\n", 1)[-1].strip("\n")                   # after the defaults list
    return "\n".join([
        "clustersim-calibrate: measure a model's speed, scaling and rescale costs on this host with real",
        "torch.distributed training, fit the simulator's models to them, and write a profile (docs/calibration.md).",
        "",
        "usage: clustersim-calibrate [model=<name>] [key=value ...]",
        "       clustersim-calibrate model=recommendation ps.p='[1,2,3]' ps.w='[1,2,3,4]' out=cal/rec",
        "       clustersim-calibrate --cfg job           print the config a run would use",
        "",
        f"model=   {', '.join(models)} (default mlp; model.<key>=value sets a model parameter)",
        "",
        "keys (default, meaning):",
        keys,
        "",
        f"needs torch: {INSTALL_HINT}",
    ])


def main() -> None:
    """Hydra composes the config; it is checked whole (a bad key or value: one line, exit 1) before
    torch is needed or anything is measured."""
    if any(a in ("--help", "-h") for a in sys.argv[1:]):
        print(help_text())
        return
    import hydra
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    @hydra.main(version_base=None, config_path="pkg://clustersim.configs.calibrate", config_name="config")
    def _main(cfg) -> None:
        try:
            c = check(OmegaConf.to_container(cfg, resolve=True))
            if not have_torch():
                sys.exit(f"clustersim-calibrate: {INSTALL_HINT}")
            summary = run(c, "clustersim-calibrate " + " ".join(sys.argv[1:]))
        except (ConfigError, OmegaConfBaseException) as e:   # errors a user can fix: one line
            print(f"clustersim-calibrate: error: {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None
        print(report(summary), flush=True)

    _main()


if __name__ == "__main__":
    main()
