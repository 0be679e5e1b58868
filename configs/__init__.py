"""The config groups Hydra composes (config.yaml and its groups)."""


def _sweeper_visible() -> None:
    """config.yaml selects clustersim's sweeper (hydra_plugins/clustersim_sweeper), which Hydra
    finds by listing the ``hydra_plugins`` namespace package's folders. An editable install
    (``make dev``) reaches that folder through an import hook that such a listing cannot see:
    add the folder itself (nothing to do for an ordinary install, where it sits in
    site-packages). Cheap: imports no Hydra (``clustersim --help`` reads this package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("hydra_plugins.clustersim_sweeper")
    if spec is None or not spec.origin:
        return
    import hydra_plugins

    root = str(Path(spec.origin).parent.parent)
    if root not in list(hydra_plugins.__path__):
        hydra_plugins.__path__.append(root)


_sweeper_visible()
