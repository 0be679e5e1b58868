"""clustersim's Hydra sweeper (configs/config.yaml: ``override hydra/sweeper: clustersim``).

Hydra imports every module of the ``hydra_plugins`` namespace package whenever any Hydra
application starts: this package imports only what Hydra has imported already.
"""
