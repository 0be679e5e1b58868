"""`clustersim-reproduce --quick` (smaller traces, 2 seeds) against the committed full reproduction:
every case the full run reproduces keeps the paper's direction, and a case whose runs are the full
ones (no quick overrides) gives, seed for seed, exactly the full run's values (same config and seed:
the same result)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from clustersim import reproduce
from clustersim.reproduction import REPRODUCED, direction, registry

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_quick_reproduction_keeps_what_the_full_one_reproduces(tmp_path):
    full = {c["key"]: c for c in json.loads((DOCS / "reproductions.json").read_text())["cases"]}
    cases = {c.key: c for cs in registry().values() for c in cs}
    assert set(full) == set(cases), "docs/reproductions.json is stale: run `make reproduce`"
    assert reproduce.main(["--quick", "--out", str(tmp_path)]) == 0
    quick = {c["key"]: c for c in json.loads((tmp_path / "quick" / "reproductions.json").read_text())["cases"]}
    assert set(quick) == set(full)
    directions = same_runs = 0
    for key, c in full.items():
        q = quick[key]
        if c["verdict"] == REPRODUCED and c["neutral"] is not None:
            assert direction(q["mean"], c["neutral"]) == direction(c["paper_value"], c["neutral"]), (key, q["values"])
            directions += 1
        if cases[key].runs and not cases[key].quick:   # the very runs of the full reproduction, fewer seeds
            for seed, v in q["values"].items():
                want = c["values"][seed]
                assert (v is None and want is None) or math.isclose(v, want, rel_tol=1e-12), (key, seed, v, want)
            same_runs += 1
    assert directions > 0 and same_runs > 0
