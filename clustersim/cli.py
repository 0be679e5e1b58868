"""The ``clustersim`` command: Hydra composes configs/config.yaml with its groups.

Errors a user can fix (a bad key or value, a bad trace file, a policy that broke the
contract or ran away, jobs left unfinished) print one message naming the cause and exit 1;
a run with unfinished jobs still writes its outputs first. Every run, failed or not, leaves
``run.json`` saying so, written last. In a sweep (``-m``) a failed run does not stop the
others: the sweep reports every failure at its end and then exits 1, and a run whose
directory already holds a complete run of the same config is skipped, so re-running an
interrupted sweep into its directory (``hydra.sweep.dir=...``) redoes only what is missing.
"""

from __future__ import annotations

import sys

# Start-up: this module imports nothing heavy, so that `clustersim --help` answers at once;
# Hydra, the simulator and its numeric libraries load inside main (tests/test_startup.py).


def main() -> None:
    """Hydra composes configs/config.yaml with the command line and runs ``_run`` (once, or per
    run of a sweep)."""
    import hydra

    import clustersim.sweep  # noqa: F401  (registers ${run_name:...} for the run directories)

    if not any(a.lstrip("+~").startswith("hydra/sweeper") for a in sys.argv[1:]):
        # a sweep composes each run's config once (hydra_plugins/clustersim_sweeper); chosen here,
        # not in config.yaml, so that composing the config elsewhere never needs the plugin; put
        # beside the user's overrides, because Hydra's parser takes them only as one run of words
        # (`clustersim policy=x --cfg job` otherwise ends in "unrecognized arguments")
        at = next((i for i, a in enumerate(sys.argv) if i and not a.startswith("-") and ("=" in a or a[0] == "~")),
                  len(sys.argv))
        sys.argv.insert(at, "hydra/sweeper=clustersim")
    _compose_once(multirun=any(a in ("-m", "--multirun") for a in sys.argv[1:]))
    hydra.main(version_base=None, config_path="pkg://clustersim.configs", config_name="config")(_run)()


def _compose_once(multirun: bool) -> None:
    """Hydra composes the config twice before a run: once to read ``hydra.mode`` (``get_mode``,
    its answer decides between a run and a sweep), and again, with ``hydra.mode=RUN`` (or
    ``MULTIRUN``) added to the overrides, to run it: ~0.2 s of the default run's ~1 s. Here the
    first composition is made as the second would be, less that one override, and kept; the
    second then takes it and applies the override (Hydra's own code for both). Where the first
    fails (an override that sweeps without ``-m``, a bad key), Hydra's own ``get_mode`` answers
    and the run composes as before, raising as before; a later composition that asks for
    anything else composes as before."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.hydra import Hydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    get_mode = getattr(Hydra.get_mode, "hydra_get_mode", Hydra.get_mode)   # main() may run again in a process

    def get_mode_composing_once(self, config_name, overrides):
        loader, mode = self.config_loader, RunMode.MULTIRUN if multirun else RunMode.RUN
        try:
            cfg = loader.load_configuration(config_name=config_name, overrides=list(overrides), run_mode=mode)
        except Exception:
            return get_mode(self, config_name, overrides)
        if cfg.hydra.mode is None:
            expected = (config_name, [*overrides, f"hydra.mode={mode.name}"], mode, True, True)

            def load_configuration(config_name, overrides, run_mode, from_shell=True, validate_sweep_overrides=True):
                del loader.load_configuration   # one call only: the loader is as Hydra made it again
                if (config_name, list(overrides), run_mode, from_shell, validate_sweep_overrides) != expected:
                    return loader.load_configuration(config_name=config_name, overrides=overrides, run_mode=run_mode,
                                                     from_shell=from_shell,
                                                     validate_sweep_overrides=validate_sweep_overrides)
                line = overrides[-1]
                ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides([line]), cfg)
                cfg.hydra.overrides.hydra.append(line)
                return cfg

            loader.load_configuration = load_configuration
        return cfg.hydra.mode

    get_mode_composing_once.hydra_get_mode = get_mode
    Hydra.get_mode = get_mode_composing_once


def _run(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict

    from clustersim.experiment import is_complete, mark_failed, remove_leftovers, report, run
    from clustersim.simulator.errors import ConfigError, OutputError, PolicyError, TraceError, UnfinishedJobsError

    hc = HydraConfig.get()
    run_dir, overrides = hc.runtime.output_dir, list(hc.overrides.task)
    sweep = hc.mode == RunMode.MULTIRUN
    if sweep and cfg.get("progress") is None:
        with open_dict(cfg):
            cfg.progress = False   # the sweep has its own bar
    remove_leftovers(run_dir)   # of an attempt killed on this host
    try:
        if is_complete(run_dir, cfg):
            print(f"clustersim: {run_dir} already holds this run, complete: skipped", flush=True)
            return
        summary, _ = run(cfg, run_dir, overrides)
    except (ConfigError, TraceError, PolicyError, UnfinishedJobsError, OutputError) as e:   # errors a user can fix
        if isinstance(e, UnfinishedJobsError):
            if e.summary is not None:
                print(report(cfg, e.summary, run_dir), flush=True)
        else:
            try:
                mark_failed(run_dir, e, cfg, overrides)
            except (ConfigError, OutputError):   # not a run directory, or not writable: nothing to record there
                pass
        print(f"clustersim: error: {e}", file=sys.stderr, flush=True)
        if sweep:
            return   # the sweep's report lists it and the command exits 1 at the end
        raise SystemExit(1) from None
    print(report(cfg, summary, run_dir), flush=True)


def defaults() -> dict[str, str]:
    """The config groups, in order, with their default choices (configs/config.yaml's defaults
    list); the same groups as ``clustersim.experiment.GROUPS``, read here so that ``--help``
    need not import the simulator."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's parser where PyYAML has it
    out = {}
    for d in yaml.load((_configs() / "config.yaml").read_text(), Loader=loader)["defaults"]:
        if isinstance(d, dict):
            out.update({k: v for k, v in d.items() if "/" not in k and not k.startswith("override ")})
    return out


