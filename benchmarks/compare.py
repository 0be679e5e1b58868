"""Before/after figures of suite cases, measured side by side: a base revision against the working tree.

    .venv/bin/python benchmarks/compare.py --base 64ab289 [cases ...] [--repeat 3] [--json PATH]
    .venv/bin/python benchmarks/compare.py --base main~3 itp-fifo startup-help startup-default

The base revision is checked out into a temporary ``git worktree`` (removed at the end); each
case runs alternately on the base and on the working tree (base, work, base, work, ...), so
that both sides see the same load on this shared machine, and the table gives the median of
each figure over ``--repeat`` rounds. The harness (benchmarks/suite.py of the working tree) is
the same for both sides; only the code it measures differs (PYTHONPATH). Pass
``--base-python`` when the base needs other dependencies than this venv's (its own venv).
Default cases: the light ones (itp-fifo, startup-help, startup-default, multirun).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from suite import ROOT, case_names, fmt, measure, verdict

DEFAULT = ["itp-fifo", "startup-help", "startup-default", "multirun"]


def worktree(rev: str, where: Path) -> str:
    """Check ``rev`` out at ``where``; its full commit id."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), commit], check=True)
    return commit


def measure_with(python: str | None, case: str, tree: Path, timeout: float) -> dict:
    """One measurement; with another interpreter, through suite.py run by it."""
    if python is None:
        return measure(case, tree, timeout)
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([python, str(Path(__file__).with_name("suite.py")), "--cases", case, "--tree", str(tree),
                        "--timeout", str(timeout), "--json", out.name], check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())["results"][case]


def medians(samples: list[dict]) -> dict:
    ok = [s for s in samples if "error" not in s and "status" not in s]
    if not ok:
        return samples[-1]
    keys = [k for k, v in ok[0].items() if isinstance(v, (int, float))]
    return {k: statistics.median(s[k] for s in ok) for k in keys} | {"n": len(ok)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="git revision to compare against (commit, branch, tag)")
    ap.add_argument("cases", nargs="*", help=f"suite cases (default: {' '.join(DEFAULT)}); suite.py --list")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per side (median over them)")
    ap.add_argument("--base-python", help="interpreter for the base side (default: this one)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", help="write both sides' samples and medians here")
    args = ap.parse_args()
    cases = args.cases or DEFAULT
    unknown = [c for c in cases if c not in case_names(full=True)]
    if unknown:
        raise SystemExit(f"compare: unknown case(s) {', '.join(unknown)}; suite.py --list shows them")
    with tempfile.TemporaryDirectory(prefix="clustersim-base-") as tmp:
        base_tree = Path(tmp) / "base"
        commit = worktree(args.base, base_tree)
        try:
            samples = run_rounds(cases, base_tree, args)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)], check=False)
    report(cases, samples, commit, args)


def run_rounds(cases: list[str], base_tree: Path, args) -> dict:
    samples = {case: {"base": [], "work": []} for case in cases}
    sides = (("base", base_tree, args.base_python), ("work", ROOT, None))
    for case in cases:
        for i in range(args.repeat):
            for side, tree, python in sides if i % 2 == 0 else sides[::-1]:   # neither side always goes first
                t0 = time.perf_counter()
                samples[case][side].append(measure_with(python, case, tree, args.timeout))
                print(f"  {case} {side} {i + 1}/{args.repeat}: {time.perf_counter() - t0:.1f} s", flush=True)
    return samples


def report(cases: list[str], samples: dict, commit: str, args) -> None:
    print(f"\nbase {args.base} ({commit[:10]}) vs working tree {ROOT}; median of {args.repeat}, alternating\n")
    print(f"{'case':<18} {'figure':<19} {'base':>12} {'work':>12} {'work/base':>10} {'target':>16} {'':>5}")
    out = {"base": commit, "repeat": args.repeat, "cases": {}}
    for case in cases:
        base, work = medians(samples[case]["base"]), medians(samples[case]["work"])
        out["cases"][case] = {"base": base, "work": work, "samples": samples[case]}
        if "n" not in base or "n" not in work:
            note = base.get("error") or base.get("status") or work.get("error") or work.get("status")
            print(f"{case:<18} {'-':<19} {'':>12} {'':>12} {'':>10} {'':>16} {'':>5}  {note}")
            continue
        for metric in (k for k in work if k in base and k.endswith(("_s", "_mib", "_us"))):   # not the counts
            target, status = verdict(case, metric, work[metric])
            ratio = work[metric] / base[metric] if base[metric] else float("nan")
            print(f"{case:<18} {metric:<19} {fmt(base[metric], metric):>12} {fmt(work[metric], metric):>12} "
                  f"{ratio:>10.2f} {target:>16} {status:>5}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
