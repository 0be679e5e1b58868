"""Figures v2: what a reader of a paper relies on — titles that say what was run, axes with
units, no offset multiplier, one order and one colour per policy, ratios paired by seed."""

import re

import matplotlib
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

matplotlib.use("Agg")

from clustersim import analysis  # noqa: E402
from clustersim.experiment import compose, run  # noqa: E402
from clustersim.style import color  # noqa: E402

UNIT = re.compile(r"\((s|min|h|days|%|jobs|GPUs|min, log scale|s, log scale|h, log scale)\)")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    for policy in ("srtf", "fifo", "tiresias"):
        for seed in (0, 1):
            run(compose([f"policy={policy}", f"seed={seed}", "progress=false"]), root / f"{policy}_s{seed}")
    return analysis.load(root)


def structure(fig):
    """(title texts, x labels, y labels, offset texts) of a drawn figure."""
    fig.canvas.draw()
    titles = [fig._suptitle.get_text()] if fig._suptitle else []
    titles += [a.get_title() for a in fig.axes if a.get_title()]
    offsets = [t for a in fig.axes for t in (a.xaxis.get_offset_text().get_text(), a.yaxis.get_offset_text().get_text())
               if t]
    return titles, [a.get_xlabel() for a in fig.axes if a.get_xlabel()], \
        [a.get_ylabel() for a in fig.axes if a.get_ylabel()] + ([fig._supylabel.get_text()] if fig._supylabel else []), \
        offsets


def test_every_standard_figure_has_a_title_units_and_no_offset_text(sweep, tmp_path):
    context = analysis.describe(sweep.runs)
    assert context.startswith("trace tiresias_60 · cluster n2g4 (8 GPUs) · sweep ") and context.endswith(" · 2 seeds")
    figs = {
        "summary": analysis.sweep_summary(sweep),
        "cdf": analysis.jct_cdf(sweep.jobs),
        "bars": analysis.metric_bars(sweep.runs),
        "util": analysis.over_time(sweep.timelines, "gpu_util", jobs=sweep.jobs),
        "queue": analysis.over_time(sweep.timelines, "pending", jobs=sweep.jobs),
        "gantt": analysis.gantt(sweep.root / "fifo_s0"),
        "heat": analysis.gantt(sweep.root / "fifo_s0", max_jobs=10),
    }
    for name, fig in figs.items():
        titles, xlabels, ylabels, offsets = structure(fig)
        assert titles and all(t.strip() for t in titles), (name, titles)
        assert offsets == [], (name, offsets)   # no "1e6" or "+4.3e6" over an axis
        for label in xlabels:
            if "job (in arrival order)" not in label and label not in ("",):
                assert UNIT.search(label) or "ratio" in label, (name, label)
        for label in ylabels:
            assert UNIT.search(label) or "fraction" in label or "ratio" in label or "÷" in label \
                or "arrival order" in label, (name, label)
    # time axes count from the first arrival, in a unit that keeps them small
    assert figs["util"].axes[-1].get_xlabel() == "time since the first arrival (min)"   # ~96 min: under 3 h
    assert figs["util"].axes[-1].get_xlim()[0] == 0
    # the Gantt of 60 jobs stays within a page; the heat map is a picture, not 60 bars
    assert figs["gantt"].get_size_inches()[1] <= 8.0
    assert len(figs["heat"].axes[0].images) == 1 and len(figs["heat"].axes[0].patches) == 0


def test_one_order_and_one_colour_per_policy_in_every_figure(sweep):
    names = analysis.order(sweep.runs)
    # the baseline first, oracles (srtf reads the true remaining work) last
    assert names == ["fifo", "tiresias", "srtf"]
    assert analysis.order(sweep.jobs) == names
    cdf = analysis.jct_cdf(sweep.jobs)
    assert [ln.get_label() for ln in cdf.axes[0].get_lines()] == names
    assert [ln.get_color() for ln in cdf.axes[0].get_lines()] == [color(n) for n in names]
    util = analysis.over_time(sweep.timelines, "gpu_util", jobs=sweep.jobs)
    assert [a.texts[0].get_text() for a in util.axes] == names
    from clustersim import policies
    assert len({color(n) for n in policies.names()}) == len(policies.names())   # no two policies share one


def test_paired_ratios_are_taken_seed_by_seed():
    # seed 0: fifo 100 s, tiresias 50 s -> 0.5; seed 1: fifo 400 s, tiresias 300 s -> 0.75
    runs = pd.DataFrame({"policy": ["fifo", "fifo", "tiresias", "tiresias"], "seed": [0, 1, 0, 1],
                         "jct_mean": [100.0, 400.0, 50.0, 300.0]})
    r = analysis.paired(runs, "jct_mean").sort_values(["config", "seed"])
    assert r["ratio"].tolist() == [1.0, 1.0, 0.5, 0.75]
    # unpaired, tiresias (175 ± 177) and fifo (250 ± 212) overlap; paired, tiresias wins in both seeds
    fig = analysis.metric_bars(runs, ["jct_mean"])
    rel = fig.axes[1]
    assert [round(p.get_height(), 3) for p in rel.patches] == [1.0, 0.625]


def test_the_heat_map_holds_the_gpus_of_each_row_of_jobs(tmp_path):
    # job a holds 2 GPUs over [0, 10); job b arrives at 2 and holds 4 GPUs over [5, 10)
    pq.write_table(pa.table({"job_id": ["a", "b"], "submit_time": [0.0, 2.0], "first_start": [0.0, 5.0],
                             "end_time": [10.0, 10.0]}), tmp_path / "jobs.parquet")
    pq.write_table(pa.table({"time": [0.0, 5.0, 10.0, 10.0], "job_id": ["a", "b", "a", "b"],
                             "gpus_after": [2.0, 4.0, 0.0, 0.0]}), tmp_path / "events.parquet")
    fig = analysis.gantt(tmp_path, max_jobs=1)
    held = np.asarray(fig.axes[0].images[0].get_array())
    assert held.shape == (2, 400)
    assert set(held[0]) == {2.0}                                          # a, all through
    assert set(held[1][:200]) == {0.0} and set(held[1][200:]) == {4.0}   # b from t = 5 (column 200 of 400)
