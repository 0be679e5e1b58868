"""The reproduction harness: verdicts worked by hand, the registry's cases well-formed, the committed
page rendered from the committed results, and a small reproduction end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim import reproduce
from clustersim.reproduction import (DIRECTION_ONLY, NOT_REPRODUCED, REPRODUCED, WRONG_DIRECTION, Case, Run,
                                     change, ratio, registry, select, summarise, verdict)
from clustersim.reproduction_page import render

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("paper, ours, neutral, expected", [
    (-89.5, -80.0, 0.0, REPRODUCED),        # |-80 + 89.5| = 9.5 <= 0.2 * 89.5 = 17.9
    (-89.5, -71.6, 0.0, REPRODUCED),        # 17.9: on the edge
    (-89.5, -19.1, 0.0, DIRECTION_ONLY),    # same sign, 70.4 off
    (-89.5, 11.8, 0.0, WRONG_DIRECTION),
    (2.39, 1.36, 1.0, DIRECTION_ONLY),      # a ratio: above 1 both, 1.03 off (> 0.478)
    (2.39, 2.10, 1.0, REPRODUCED),          # 0.29 <= 0.478
    (2.39, 0.90, 1.0, WRONG_DIRECTION),
    (702.0, 827.0, None, REPRODUCED),       # no direction: 125 <= 140.4
    (702.0, 900.0, None, NOT_REPRODUCED),   # 198 > 140.4
    (0.0, 0.0, None, REPRODUCED),           # a count of zero reproduced only by zero
    (0.0, 1.0, None, NOT_REPRODUCED),
    (-45.0, None, 0.0, NOT_REPRODUCED),
])
def test_verdicts_worked_by_hand(paper, ours, neutral, expected):
    assert verdict(paper, ours, neutral) == expected


def _case(**kw) -> Case:
    base = dict(name="c", paper="edl", where="§0", quantity="q", paper_value=-10.0, runs={"a": ("x=1",)},
                metric=lambda r: 0.0)
    return Case(**{**base, **kw})


def test_summary_gives_mean_range_and_flags_a_deterministic_workload():
    s = summarise(_case(), {0: -12.0, 1: -6.0, 2: -9.0})
    assert (s["mean"], s["min"], s["max"]) == (-9.0, -12.0, -6.0)
    assert s["verdict"] == REPRODUCED and s["notes"] == []
    same = summarise(_case(), {0: -4.0, 1: -4.0})
    assert same["verdict"] == DIRECTION_ONLY
    assert same["notes"] == ["every seed gives the same number: the workload is deterministic"]
    missing = summarise(_case(), {0: -10.0, 1: None})
    assert missing["mean"] == -10.0 and missing["notes"] == ["1 of 2 seeds gave no value"]


def test_metrics_compare_runs_of_the_same_seed():
    runs = {"new": Run(Path("."), {"jct_mean": 75.0, "makespan": 300.0}),
            "old": Run(Path("."), {"jct_mean": 100.0, "makespan": 200.0})}
    assert change("jct_mean", "new", "old")(runs) == pytest.approx(-25.0)
    assert ratio("makespan", "new", "old")(runs) == pytest.approx(1.5)


def test_a_case_needs_runs_and_a_metric_or_a_compute_function():
    with pytest.raises(ValueError):
        _case(metric=None)
    with pytest.raises(ValueError):
        _case(compute=lambda s, q, w: 1.0)


def test_every_case_is_well_formed_and_its_runs_compose():
    from clustersim.experiment import check, compose

    cases = registry()
    keys = [c.key for cs in cases.values() for c in cs]
    assert len(keys) == len(set(keys))
    assert {"edl", "sidecar", "optimus", "dlrover", "peers"} <= set(cases)
    composed = set()
    for cs in cases.values():
        for c in cs:
            assert c.where and c.quantity and c.unit
            for overrides in c.runs.values():
                o = reproduce.overrides_of(c, overrides, quick=True)
                if o not in composed:   # every configuration a case runs is a valid config
                    check(compose(list(o)))
                    composed.add(o)


def test_only_names_papers_or_cases_and_rejects_others():
    cases = registry()
    assert {c.paper for c in select(cases, ["edl"])} == {"edl"}
    assert [c.key for c in select(cases, ["sidecar.fig6_W1_makespan_vs_default"])] == ["sidecar.fig6_W1_makespan_vs_default"]
    with pytest.raises(SystemExit, match="no such paper or case"):
        select(cases, ["nosuch"])


def test_the_committed_page_is_rendered_from_the_committed_results():
    results = json.loads((DOCS / "reproductions.json").read_text())
    assert render(results, figures="figures/reproductions") == (DOCS / "reproductions.md").read_text(), \
        "docs/reproductions.md is not what docs/reproductions.json renders to: run `make reproduce`"
    assert not results["quick"] and results["cpu_s"] > 0
    for paper in {c["paper"] for c in results["cases"]}:
        assert (DOCS / "figures" / "reproductions" / f"{paper}.png").is_file()


def test_a_small_reproduction_end_to_end_resumes_and_writes_results(tmp_path):
    only = ["--only", "peers.pollux_w1_tiresias_mean_jct", "--seeds", "2", "--out", str(tmp_path)]
    assert reproduce.main(only) == 0
    res = json.loads((tmp_path / "full" / "reproductions.json").read_text())
    (case,) = res["cases"]
    assert case["seeds"] == 2 and set(case["values"]) == {"0", "1"}
    assert case["verdict"] in (REPRODUCED, NOT_REPRODUCED)
    assert case["paper_value"] == pytest.approx(2473.65, abs=0.01)   # the peer's published mean (summary.json)
    assert abs(case["mean"] - 2473.65) < 0.01 * 2473.65            # docs/peers/pollux.md: within 1%
    assert (tmp_path / "full" / "reproductions.md").read_text().startswith("# Reproductions")
    assert (tmp_path / "full" / "figures" / "peers.png").is_file()
    # a second invocation finds both runs complete and skips them (the sweep's resume)
    assert reproduce.main(only) == 0
    logs = list((tmp_path / "full" / "logs").glob("*.log"))
    assert logs and all(log.read_text().count("complete: skipped") == 2 for log in logs)
    # the same runs on a launcher of parallel workers give the same values
    par = tmp_path / "joblib"
    assert reproduce.main([*only[:-1], str(par), "--", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]) == 0
    assert json.loads((par / "full" / "reproductions.json").read_text())["cases"][0]["values"] == case["values"]
