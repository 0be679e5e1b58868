"""``clustersim-reproduce``: run every reproduction case, collect, judge, write the JSON, page and figures.

    clustersim-reproduce [--only PAPER|PAPER.CASE ...] [--seeds N] [--quick] [--out DIR] [--publish]
                         [-- HYDRA_OVERRIDES ...]

Each configuration the selected cases need (a set of Hydra overrides) is swept over its seeds with
``clustersim -m`` into ``<out>/runs/<hash>/``: the ordinary sweep machinery, so an interrupted
reproduction resumes where it stopped (complete runs are skipped) and overrides after ``--``
(``hydra/launcher=joblib hydra.launcher.n_jobs=8``) apply to every sweep. Cases that are not trace
replays (``Case.compute``) run in this process. Then every case is computed per seed from that
seed's runs and judged (clustersim/reproduction.py); ``<out>/reproductions.json`` holds it all,
``<out>/reproductions.md`` and ``<out>/figures/`` are rendered from it. ``--publish`` also writes
them to docs/ (the committed page is generated, never typed). ``--quick``: smaller traces and 2
seeds (CI). Exit status 1 when a run failed.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

from clustersim.reproduction import (DEFAULT_SEEDS, QUICK_SEEDS, Case, Run, registry, select,
                                     summarise)
from clustersim.rundirs import run_hash
from clustersim.simulator.metrics import atomic_write

DOCS = Path(__file__).resolve().parent.parent / "docs"


def configs(cases: list[Case], seeds: int | None, quick: bool) -> dict[str, tuple[tuple[str, ...], int]]:
    """hash -> (overrides, seeds) of every configuration the cases need (shared ones once)."""
    out: dict[str, tuple[tuple[str, ...], int]] = {}
    for c in cases:
        for overrides in c.runs.values():
            o = overrides_of(c, overrides, quick)
            h = run_hash(o)
            out[h] = (o, max(out.get(h, ((), 0))[1], seeds_of(c, seeds, quick)))
    return out


def overrides_of(case: Case, overrides: tuple[str, ...], quick: bool) -> tuple[str, ...]:
    return (*overrides, *(case.quick if quick else ()), "progress=false")


def seeds_of(case: Case, seeds: int | None, quick: bool) -> int:
    if not case.per_seed:
        return 1
    return seeds or (QUICK_SEEDS if quick else case.seeds)


def sweep(overrides: tuple[str, ...], n_seeds: int, folder: Path, extra: list[str], log: Path) -> int:
    """``clustersim -m <overrides> seed=0..n-1`` into ``folder``; its output goes to ``log``."""
    cmd = [sys.executable, "-m", "clustersim.cli", "-m", *overrides,
           "seed=" + ",".join(str(s) for s in range(n_seeds)), f"hydra.sweep.dir={folder}", *extra]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        f.write("$ " + shlex.join(cmd) + "\n")
        f.flush()
        return subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def run_all(todo: dict[str, tuple[tuple[str, ...], int]], out: Path, extra: list[str]) -> list[str]:
    """Every configuration's sweep, one after another, under one progress bar over runs."""
    from tqdm import tqdm

    failures = []
    total = sum(n for _, n in todo.values())
    with tqdm(total=total, desc="reproduce", unit="run", file=sys.stderr, disable=None) as bar:
        done_before = 0
        for h, (overrides, n) in todo.items():
            folder = out / "runs" / h
            rc = sweep(overrides, n, folder, extra, out / "logs" / f"{h}.log")
            done_before += n
            bar.update(done_before - bar.n)
            if rc != 0:
                failures.append(f"{' '.join(overrides)}: a run failed (log: {out / 'logs' / f'{h}.log'})")
    return failures


def runs_by_seed(folder: Path) -> dict[int, Run]:
    """The complete runs of a sweep folder, by seed."""
    from clustersim.collect import scan

    out = {}
    for d in scan(folder).complete:
        meta = json.loads((d / "run.json").read_text())
        out[int(meta["config"]["seed"])] = Run(d, json.loads((d / "summary.json").read_text()))
    return out


