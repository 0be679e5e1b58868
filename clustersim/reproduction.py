"""Reproduction cases: a paper's published figure, the runs that reproduce it, and the verdict.

A :class:`Case` names the paper, where the figure is printed (section, table, figure), the quantity
in words, the paper's value, and how ours is obtained: either the Hydra overrides of the runs it
needs (``runs``: a label per configuration, each run over the case's seeds through the ordinary
sweep machinery) and a ``metric`` computed per seed from those runs, or, for an experiment that is
not a trace replay (a bisection, a hand-built pair of jobs), a ``compute`` function of the seed.

Per seed the metric is computed from the runs *of that seed* (paired: seeds differ in workload),
then summarised as the mean and the min–max over seeds. The verdict compares the mean with the
paper's value: **reproduced** (same direction and within ``TOLERANCE`` of the paper's value),
**direction only** (same direction, further off), **wrong direction**; a quantity without a
direction (an absolute time) is **reproduced** or **not reproduced**. The direction is the side of
the case's ``neutral`` value (0 for a relative change, 1 for a ratio) the value falls on.

The calibration rule (docs/reproductions.md): a setup parameter a paper does not give may be fixed
from the paper's *baseline* figures only; each case lists what was calibrated and on what
(``calibrated``), and its ``departures`` say where and why our inputs differ from the paper's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable

TOLERANCE = 0.20          # "within 20% of the paper's value" (the reproduction issue's yardstick)
DEFAULT_SEEDS = 5
QUICK_SEEDS = 2

REPRODUCED, DIRECTION_ONLY, WRONG_DIRECTION, NOT_REPRODUCED = (
    "reproduced", "direction only", "wrong direction", "not reproduced")


@dataclass
class Run:
    """One complete run of a case's configuration: its summary, and its tables read on demand."""

    dir: Path
    summary: dict

    def table(self, name: str):
        """``jobs``, ``events`` or ``timeline`` as a pandas DataFrame."""
        import pyarrow.parquet as pq
        return pq.read_table(self.dir / f"{name}.parquet").to_pandas()

    @cached_property
    def jobs(self):
        return self.table("jobs")

    @cached_property
    def events(self):
        return self.table("events")


@dataclass(frozen=True)
class Case:
    """One published figure and how this simulator reproduces it."""

    name: str                      # unique within its paper, e.g. "table4_mean_jct"
    paper: str                     # the paper module's key, e.g. "edl"
    where: str                     # "§6.3, Table 4"
    quantity: str                  # in words: "mean JCT of elastic_tiresias relative to tiresias"
    paper_value: float
    unit: str = "%"                # "%" (a relative change, in percent), "x" (a ratio), or a unit
    neutral: float | None = 0.0    # the value of "no effect"; None: the quantity has no direction
    runs: dict[str, tuple[str, ...]] = field(default_factory=dict)   # label -> Hydra overrides
    metric: Callable[[dict[str, Run]], float] | None = None          # per seed, from that seed's runs
    compute: Callable[[int, bool, Path], float] | None = None        # (seed, quick, workdir) -> value
    quick: tuple[str, ...] = ()    # overrides added to every run under --quick (smaller traces)
    seeds: int = DEFAULT_SEEDS
    departures: str = ""           # why ours differs from the paper, with links to the doc pages
    calibrated: str = ""           # which setup parameters were fixed, and on which baseline figure
    per_seed: bool = True          # False: the experiment has no randomness (one run stands for all)

    @property
    def key(self) -> str:
        return f"{self.paper}.{self.name}"

    def __post_init__(self):
        if (self.metric is None) == (self.compute is None):
            raise ValueError(f"{self.key}: give either runs and a metric, or a compute function")
        if self.metric is not None and not self.runs:
            raise ValueError(f"{self.key}: a metric needs runs")


def direction(value: float, neutral: float | None) -> int:
    """+1 above the neutral value, -1 below, 0 on it (or no direction)."""
    if neutral is None or value is None or math.isclose(value, neutral, abs_tol=1e-12):
        return 0
    return 1 if value > neutral else -1


def verdict(paper: float, ours: float | None, neutral: float | None) -> str:
    if ours is None or not math.isfinite(ours):
        return NOT_REPRODUCED
    close = abs(ours - paper) <= TOLERANCE * abs(paper) * (1 + 1e-9)   # a value on the edge counts
    if neutral is None:
        return REPRODUCED if close else NOT_REPRODUCED
    if direction(ours, neutral) != direction(paper, neutral):
        return WRONG_DIRECTION
    return REPRODUCED if close else DIRECTION_ONLY


