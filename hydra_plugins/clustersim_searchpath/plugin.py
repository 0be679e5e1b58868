"""Hydra finds an outside package's configs: each entry point of the group ``clustersim.configs``
names a package of config groups (``policy/<name>.yaml``, ``trace/<name>.yaml``, ...), appended
to the search path as ``pkg://<package>``, after clustersim's own configs (an outside config
never shadows a shipped one of the same name). Hydra loads this module as it loads every plugin
under ``hydra_plugins``; with no such entry point it adds nothing, for any Hydra application.
"""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin



class ClustersimPluginConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from clustersim.plugins import config_packages
        for name, package in config_packages():
            search_path.append(provider=f"clustersim-plugin:{name}", path=f"pkg://{package}")
