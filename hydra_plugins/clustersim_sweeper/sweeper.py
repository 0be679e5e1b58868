"""Hydra's basic sweeper, composing each run's config once instead of twice.

The basic sweeper composes every run's config to check the sweep before it starts
(``validate_batch_is_legal``: a bad override fails the sweep before any run), then the launcher
composes it again to run it: composing is most of a sweep's cost per run (~0.1 s of the
default run's ~0.2 s). This sweeper checks the sweep the same way, keeps the configs it
composed (up to ``keep`` of them, ~0.2 MB each) and hands them to a launcher that asks for the
same run of the same sweep; past ``keep``, and in a launcher's other processes, runs compose
as before. Config files are read once per sweep (``KeptFiles``). Everything else (overrides, ``params``, ``max_batch_size``, the order of runs) is
the basic sweeper's; ``hydra/sweeper=basic`` selects Hydra's own.
"""

import copy
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_loader import ConfigLoader
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from hydra.errors import ConfigCompositionException
from hydra.types import HydraContext
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from omegaconf.nodes import ValueNode


@dataclass
class ClustersimSweeperConf:
    _target_: str = "hydra_plugins.clustersim_sweeper.sweeper.ClustersimSweeper"
    max_batch_size: Optional[int] = None     # as the basic sweeper's
    params: Optional[Dict[str, str]] = None  # as the basic sweeper's
    keep: int = 256                          # composed configs kept from the check for the launcher


ConfigStore.instance().store(group="hydra/sweeper", name="clustersim", node=ClustersimSweeperConf,
                             provider="clustersim")


class KeptFiles:
    """A config repository that reads and parses each config file once per sweep and hands out
    copies: composing a run re-reads some twenty files (Hydra's and clustersim's) with a
    pure-Python YAML parser, a third of the time it takes. Keyed by the file and the search
    path, as the files are found; Hydra copies the repository for every composition (an
    override may add to the search path), and the copies share what was read."""

    def __init__(self, repository: Any, kept: Optional[dict] = None):
        self.repository, self.kept = repository, {} if kept is None else kept

    def __getattr__(self, name: str) -> Any:
        if name in ("repository", "kept"):   # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.repository, name)

    def __deepcopy__(self, memo: dict) -> "KeptFiles":
        return KeptFiles(copy.deepcopy(self.repository, memo), self.kept)

    def __getstate__(self) -> dict:
        return {"repository": self.repository, "kept": {}}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def load_config(self, config_path: str) -> Any:
        key = (config_path, tuple((s.provider, s.path) for s in self.repository.get_sources()))
        if key not in self.kept:
            self.kept[key] = self.repository.load_config(config_path)
        return copy.deepcopy(self.kept[key])   # composing changes what it loads