def summarise(case: Case, values: dict[int, float | None]) -> dict:
    """A case's result: its values per seed, their mean and range, the verdict and its notes."""
    got = [v for v in values.values() if v is not None and math.isfinite(v)]
    mean = sum(got) / len(got) if got else None
    notes = []
    if len(got) < len(values):
        notes.append(f"{len(values) - len(got)} of {len(values)} seeds gave no value")
    if len(got) > 1 and max(got) - min(got) <= 1e-9 * max(1.0, abs(mean)):
        notes.append("every seed gives the same number: the workload is deterministic")
    return {
        "key": case.key, "paper": case.paper, "name": case.name, "where": case.where,
        "quantity": case.quantity, "unit": case.unit, "paper_value": case.paper_value,
        "neutral": case.neutral,
        "values": {str(s): v for s, v in sorted(values.items())},
        "mean": mean, "min": min(got) if got else None, "max": max(got) if got else None,
        "verdict": verdict(case.paper_value, mean, case.neutral),
        "notes": notes, "departures": case.departures, "calibrated": case.calibrated,
        "runs": {k: list(v) for k, v in case.runs.items()},
    }


# ------------------------------------------------------------------ metric helpers


def change(stat: str, proposed: str, baseline: str) -> Callable[[dict[str, Run]], float]:
    """``stat`` of the ``proposed`` runs relative to the ``baseline`` runs, in percent."""
    def metric(runs: dict[str, Run]) -> float:
        return 100.0 * (_stat(runs[proposed], stat) / _stat(runs[baseline], stat) - 1.0)
    metric.__doc__ = f"{stat}: {proposed} vs {baseline}, %"
    return metric


def ratio(stat: str, numerator: str, denominator: str) -> Callable[[dict[str, Run]], float]:
    """``stat`` of ``numerator`` over ``denominator``."""
    def metric(runs: dict[str, Run]) -> float:
        return _stat(runs[numerator], stat) / _stat(runs[denominator], stat)
    metric.__doc__ = f"{stat}: {numerator} / {denominator}"
    return metric


def value(stat: str, label: str, scale: float = 1.0) -> Callable[[dict[str, Run]], float]:
    """``stat`` of the ``label`` runs (times ``scale``)."""
    def metric(runs: dict[str, Run]) -> float:
        return scale * _stat(runs[label], stat)
    metric.__doc__ = f"{stat} of {label}"
    return metric


def _stat(run: Run, stat: str) -> float:
    v = run.summary.get(stat)
    if v is None:
        raise KeyError(f"{run.dir}: summary has no {stat!r}")
    return float(v)


# ------------------------------------------------------------------ the registry

PAPERS = {   # key -> (title, module under clustersim.reproductions)
    "edl": "EDL: Elastic Deep Learning in Multi-Tenant GPU Clusters (Wu et al.)",
    "sidecar": "SideCar: elastic GPU jobs with early initialisation (SC20)",
    "optimus": "Optimus: an efficient dynamic resource scheduler for DL clusters (EuroSys '18)",
    "dlrover": "DLRover-RM / DLRover: resource management for DLRM training jobs",
    "peers": "Peer simulators' own workloads and published figures",
}


def registry() -> dict[str, list[Case]]:
    """Every paper's cases, in the order their modules list them."""
    from importlib import import_module

    out = {}
    for paper in PAPERS:
        mod = import_module(f"clustersim.reproductions.{paper}")
        out[paper] = list(mod.CASES)
        for c in out[paper]:
            if c.paper != paper:
                raise ValueError(f"{c.key}: listed by {paper}")
    return out


def select(cases: dict[str, list[Case]], only: list[str] | None) -> list[Case]:
    """The cases named by ``only`` (papers or ``paper.case`` keys); all when None."""
    flat = [c for cs in cases.values() for c in cs]
    if not only:
        return flat
    known = set(cases) | {c.key for c in flat}
    bad = [o for o in only if o not in known]
    if bad:
        raise SystemExit(f"clustersim-reproduce: --only {bad[0]!r}: no such paper or case; papers: "
                         f"{', '.join(cases)}; cases: {', '.join(sorted(c.key for c in flat))}")
    return [c for c in flat if c.paper in only or c.key in only]


def load_results(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