def evaluate(case: Case, out: Path, seeds: int | None, quick: bool) -> dict:
    """One case's values per seed and its verdict."""
    n = seeds_of(case, seeds, quick)
    values: dict[int, float | None] = {}
    errors = []
    if case.compute is not None:
        from clustersim.simulator.errors import ConfigError, PolicyError, TraceError, UnfinishedJobsError
        for s in range(n):
            try:
                values[s] = float(case.compute(s, quick, out / "computed"))
            except (ConfigError, TraceError, PolicyError, UnfinishedJobsError) as e:   # a run that failed
                values[s] = None
                errors.append((s, f"the run failed: {e}"))
    else:
        by_label = {label: runs_by_seed(out / "runs" / run_hash(overrides_of(case, o, quick)))
                    for label, o in case.runs.items()}
        for s in range(n):
            missing = [label for label, r in by_label.items() if s not in r]
            if missing:
                values[s] = None
                errors.append((s, f"no complete run of {', '.join(missing)}"))
                continue
            try:
                values[s] = float(case.metric({label: r[s] for label, r in by_label.items()}))
            except (KeyError, ZeroDivisionError, ValueError) as e:
                values[s] = None
                errors.append((s, str(e)))
    result = summarise(case, values)
    result["notes"] += grouped(errors)
    result["seeds"] = n
    return result


def grouped(errors: list[tuple[int, str]]) -> list[str]:
    """One note per distinct message, naming the seeds it happened at."""
    by_text: dict[str, list[int]] = {}
    for seed, text in errors:
        by_text.setdefault(text, []).append(seed)
    return [f"seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))}: {t}" for t, s in by_text.items()]


def provenance() -> dict:
    """The commit the results come from (and whether the tree had changes)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    commit = git("rev-parse", "--short=12", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {"commit": commit or None, "dirty": dirty}


def cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def write_outputs(results: dict, out: Path, publish: bool) -> None:
    from clustersim.reproduction_page import render, write_figures

    folders = [(out, "figures")] + ([(DOCS, "figures/reproductions")] if publish else [])
    for folder, figs in folders:
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(results, indent=1, sort_keys=True) + "\n"
        atomic_write(folder / "reproductions.json", lambda p: Path(p).write_text(text))
        write_figures(results, folder / figs)
        page = render(results, figures=figs)
        atomic_write(folder / "reproductions.md", lambda p: Path(p).write_text(page))


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(prog="clustersim-reproduce", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", metavar="PAPER|CASE", help="papers (edl, sidecar, ...) or paper.case keys")
    ap.add_argument("--seeds", type=int, help=f"seeds per case (default {DEFAULT_SEEDS}; --quick: {QUICK_SEEDS})")
    ap.add_argument("--quick", action="store_true", help="smaller traces and 2 seeds (CI)")
    ap.add_argument("--out", default="runs/reproduce", help="where runs and results go (default runs/reproduce)")
    ap.add_argument("--publish", action="store_true", help="also write docs/reproductions.{json,md} and its figures")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    a = ap.parse_args(argv)
    if a.seeds is not None and a.seeds < 1:
        ap.error("--seeds must be at least 1")
    if a.publish and (a.quick or a.only or a.seeds):
        ap.error("--publish writes the full reproduction: not with --quick, --only or --seeds")
    return a, extra


def main(argv: list[str] | None = None) -> int:
    a, extra = parse(sys.argv[1:] if argv is None else argv)
    cases = select(registry(), a.only)
    if a.list:
        for c in cases:
            print(f"{c.key:40s} {c.where:22s} {c.quantity}")
        return 0
    out = Path(a.out) / ("quick" if a.quick else "full")
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    failures = run_all(configs(cases, a.seeds, a.quick), out, extra)
    results = {
        "command": "clustersim-reproduce " + shlex.join(sys.argv[1:] if argv is None else argv),
        **provenance(), "quick": a.quick,
        "cases": [evaluate(c, out, a.seeds, a.quick) for c in cases],
        "cpu_s": round(cpu_seconds() - cpu0, 1), "wall_s": round(time.perf_counter() - t0, 1),
        "failures": failures,
    }
    from clustersim.reproductions import not_reproducible
    results["not_reproducible"] = not_reproducible()
    write_outputs(results, out, a.publish)
    print(f"clustersim-reproduce: {len(results['cases'])} cases, {results['cpu_s']:.0f} s CPU -> "
          f"{out / 'reproductions.md'}", file=sys.stderr)
    for f in failures:
        print(f"clustersim-reproduce: error: {f}", file=sys.stderr)
    return 1 if failures else 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
