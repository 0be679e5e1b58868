"""Config groups of the plug-in, on Hydra's search path through the ``clustersim.configs`` entry point."""