class ComposeOnce(ConfigLoader):
    """The sweep's config loader, except that ``load_sweep_config`` hands out a config the
    sweeper composed for the same master config and overrides (once) instead of composing.

    Runs that differ from a composed one only in the values of plain keys (``seed=0,...,7``,
    ``observe.throughput_noise=0.01,0.02``: no config group, no ``hydra.*``, no ``+``/``~``,
    one value each) are made from a copy of its config with the run's values set, as Hydra's
    composition sets them after building the same defaults list (``Template``); every other run
    is composed."""

    def __init__(self, loader: ConfigLoader, keep: int):
        self.loader, self.keep, self.kept = loader, keep, {}
        self.templates: dict = {}
        if hasattr(loader, "repository") and not isinstance(loader.repository, KeptFiles):
            loader.repository = KeptFiles(loader.repository)

    def __getstate__(self):   # a launcher may pickle it to other processes: they compose
        return {"loader": self.loader, "keep": self.keep, "kept": {}, "templates": {}}

    def compose(self, master_config: Any, overrides: Sequence[str]) -> None:
        """Compose one run's config (raising as the launcher would) and keep it, room allowing."""
        cfg = self.from_template(master_config, overrides)
        if cfg is None:
            cfg = self.loader.load_sweep_config(master_config, list(overrides))
            self.add_template(master_config, overrides, cfg)
        if len(self.kept) < self.keep:
            self.kept[tuple(overrides)] = (master_config, cfg)

    def plain(self, overrides: Sequence[str]) -> Optional[tuple]:
        """The parsed overrides, their signature (each key, and the whole override where it is
        not a plain value) and the plain ones: those that set one value of a key that is no
        config group, which Hydra's composition applies last, on the defaults the others chose."""
        repository = getattr(self.loader, "repository", None)
        if repository is None:
            return None
        try:
            parsed = OverridesParser.create().parse_overrides(list(overrides))
        except Exception:
            return None
        if any(o.is_sweep_override() or o.is_hydra_override() for o in parsed):
            return None
        # the config overrides (Hydra's split: a dict, or a key that is no config group), which
        # Hydra applies in their order: no two may touch the same key, so that their order is moot
        config = [o for o in parsed if isinstance(o.value(), dict) or not repository.group_exists(o.key_or_group)]
        keys = [o.key_or_group for o in config]
        if len(set(keys)) != len(keys) or any(a.startswith(b + ".") for a in keys for b in keys):
            return None
        values = [o for o in config if o.type == OverrideType.CHANGE and o.package is None
                  and isinstance(o.value(), (str, int, float, bool, type(None)))]
        signature = tuple((o.key_or_group, None if o in values else o.input_line) for o in parsed)
        return parsed, signature, values

    def add_template(self, master_config: Any, overrides: Sequence[str], cfg: Any) -> None:
        plain = self.plain(overrides)
        if plain is None or len(self.templates) >= 32 or OmegaConf.select(cfg, "hydra.searchpath"):
            return   # a search path override could make a key a config group for this run
        parsed, signature, values = plain
        if not values or len(cfg.hydra.overrides.task) != len(parsed):
            return
        for o in values:   # each key holds a value (not a config another run's value replaces)
            parent, _, leaf = o.key_or_group.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            if not OmegaConf.is_dict(node) or not isinstance(node._get_node(leaf), ValueNode):
                return
        self.templates[signature] = (master_config, copy.deepcopy(cfg))

    def from_template(self, master_config: Any, overrides: Sequence[str]) -> Any:
        """The config of a run that differs from a composed run only in plain values, those values
        set on a copy of its config as Hydra sets them."""
        if not self.templates:
            return None
        plain = self.plain(overrides)
        if plain is None or plain[1] not in self.templates:
            return None
        parsed, signature, values = plain
        master, template = self.templates[signature]
        if master is not master_config:
            return None
        cfg = copy.deepcopy(template)
        try:
            ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        except OmegaConfBaseException as e:   # as Hydra's load_configuration reports it
            raise ConfigCompositionException().with_traceback(sys.exc_info()[2]) from e
        task = cfg.hydra.overrides.task
        for i, o in enumerate(parsed):   # the template's overrides: the same keys in the same order
            task[i] = o.input_line
        od = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = get_overrides_dirname(overrides=parsed, kv_sep=od.kv_sep,
                                                               item_sep=od.item_sep, exclude_keys=od.exclude_keys)
        OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
        return cfg

    def load_sweep_config(self, master_config: Any, sweep_overrides: List[str]) -> Any:
        master, cfg = self.kept.pop(tuple(sweep_overrides), (None, None))
        if cfg is not None and master is master_config:
            return cfg
        return self.loader.load_sweep_config(master_config, sweep_overrides)

    def load_configuration(self, *args: Any, **kwargs: Any) -> Any:
        return self.loader.load_configuration(*args, **kwargs)

    def get_search_path(self) -> Any:
        return self.loader.get_search_path()

    def get_sources(self) -> Any:
        return self.loader.get_sources()

    def list_groups(self, parent_name: str) -> Any:
        return self.loader.list_groups(parent_name)

    def get_group_options(self, *args: Any, **kwargs: Any) -> Any:
        return self.loader.get_group_options(*args, **kwargs)

    def compute_defaults_list(self, *args: Any, **kwargs: Any) -> Any:
        return self.loader.compute_defaults_list(*args, **kwargs)


class ClustersimSweeper(BasicSweeper):
    def __init__(self, max_batch_size: Optional[int], params: Optional[Dict[str, str]] = None, keep: int = 256):
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.keep = keep

    def setup(self, *, hydra_context: HydraContext, task_function: Any, config: Any) -> None:
        self.composed = ComposeOnce(hydra_context.config_loader, self.keep)
        context = HydraContext(config_loader=self.composed, callbacks=hydra_context.callbacks)
        super().setup(hydra_context=context, task_function=task_function, config=config)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        for overrides in batch:
            self.composed.compose(self.config, overrides)
