"""`clustersim-reproduce --quick` (smaller traces, 2 seeds) keeps every result the full reproduction
reproduces: the same direction as the paper for a relative change or ratio; for a quantity without
a direction whose runs are the full ones (no quick overrides), the same verdict."""

from __future__ import annotations

import json
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
    checked = 0
    for key, c in full.items():
        if c["verdict"] != REPRODUCED:
            continue
        q = quick[key]
        if c["neutral"] is not None:
            assert direction(q["mean"], c["neutral"]) == direction(c["paper_value"], c["neutral"]), (key, q["values"])
            checked += 1
        elif not cases[key].quick:
            assert q["verdict"] == REPRODUCED, (key, q["values"])
            checked += 1
    assert checked > 0
