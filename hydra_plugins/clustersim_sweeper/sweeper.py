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
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_loader import ConfigLoader
from hydra.core.config_store import ConfigStore
from hydra.types import HydraContext


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
    sweeper composed for the same master config and overrides (once) instead of composing."""

    def __init__(self, loader: ConfigLoader, keep: int):
        self.loader, self.keep, self.kept = loader, keep, {}
        if hasattr(loader, "repository") and not isinstance(loader.repository, KeptFiles):
            loader.repository = KeptFiles(loader.repository)

    def __getstate__(self):   # a launcher may pickle it to other processes: they compose
        return {"loader": self.loader, "keep": self.keep, "kept": {}}

    def compose(self, master_config: Any, overrides: Sequence[str]) -> None:
        """Compose one run's config (raising as the launcher would) and keep it, room allowing."""
        cfg = self.loader.load_sweep_config(master_config, list(overrides))
        if len(self.kept) < self.keep:
            self.kept[tuple(overrides)] = (master_config, cfg)

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
