"""The policy interface: a read-only view in, desired allocations out.

A policy subclasses ``Policy``, sets ``name``, is decorated with ``@register`` and implements
``decide(view) -> Decision`` (the types live beside the engine, in ``simulator/view.py``).
Keyword arguments of ``__init__`` are the policy's parameters; their annotations and defaults
are its config schema (``configs/policy/<name>.yaml`` sets them; ``simulator/params.py``
checks them). ``tags`` say what a policy handles (oracle, elastic, multi-resource, ps), which
the conformance suite uses to pick the inputs it runs the policy on.
"""

from __future__ import annotations

from typing import ClassVar

from clustersim.simulator.errors import OracleError, PolicyError  # noqa: F401
from clustersim.simulator.registry import Registry
from clustersim.simulator.view import (ClusterView, Decision, JobView, Observer, Profiled,  # noqa: F401
                                       ThroughputSample, View, read_only)


class Policy:
    """Base class. Subclasses set ``name`` and implement ``decide``."""

    name: ClassVar[str] = "base"
    oracle: ClassVar[bool] = False       # reads ground truth (SRTF, SJF, Tetris)
    tags: ClassVar[frozenset[str]] = frozenset()   # of TAGS
    # declared to a fault model (simulator.faults.Capabilities): a straggler's shards go to the fast
    # workers (a policy that also defines ``shard_batches(job_id)`` sets the straggler's shard size);
    # the policy's own checkpoint interval (None: the faults config's)
    dynamic_sharding: ClassVar[bool] = False
    checkpoint_interval_s: ClassVar[float | None] = None
    # Declared to the engine: whenever no job is pending, ``decide`` returns a Decision with no
    # allocations and no wakeup (it changes nothing and asks for nothing). The engine then skips
    # those decisions (no view, no call) until the last job ends; the policy hears of jobs that
    # finished meanwhile in the ``view.finished`` of its next decision (at the latest, the one
    # after the last job ends). Declare it only where ``decide`` shows it; the conformance suite
    # fails a policy whose decision with nothing pending changes something.
    decides_only_when_waiting: ClassVar[bool] = False
    # Declared to the engine: when its previous decision left a job pending and since then no job
    # ended or stopped, no resources were freed and no node went down or came up (jobs at most
    # arrived), ``decide`` returns a Decision with no allocations and no wakeup: arrivals queue
    # behind a job that did not fit and still does not (FIFO without backfilling). The engine
    # skips those decisions; the policy hears of the arrivals at its next decision. The
    # conformance suite checks it like ``decides_only_when_waiting``.
    decides_only_when_freed: ClassVar[bool] = False
    # Declared to the engine: a method ``waits_for_gpus() -> float | None`` (None here: nothing
    # declared), read right after each decision that asked for no wakeup. Its value G says: until
    # a job stops or a node goes down or comes up, every later decision at which the cluster's
    # free GPUs plus ``cluster.EPS`` are below G returns a Decision with no allocations and no
    # wakeup, whatever else happened since (jobs arrived, ended or released resources). None:
    # no such bound. FIFO without backfilling returns its head's GPUs (it starts nothing while
    # the head does not fit). The engine skips those decisions; the policy hears of the arrivals
    # and ends at its next one. The conformance suite checks it at every decision it covers.
    waits_for_gpus = None
    # Declared to the engine: a decision is asked for whenever a running job's slowdown changes
    # (a fault model's straggler begins or ends, ``JobView.slowest_task`` moves), so a policy
    # that acts on slow workers hears of one when it appears instead of polling for it
    # (Elastic-Tiresias with ``remove_stragglers``). Off: the policy sees a slowdown at its
    # next decision, as a policy that checks at its own rounds or heartbeats would.
    decides_on_slowdown: ClassVar[bool] = False

    def reset(self, view: View) -> None:
        """Called once before the first event."""

    def decide(self, view: View) -> Decision:
        raise NotImplementedError


TAGS = frozenset({"oracle", "elastic", "multi-resource", "ps"})
POLICIES = Registry("policy", "clustersim.policies", "clustersim.policies")


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available by its ``name``."""
    unknown = set(cls.tags) - TAGS
    if unknown:
        raise ValueError(f"policy {cls.name!r}: unknown tag(s) {sorted(unknown)}; known: {sorted(TAGS)}")
    if cls.oracle != ("oracle" in cls.tags):
        raise ValueError(f"policy {cls.name!r}: oracle = {cls.oracle} but its tags are {sorted(cls.tags)}")
    return POLICIES.register()(cls)


def names() -> list[str]:
    return POLICIES.names()


def get(name: str) -> type[Policy]:
    return POLICIES.get(name).obj


def make(name: str, **params) -> Policy:
    """Instantiate a registered policy with checked parameters (``simulator/params.py``): an
    unknown name, a plug-in that fails to load, a bad key or value is a ``ConfigError`` naming the key."""
    from clustersim.simulator.errors import ConfigError
    from clustersim.simulator.params import check_params
    from clustersim.simulator.registry import PluginError
    try:
        cls = get(name)
    except KeyError as e:
        raise ConfigError(f"policy.name: {e.args[0]}") from None
    except PluginError as e:   # the installed package that provides it is broken: say which
        raise ConfigError(f"policy.name: {name!r}: {e}") from None
    return cls(**check_params(cls.__init__, params, "policy.{}"))


def arrival(job: JobView) -> tuple:
    """A job's place in arrival order: submission time, then its index in the trace."""
    return (job.submit_time, job.index)
