"""The incremental state Elastic-Tiresias and SideCar decide on: it must answer exactly what the
full recomputation over every running job answered (the policies' outputs stay byte-identical)."""

import random
from types import SimpleNamespace

from clustersim.policies.elastic_tiresias import Planned
from clustersim.policies.sidecar import _Finishes


def test_finishes_latest_and_latest_but_one_match_a_full_pass():
    rng = random.Random(7)
    for trial in range(300):
        n = rng.randint(0, 6)
        # few distinct values, so that ties (two jobs finishing at once) are frequent
        at = {f"j{i}": float(rng.choice([10, 20, 30, 30, 40])) for i in range(n)}
        f = _Finishes(now=5.0)
        for jid, t in at.items():
            f.add(jid, t)
        assert f.max == max(at.values(), default=5.0)
        for jid in list(at) + ["absent"]:
            others = [t for k, t in at.items() if k != jid]
            assert f.max_except(jid) == max(others, default=5.0), (trial, at, jid)


def test_finishes_by_hand():
    # a: 30, b: 50, c: 50 -> the latest is 50; without b it is still 50 (c); without a, 50
    f = _Finishes(now=0.0)
    for jid, t in (("a", 30.0), ("b", 50.0), ("c", 50.0)):
        f.add(jid, t)
    assert (f.max, f.max_except("b"), f.max_except("a")) == (50.0, 50.0, 50.0)
    # one job only: without it nothing finishes later than now
    g = _Finishes(now=7.0)
    g.add("a", 30.0)
    assert (g.max, g.max_except("a")) == (30.0, 7.0)


def test_planned_reads_the_view_unless_the_decision_changed_it():
    running = {"a": SimpleNamespace(allocation={"w": {0: 2}}), "b": SimpleNamespace(allocation={"w": {1: 4}})}
    p = Planned(running)
    assert set(p) == {"a", "b"} and p["a"] == {"w": {0: 2}} and bool(p)
    p["b"] = {"w": {1: 2}}              # shrunk by the decision
    p["c"] = {"w": {2: 1}}              # started by the decision
    p.pop("a")                          # stopped by the decision
    assert "a" not in p and "b" in p and "c" in p
    assert p["b"] == {"w": {1: 2}} and running["b"].allocation == {"w": {1: 4}}   # the view untouched
    assert sorted(p) == ["b", "c"]
    p.pop("b")
    p.pop("c")
    assert not p and list(p) == []
