"""Puts the configs of installed clustersim plug-ins on Hydra's search path (see plugin.py)."""
