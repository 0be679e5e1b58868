"""The config ``clustersim <overrides>`` would run, for scripts and notebooks (``experiment.compose``),
each choice of config groups composed once per process.

Hydra composes in two steps (``hydra/_internal/config_loader_impl.py``, ``_load_configuration_impl``):
the config group overrides (``policy=fifo``, ``+experiment=...``, ``~faults``) choose the defaults list,
whose configs are read and merged (~0.1 s: a defaults tree, some twenty YAML files parsed by a
pure-Python parser); then the config overrides (a key that is no config group, ``trace.path=...``,
``seed=1``, or a dict value) are set on the result in their order (``_apply_overrides_to_config``).
A script that composes ten configs differing only in values pays the first step ten times. Here the
result of the first step is kept per group overrides and per state of every config source (each
file's and folder's size and times, and the structured configs registered in Hydra's ConfigStore,
so an edited, added or removed config composes anew), and the second step is Hydra's own function
on a copy of it: the same config as composing it whole. Sweeps, ``hydra.*`` overrides, overrides
Hydra cannot parse (it names the error) and a search path extended by a config always compose whole.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

KEEP = 16   # group choices kept (choice: ~0.2 MB each; a script composes a few)
_kept: dict = {}   # (config sources' state, group overrides) -> their composed config, or None: compose whole


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose, initialize_config_module

    with initialize_config_module(config_module="clustersim.configs", version_base=None):
        split = _split(overrides)
        state = _sources_state() if split is not None else None
        if state is None:
            return hydra_compose("config", overrides=overrides)
        groups, values = split
        key = (state, tuple(o.input_line for o in groups))
        if key not in _kept:
            if len(_kept) >= KEEP:
                del _kept[next(iter(_kept))]   # the oldest
            _kept[key] = _groups_only([o.input_line for o in groups])
        base = _kept[key]
        if base is None:
            return hydra_compose("config", overrides=overrides)
        return _with_values(copy.deepcopy(base), values)


def _split(overrides: list[str]) -> tuple[list, list] | None:
    """The parsed overrides as Hydra splits them (``defaults_list.Overrides``): the group overrides,
    and the config overrides (a dict value, or a key that is no config group) in their order;
    None where this module leaves the whole composition to Hydra."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    repository = getattr(GlobalHydra.instance().hydra.config_loader, "repository", None)
    if repository is None:
        return None
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:   # Hydra's composition raises it, with its message
        return None
    if any(o.is_sweep_override() or o.is_hydra_override() for o in parsed):
        return None
    config = [isinstance(o.value(), dict) or not repository.group_exists(o.key_or_group) for o in parsed]
    return [o for o, c in zip(parsed, config) if not c], [o for o, c in zip(parsed, config) if c]


def _groups_only(groups: list[str]):
    """The config the group overrides compose, as ``hydra.compose`` returns it (without its
    ``hydra`` node); None when a config extends the search path (``hydra.searchpath``), which
    could make a key a config group for these overrides only."""
    from hydra import compose as hydra_compose
    from omegaconf import OmegaConf, open_dict

    cfg = hydra_compose("config", overrides=groups, return_hydra_config=True)
    if OmegaConf.select(cfg, "hydra.searchpath"):
        return None
    with open_dict(cfg):   # as hydra.compose removes it
        del cfg["hydra"]
    return cfg


def _with_values(cfg, values: list):
    """``cfg`` with the config overrides set as Hydra's composition sets them, errors included."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import OmegaConfBaseException

    try:
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    except OmegaConfBaseException as e:   # as ConfigLoaderImpl.load_configuration reports it
        raise ConfigCompositionException().with_traceback(sys.exc_info()[2]) from e
    return cfg


def _sources_state() -> tuple | None:
    """What the config sources hold now: each folder's and file's name, size and times, and the
    ConfigStore's entries; None if a source is not a folder on disk (a zip)."""
    from hydra.core.global_hydra import GlobalHydra

    state = []
    for source in GlobalHydra.instance().hydra.config_loader.get_sources():
        scheme = source.scheme()
        if scheme == "structured":
            state.append((scheme, _store_state()))
            continue
        root = _folder(scheme, source.path)
        if root is None:
            return None
        state.append((scheme, source.provider, str(root), _files_state(root)))
    return tuple(state)


def _folder(scheme: str, path: str) -> Path | None:
    if scheme == "file":
        root = Path(path).resolve()
    elif scheme == "pkg":
        from importlib import resources

        try:
            root = resources.files(path)
        except (ValueError, ModuleNotFoundError, TypeError):
            return None
    else:
        return None
    return root if isinstance(root, Path) and root.is_dir() else None


def _files_state(root: Path) -> tuple:
    out = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")   # never read as configs
        for name in ("", *sorted(files)):
            st = os.stat(os.path.join(folder, name))
            out.append((folder, name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(out)


_store_nodes: dict = {}   # id -> each ConfigStore entry seen, held so that no later entry can take its id


def _store_state() -> tuple:
    """The ConfigStore's entries (structured configs registered in this process), by identity:
    ``store`` makes a new entry object for a new or replaced config."""
    from hydra.core.config_store import ConfigStore

    out = []

    def walk(prefix: str, node) -> None:
        for name in sorted(node):
            entry = node[name]
            if isinstance(entry, dict):
                walk(f"{prefix}{name}/", entry)
            else:
                out.append((prefix + name, id(entry)))
                _store_nodes.setdefault(id(entry), entry)

    walk("", ConfigStore.instance().repo)
    return tuple(out)
