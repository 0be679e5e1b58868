"""Scheduling policies, one module each, registered by name (see base.py)."""

from clustersim.policies.base import Decision, JobView, Policy, View, make, names, register  # noqa: F401
from clustersim.policies import drf, fifo, oracle, tetris, tiresias  # noqa: F401  (registers)
