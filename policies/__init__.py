"""Scheduling policies, one module each, registered by name and discovered (see base.py)."""

from clustersim.policies.base import Decision, JobView, Policy, View, get, make, names, register  # noqa: F401
