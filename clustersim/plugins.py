"""Installed plug-ins: outside packages that add components and their configs through entry
points alone (docs/plugins.md; ``examples/clustersim-ljf`` is one). Code registers through the
groups the registries read (``simulator/registry.py``); configs through ``clustersim.configs``,
whose entry points each name a package of config groups that Hydra searches after clustersim's
own (``hydra_plugins/clustersim_searchpath``). Light to import: ``clustersim --help`` lists
plug-ins without loading Hydra or the simulator."""

from __future__ import annotations

from pathlib import Path

CONFIGS = "clustersim.configs"
# entry-point group -> what its entries add (the groups of simulator/registry.py's registries)
GROUPS = {"clustersim.policies": "policy", "clustersim.traces": "trace format",
          "clustersim.speed_models": "speed model", "clustersim.overheads": "overhead model",
          "clustersim.profiles": "profile", CONFIGS: "configs"}


def _entry_points(group: str) -> list:
    from importlib.metadata import entry_points
    return sorted(entry_points(group=group), key=lambda ep: ep.name)


def config_packages() -> list[tuple[str, str]]:
    """``(entry point name, package)`` of every installed plug-in's configs, in name order."""
    return [(ep.name, ep.value) for ep in _entry_points(CONFIGS)]


def config_dir(package: str) -> Path | None:
    """The folder of a config package (found without importing it), None if not installed."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    return Path(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else None


def installed() -> dict[str, list[str]]:
    """``{distribution: ["policy ljf", "trace format sacct", "configs", ...]}`` of what each
    installed plug-in adds."""
    out: dict[str, list[str]] = {}
    for group, what in GROUPS.items():
        for ep in _entry_points(group):
            dist = ep.dist.name if getattr(ep, "dist", None) is not None else "?"
            out.setdefault(dist, []).append(what if group == CONFIGS else f"{what} {ep.name}")
    return dict(sorted(out.items()))