def _configs():
    """The folder of the config groups (a plain path: importlib.resources costs more to import
    than the whole of --help)."""
    from pathlib import Path

    import clustersim.configs

    return Path(clustersim.configs.__file__).parent


def choices(groups) -> dict[str, list[tuple[str, str]]]:
    """Each config group's choices with the first line of their config file, clustersim's own
    first, then installed plug-ins' (``clustersim.configs`` entry points; a plug-in's config of a
    name clustersim has is never used, so not listed); hand-made trace samples
    (``bundled:samples/``) say so."""
    from clustersim.plugins import config_dir, config_packages

    folders = [_configs()] + [d for d in (config_dir(p) for _, p in config_packages()) if d is not None]
    out = {}
    for group in groups:
        rows, seen = [], set()
        for folder in folders:
            if not (folder / group).is_dir():
                continue
            for f in sorted((folder / group).iterdir(), key=lambda f: f.name):
                if not f.name.endswith(".yaml") or f.name[:-5] in seen:
                    continue
                seen.add(f.name[:-5])
                text = f.read_text()
                first = text.splitlines()[0].lstrip("# ").strip() if text.startswith("#") else ""
                if "bundled:samples/" in text:
                    first = "[hand-made SAMPLE of the format: set trace.path] " + first.split("; hand-made sample")[0]
                rows.append((f.name[:-5], first))
        out[group] = rows
    return out


def plugin_lines() -> list[str]:
    """What each installed plug-in adds, for ``--help``."""
    from clustersim.plugins import installed

    found = installed()
    if not found:
        return ["plug-ins: none installed (an outside package adds policies, trace formats and their configs",
                "  through entry points: docs/plugins.md, examples/clustersim-ljf)"]
    return ["plug-ins (installed packages' entry points; their configs are listed above):"] + [
        f"  {dist}: {', '.join(what)}" for dist, what in found.items()]


def help_text() -> str:
    defaults_ = defaults()
    lines = [
        "clustersim: replay a cluster trace against a scheduling policy and write the run's outputs.",
        "",
        "usage: clustersim [group=choice ...] [key=value ...]",
        "       clustersim -m policy=fifo,tiresias seed=0,1,2     a sweep: one run directory per combination",
        "       clustersim -m ... hydra/launcher=joblib           the same sweep on all local cores (pip install",
        "                                                         '.[joblib]' from a clone; '.[ray]': a Ray cluster)",
        "       clustersim --cfg job                              print the config a run would use",
        "       clustersim --hydra-help                           Hydra's own options",
        "",
        "default: " + " ".join(f"{g}={c}" for g, c in defaults_.items()) + " seed=0",
        "",
    ]
    for group, rows in choices(defaults_).items():
        lines.append(f"{group}=   (a choice's keys: {group}.<key>=value)")
        width = max(len(n) for n, _ in rows) + 2
        for name, desc in rows:
            mark = "*" if defaults_.get(group) == name else " "
            lines.append(f"  {mark}{name:<{width}}{desc}")
        lines.append("")
    lines += plugin_lines() + [""]
    lines += [
        "top-level keys: seed (int), until (s, or null), progress (null|true|false), limits.*, observe.*",
        "",
        "outputs: runs/<time>_<policy>_<trace>_s<seed>_<hash>/ (a sweep: runs/multirun/<time>/<...>/):",
        "  jobs.parquet, timeline.parquet, events.parquet, tenants.parquet, summary.json, run.json",
        "  (every column and unit: docs/outputs.md). Re-running a sweep with hydra.sweep.dir=<dir> skips",
        "  its complete runs and redoes the failed and interrupted ones.",
        "then:",
        "  clustersim-collect <sweep dir>      one Parquet dataset of the sweep (failed/missing runs listed)",
        "  clustersim-plot <sweep dir>         JCT CDF, JCT/makespan bars, utilization, queue, Gantt, tenants",
        "  clustersim-trace-info trace=...     a trace's jobs, span, GPU-hours and offered load on a cluster",
    ]
    return "\n".join(lines)


def entry() -> None:
    """The console script: our own --help (every group's choices), else Hydra."""
    if any(a in ("--help", "-h") for a in sys.argv[1:]):
        print(help_text())
        return
    if any(a in ("--version", "-V") for a in sys.argv[1:]):   # Hydra's own --version names Hydra's
        from clustersim import __version__

        print(f"clustersim {__version__}")
        return
    main()


if __name__ == "__main__":
    entry()
