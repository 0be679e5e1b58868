"""The configuration surface under fuzzing: every key of every choice of every config group (and an
unknown key beside them) set to out-of-range, wrong-type and extreme values. Each config must end in
a valid run or in one user error (ConfigError, TraceError, PolicyError, UnfinishedJobsError: what
``clustersim`` prints as one line and exit 1), within a small budget: never another exception (a
traceback), never a run that goes on and on.

In process (the command's path: ``experiment.run`` on the checked config) with a bounded number of
examples, derandomized so CI sees the same ones every time."""

import math
import time
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.experiment import GROUPS, compose, run
from clustersim.simulator.errors import ConfigError, OutputError, PolicyError, TraceError, UnfinishedJobsError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
USER_ERRORS = (ConfigError, TraceError, PolicyError, UnfinishedJobsError, OutputError)
BUDGET_S = 30.0   # wall time one example may take, load and run (each takes ~0.1-3 s)
LIMITS = {"max_events": 20_000}   # the engine's runaway guard, tightened: a run ends or fails within it

# Choices whose inputs are large (tens of thousands of jobs) are fuzzed through the same trace keys on
# the small traces; the others are fuzzed on themselves.
HEAVY_TRACES = {"elasticflow_all", "elasticflow_raw", "philly_pollux", "openb", "helios", "philly"}
# Runs a group choice makes sense in (a PS policy on a CPU cluster with PS jobs); else the defaults.
BASES = [
    ["trace=synthetic_dlrover", "trace.options.jobs=6", "cluster=cpu_ps", "policy=dlrover", "overhead=dlrover_flash"],
    ["trace=synthetic_optimus", "trace.options.jobs=8", "cluster=optimus_testbed", "policy=optimus"],
    ["trace=synthetic_sidecar", "cluster=sidecar_testbed", "policy=sidecar", "overhead=sidecar"],
]
EXTREMES = [-1, 0, 1, -1e300, 1e300, 1e12, 2**63, 1e-300, math.nan, math.inf, -math.inf, "abc", "", True, None,
            [], {}, [1e300], [-1], {"x": 1}]


def choices(group: str) -> list[str]:
    names = sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))
    return [n for n in names if not (group == "trace" and n in HEAVY_TRACES)]


def base_for(group: str, choice: str) -> list[str]:
    for b in BASES:
        if f"{group}={choice}" in b:
            return b
    return [f"{group}={choice}"]


@cache
def composed(group: str, choice: str) -> dict:
    """The plain config a run of this choice uses (composed once per choice)."""
    from omegaconf import OmegaConf

    c = OmegaConf.to_container(compose(base_for(group, choice)), resolve=True)
    c.pop("hydra", None)
    opts = (c["trace"].get("options") or {})
    if c["trace"].get("format") == "synthetic" and "jobs" in opts and opts["jobs"] > 20:
        opts["jobs"] = 20   # a small workload: the fuzz is about the config, not about scale
    c["limits"] = {**(c.get("limits") or {}), **LIMITS}
    c["progress"] = False
    return c


def leaves(node, path=()):
    """Every key path of a config node (dict keys and list positions), the containers included."""
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, (*path, i))


def with_value(c: dict, path: tuple, value) -> dict:
    import copy

    c = copy.deepcopy(c)
    node = c
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return c


SURFACE = [(g, ch) for g in (*GROUPS, None) for ch in (choices(g) if g else ["top"])]


@st.composite
def mutated(draw):
    group, choice = draw(st.sampled_from(SURFACE))
    c = composed(group, choice) if group else composed("trace", "tiresias_60")
    root = (group,) if group else ()
    node = c[group] if group else {k: v for k, v in c.items() if k not in GROUPS}
    paths = [p for p in leaves(node) if p]
    if draw(st.integers(0, 4)) == 0:   # an unknown key beside the others (``+group.nosuch=1``)
        parent = draw(st.sampled_from([p for p in leaves(node) if isinstance(_get(node, p), dict)]))
        path, value = (*root, *parent, "nosuch"), 1
    else:
        path, value = (*root, *draw(st.sampled_from(paths))), draw(st.sampled_from(EXTREMES))
    return ".".join(map(str, path)), with_value(c, path, value)


def _get(node, path):
    for k in path:
        node = node[k]
    return node


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=mutated())
def test_every_key_with_a_bad_value_is_a_one_line_error_or_a_valid_run(case, tmp_path_factory):
    key, cfg = case
    t0 = time.perf_counter()
    try:
        summary, _ = run(cfg, tmp_path_factory.mktemp("run"))
    except USER_ERRORS as e:
        assert str(e) and "\n" not in str(e).strip(), (key, str(e))
    except Exception as e:   # the command would print a traceback
        pytest.fail(f"{key}: {type(e).__name__}: {e}")
    else:
        assert summary["jobs"] >= 0
    assert time.perf_counter() - t0 < BUDGET_S, key


def test_the_surface_covers_every_group_and_its_choices():
    groups = {g for g, _ in SURFACE}
    assert groups == {*GROUPS, None}
    assert {ch for g, ch in SURFACE if g == "policy"} == {p.stem for p in (CONFIGS / "policy").glob("*.yaml")}
    n_keys = sum(len([p for p in leaves(composed(g, ch)[g]) if p]) for g, ch in SURFACE if g in ("policy", "cluster"))
    assert n_keys > 200   # the policy and cluster groups alone hold hundreds of keys
