"""The performance suite: every target of the performance issue, measured and checked (ok/MISS).

    .venv/bin/python benchmarks/suite.py [--full] [--cases itp-fifo,startup-help] [--json PATH]
                                         [--tree DIR] [--list]

Cases (each heavy one in a fresh subprocess, so its peak RSS is its own):
  itp-<policy>       the ten ElasticFlow ITP clusters (69,351 jobs) under fifo, tiresias, srtf, drf,
                     tetris, optimus, elastic_tiresias, sidecar, replayed by benchmarks/elasticflow_fifo.py's
                     ``replay`` (wall = load + build + engine + summary, all ten); itp-fifo also
                     gives the FIFO loop's events/s
  table4-<policy>    EDL Table 4 on the 82,247 real Philly jobs (+experiment=edl_table4_philly_elastic,
                     160 GPUs, every GPU job elastic) under elastic_tiresias or tiresias_edl
  decision           Tiresias's per-decision time with 1,000 running (benchmarks/policy_decision.py,
                     when the tree has it)
  startup-help       ``clustersim --help``, whole process, median of 5 (after one warm-up)
  startup-default    ``clustersim`` (the default experiment), whole process, median of 5, in a temp dir
  multirun           ``clustersim -m seed=0..7``: (process wall - the runs' own wall_time_s) / 8
  scale-<p>-<n>      synthetic Philly (trace=synthetic_philly, trace.options.jobs=n) on cluster=auto8;
                     n in 1k, 10k, 100k (+1m with --full, and 10m for fifo); p = fifo (+ tiresias
                     with --full); the fitted exponent is the slope of log(wall) against log(jobs)

``--tree DIR`` measures the code of another checkout (PYTHONPATH=DIR) with this harness; the
command itself is the tree's ``clustersim`` console script (read from its pyproject.toml).
The machine is shared and noisy: compare two commits with benchmarks/compare.py, side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
POLICIES = ("fifo", "tiresias", "srtf", "drf", "tetris", "optimus", "elastic_tiresias", "sidecar")
SCALES = {"1k": 1_000, "10k": 10_000, "100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
FULL_ONLY = ("1m", "10m")   # the long points: with --full only (10m: FIFO only)
STARTUP_RUNS = 5
SWEEP_SEEDS = 8

# targets of the performance issues: (case, metric) -> (comparison, bound, unit). cpu_s: the worker's
# CPU seconds (load + build + engine + summary); events_per_s: events / engine CPU seconds
TARGETS = {
    ("itp-fifo", "cpu_s"): ("<=", 4.0, "s"),
    ("itp-tiresias", "cpu_s"): ("<=", 8.0, "s"),
    ("itp-srtf", "cpu_s"): ("<=", 15.0, "s"),
    ("itp-drf", "cpu_s"): ("<=", 15.0, "s"),
    ("itp-tetris", "cpu_s"): ("<=", 15.0, "s"),
    ("itp-optimus", "cpu_s"): ("<=", 15.0, "s"),
    ("itp-elastic_tiresias", "cpu_s"): ("<=", 30.0, "s"),   # EDL/SideCar issue, trace scale
    ("itp-sidecar", "cpu_s"): ("<=", 30.0, "s"),
    ("table4-elastic_tiresias", "cpu_s"): ("<=", 60.0, "s"),
    ("itp-fifo", "events_per_s"): (">=", 150_000.0, "ev/s"),
    ("decision", "median_us"): ("<=", 100.0, "us"),
    ("scale-fifo-1m", "cpu_s"): ("<=", 45.0, "s"),
    ("scale-fifo-1m", "peak_rss_mib"): ("<=", 1024.0, "MiB"),
    ("scale-tiresias-1m", "wall_s"): ("<=", 300.0, "s"),
    ("scale-fifo-10m", "wall_s"): ("<=", 600.0, "s"),
    ("scale-fifo-10m", "peak_rss_mib"): ("<=", 8192.0, "MiB"),
    ("startup-default", "median_s"): ("<=", 1.0, "s"),
    ("startup-help", "median_s"): ("<=", 0.5, "s"),
    ("multirun", "overhead_per_run_s"): ("<=", 0.1, "s"),
}
# the figure each case shows first (others follow it in the table)
HEADLINE = {"itp": ("cpu_s", "wall_s", "events_per_s"), "table4": ("cpu_s", "wall_s", "events_per_s"), "scale": ("cpu_s", "wall_s", "events_per_s"), "decision": ("median_us",),
            "startup": ("median_s",), "multirun": ("overhead_per_run_s",)}


def case_names(full: bool) -> list[str]:
    names = [f"itp-{p}" for p in POLICIES] + ["table4-elastic_tiresias", "decision", "startup-help",
                                              "startup-default", "multirun"]
    for policy in ("fifo", "tiresias") if full else ("fifo",):
        names += [f"scale-{policy}-{n}" for n in SCALES
                  if (full or n not in FULL_ONLY) and (n != "10m" or policy == "fifo")]
    return names


# ---- what runs inside a case's own process -----------------------------------------------------

def work_itp(policy: str) -> dict:
    from elasticflow_fifo import replay   # beside this file

    t0, c0 = time.perf_counter(), time.process_time()
    rows = [replay(f"{i:02d}", policy, "zoo") for i in range(1, 11)]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    engine = sum(r["run_s"] for r in rows)
    events = sum(r["events"] for r in rows)
    return {"cpu_s": cpu, "wall_s": wall, "events_per_s": events / engine, "jobs": sum(r["jobs"] for r in rows),
            "finished": sum(r["finished"] for r in rows), "events": events, "engine_s": engine,
            "load_s": sum(r["load_s"] for r in rows), "build_s": sum(r["build_s"] for r in rows)}


def work_scale(policy: str, jobs: int) -> dict:
    from clustersim.experiment import compose
    from elasticflow_fifo import timed   # beside this file

    cfg = compose(["trace=synthetic_philly", f"trace.options.jobs={jobs}", "trace.cache.enabled=false",
                   "cluster=auto8", f"policy={policy}", "progress=false"])
    t0 = time.perf_counter()
    t, engine, s = timed(cfg)
    return {"cpu_s": sum(t.values()), "wall_s": time.perf_counter() - t0, "events_per_s": engine.events / t["run_s"], "jobs": s["jobs"],
            "finished": s["jobs_finished"], "events": engine.events, "load_s": t["load_s"], "build_s": t["build_s"],
            "engine_s": t["run_s"], "summary_s": t["summary_s"], "gpus": engine.cluster.total_gpus}


def work_table4(policy: str) -> dict:
    """EDL Table 4 on the real Philly jobs, seed 0 (configs/experiment/edl_table4_philly_elastic.yaml)."""
    from clustersim.experiment import compose
    from elasticflow_fifo import timed   # beside this file

    cfg = compose(["+experiment=edl_table4_philly_elastic", f"policy={policy}", "trace.cache.enabled=false",
                   "progress=false"])
    t0 = time.perf_counter()
    t, engine, s = timed(cfg)
    return {"cpu_s": sum(t.values()), "wall_s": time.perf_counter() - t0, "events_per_s": engine.events / t["run_s"],
            "jobs": s["jobs"], "finished": s["jobs_finished"], "events": engine.events, "load_s": t["load_s"],
            "build_s": t["build_s"], "engine_s": t["run_s"], "summary_s": t["summary_s"]}


def worker(case: str) -> dict:
    kind, *rest = case.split("-")
    if kind == "itp":
        out = work_itp(rest[0])
    elif kind == "table4":
        out = work_table4(rest[0])
    elif kind == "scale":
        out = work_scale(rest[0], SCALES[rest[1]])
    else:
        raise SystemExit(f"suite: no in-process work for case {case!r}")
    import clustersim   # which checkout's code ran: the parent checks it is the tree asked for

    return {**out, "code": str(Path(clustersim.__file__).resolve().parent.parent)}


# ---- the parent: subprocesses, their wall time and peak RSS ------------------------------------

def run_process(cmd: list[str], env: dict, cwd: str | Path, timeout: float | None = None) -> dict:
    """Run ``cmd``; its wall time, exit status, output and peak RSS (MiB, from wait4's rusage)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        deadline = None if timeout is None else t0 + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return {"wall_s": wall, "rc": p.returncode, "output": text, "peak_rss_mib": usage.ru_maxrss / 1024}


def tree_env(tree: Path, cache: Path | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is not None:
        env["CLUSTERSIM_CACHE"] = str(cache)
    return env


def clustersim_cmd(tree: Path) -> list[str]:
    """The tree's ``clustersim`` console script, as pip's wrapper runs it."""
    scripts = tomllib.loads((tree / "pyproject.toml").read_text())["project"]["scripts"]
    module, func = scripts["clustersim"].split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())"]


def failed(r: dict, what: str) -> dict:
    tail = "\n".join(r["output"].strip().splitlines()[-8:])
    return {"error": f"{what} exited {r['rc']}: {tail}"}


def case_worker(case: str, tree: Path, timeout: float | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        r = run_process([sys.executable, str(HERE / "suite.py"), "--worker", case, "--tree", str(tree)],
                        tree_env(tree), tmp, timeout)
    if r["rc"] != 0:
        return failed(r, case)
    figures = json.loads(r["output"].strip().splitlines()[-1])
    if Path(figures["code"]) != tree:
        return {"error": f"{case} ran the code of {figures['code']}, not of {tree}"}
    return {**figures, "peak_rss_mib": r["peak_rss_mib"], "process_s": r["wall_s"]}


def case_startup(args: list[str], tree: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env, cmd = tree_env(tree, Path(tmp) / "cache"), clustersim_cmd(tree) + args
        warm = run_process(cmd, env, tmp)      # bytecode and trace cache, as a user's second run finds them
        if warm["rc"] != 0:
            return failed(warm, " ".join(["clustersim"] + args))
        runs = [run_process(cmd, env, tmp) for _ in range(STARTUP_RUNS)]
    if any(r["rc"] != 0 for r in runs):
        return failed(next(r for r in runs if r["rc"] != 0), " ".join(["clustersim"] + args))
    walls = [r["wall_s"] for r in runs]
    return {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs)}


def case_multirun(tree: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = tree_env(tree, Path(tmp) / "cache")
        seeds = ",".join(str(s) for s in range(SWEEP_SEEDS))
        warm = run_process(clustersim_cmd(tree) + ["--help"], env, tmp)   # bytecode, as for start-up
        r = run_process(clustersim_cmd(tree) + ["-m", f"seed={seeds}", "hydra.sweep.dir=sweep"], env, tmp)
        if r["rc"] != 0 or warm["rc"] != 0:
            return failed(r if r["rc"] else warm, "clustersim -m")
        metas = [json.loads(p.read_text()) for p in (Path(tmp) / "sweep").glob("*/run.json")]
    if len(metas) != SWEEP_SEEDS or any(m.get("status") != "complete" for m in metas):
        return {"error": f"clustersim -m: {len(metas)} run.json of {SWEEP_SEEDS}, not all complete"}
    own = sum(m["wall_time_s"] for m in metas)
    return {"overhead_per_run_s": (r["wall_s"] - own) / SWEEP_SEEDS, "total_s": r["wall_s"], "runs_own_s": own,
            "peak_rss_mib": r["peak_rss_mib"]}




def case_decision(tree: Path) -> dict:
    """Tiresias's median per-decision time with ~1,000 running jobs (benchmarks/policy_decision.py,
    this harness's copy, run against ``tree``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "decision.json"
        r = run_process([sys.executable, str(HERE / "policy_decision.py"), "--policy", "tiresias",
                         "--json", str(out)], tree_env(tree), tmp)
        if r["rc"] != 0 or not out.is_file():
            return failed(r, "policy_decision.py")
        data = json.loads(out.read_text())
    return {"median_us": data["all"]["median_us"], "p95_us": data["all"]["p95_us"], "peak_rss_mib": r["peak_rss_mib"]}


def measure(case: str, tree: Path, timeout: float | None = None) -> dict:
    kind = case.split("-")[0]
    if kind in ("itp", "scale", "table4"):
        return case_worker(case, tree, timeout)
    if case == "startup-help":
        return case_startup(["--help"], tree)
    if case == "startup-default":
        return case_startup([], tree)
    if case == "multirun":
        return case_multirun(tree)
    if case == "decision":
        return case_decision(tree)
    raise SystemExit(f"suite: unknown case {case!r} (--list shows them)")


# ---- the table ----------------------------------------------------------------------------------

def verdict(case: str, metric: str, value: float) -> tuple[str, str]:
    """(target text, ok/MISS) of one figure; ('', '') when the issue sets no target for it."""
    if (case, metric) not in TARGETS:
        return "", ""
    op, bound, unit = TARGETS[(case, metric)]
    ok = value <= bound if op == "<=" else value >= bound
    return f"{op} {bound:,.0f} {unit}" if bound >= 10 else f"{op} {bound:g} {unit}", "ok" if ok else "MISS"


def rows_of(results: dict[str, dict]) -> list[dict]:
    """One row per figure: the headline figures of each case, its targets, and the fitted exponents."""
    rows = []
    for case, r in results.items():
        if "error" in r or "status" in r:
            rows.append({"case": case, "metric": "-", "value": None, "target": "", "status": r.get("status", "ERROR"),
                         "note": r.get("error", "")})
            continue
        metrics = list(HEADLINE[case.split("-")[0]]) + [m for (c, m) in TARGETS if c == case]
        for metric in dict.fromkeys(metrics):
            target, status = verdict(case, metric, r[metric])
            rows.append({"case": case, "metric": metric, "value": r[metric], "target": target, "status": status,
                         "peak_rss_mib": r.get("peak_rss_mib")})
    for policy in ("fifo", "tiresias"):
        for metric in ("wall_s", "engine_s"):   # wall carries fixed costs (first imports) at small sizes
            pts = [(SCALES[c.rsplit("-", 1)[1]], r[metric]) for c, r in results.items()
                   if c.startswith(f"scale-{policy}-") and metric in r]
            if len(pts) >= 2:
                rows.append({"case": f"scale-{policy}", "metric": f"exponent_{metric[:-2]}", "value": slope(pts),
                             "target": "", "status": "",
                             "note": f"log {metric} vs log jobs, " + ",".join(f"{n:,}" for n, _ in sorted(pts))})
    return rows


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    xs, ys = [math.log(x) for x, _ in points], [math.log(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def fmt(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    if metric.startswith("exponent"):
        return f"{value:.2f}"
    if metric.endswith("_per_s"):
        return f"{value:,.0f}"
    if metric.endswith("_mib"):
        return f"{value:,.0f}"
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def print_table(rows: list[dict]) -> None:
    print(f"{'case':<18} {'figure':<19} {'value':>12} {'target':>16} {'':>5} {'peak RSS MiB':>12}")
    for r in rows:
        rss = f"{r['peak_rss_mib']:,.0f}" if r.get("peak_rss_mib") else ""
        print(f"{r['case']:<18} {r['metric']:<19} {fmt(r['value'], r['metric']):>12} {r['target']:>16} "
              f"{r['status']:>5} {rss:>12}" + (f"  {r['note']}" if r.get("note") else ""))


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    mem = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem / 2**20, 1), "python": sys.version.split()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="add the 1M-job points and the tiresias scaling series")
    ap.add_argument("--cases", help="comma-separated case names (default: all of the chosen set)")
    ap.add_argument("--json", help="write the figures to this JSON file")
    ap.add_argument("--tree", default=str(ROOT), help="checkout whose code is measured (default: this one)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before a case's process is killed")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    tree = Path(args.tree).resolve()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return
    if args.list:
        print("\n".join(case_names(full=True)))
        return
    cases = args.cases.split(",") if args.cases else case_names(args.full)
    print(f"clustersim performance suite: {tree} on {machine()['cpu']}, {os.cpu_count()} cores", flush=True)
    results = {}
    for case in cases:
        t0 = time.perf_counter()
        results[case] = measure(case, tree, args.timeout)
        print(f"  {case}: {time.perf_counter() - t0:.1f} s", flush=True)
    rows = rows_of(results)
    print()
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"tree": str(tree), "machine": machine(), "results": results,
                                               "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
