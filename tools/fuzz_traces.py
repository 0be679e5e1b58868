"""The larger, local fuzz profile of the trace loaders (the CI profile is tests/traces/test_fuzz.py).

Every bundled sample whole (82,247 Philly-Pollux jobs, 8,152 openb pods, ...), every mutation
of tests/traces/fuzz_cases.py, several seeds, larger garbage, each case loaded with
on_bad_row error and skip in a worker process limited to ``--memory-mb`` of address space and
``--seconds`` per load. Prints the counts by verdict and every failure; exits 1 on a failure.

    .venv/bin/python tools/fuzz_traces.py                     # 1,092 loads, a few minutes on 2 cores
    .venv/bin/python tools/fuzz_traces.py --seeds 5 --garbage-mb 1024 --seconds 600 --memory-mb 4096
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.traces import fuzz_cases as fz  # noqa: E402


def _limit(memory_mb: int, garbage_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
    fz.MUTATIONS["garbage"] = fz._garbage(garbage_mb * 2**20)


def _run(job) -> list[tuple[str, str]]:
    case_index, seed, root, seconds = job
    case = fz.cases(None)[case_index]
    out = []
    for mode in ("error", "skip"):
        where = Path(root) / f"{case_index}-{seed}-{mode}"
        try:
            outcome = _run_seeded(case, where / "case", mode, _baseline(case.sample, mode, root), seconds, seed)
            out.append((outcome.verdict, ""))
        except AssertionError as e:
            out.append(("FAILED", str(e)))
        except MemoryError:
            out.append(("FAILED", f"{case.id} [{mode}] seed {seed}: over the memory limit"))
        finally:
            _rmtree(where)
    return out


_BASELINES: dict = {}  # per worker process: (sample, mode) -> the unspoiled load


def _baseline(sample, mode, root):
    key = (sample.name, mode)
    if key not in _BASELINES:
        _BASELINES[key] = fz.baseline(sample, Path(root) / f"base-{sample.name}-{mode}-{os.getpid()}", mode, None)
    return _BASELINES[key]


def _run_seeded(case, root, mode, base, seconds, seed):
    original = fz.prepare
    fz.prepare = lambda c, r, m, s=0: original(c, r, m, seed)
    try:
        return fz.run_case(case, root, mode, base, max_lines=None, seconds=seconds, measure_memory=False)
    finally:
        fz.prepare = original


def _rmtree(p: Path) -> None:
    import shutil
    shutil.rmtree(p, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--garbage-mb", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--memory-mb", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    all_cases = fz.cases(None)
    counts, failures = Counter(), []
    with tempfile.TemporaryDirectory() as root, ProcessPoolExecutor(
            args.workers, initializer=_limit, initargs=(args.memory_mb, args.garbage_mb)) as pool:
        jobs = [(i, seed, root, args.seconds) for seed in range(args.seeds) for i in range(len(all_cases))]
        for n, results in enumerate(pool.map(_run, jobs, chunksize=4), 1):
            if n % 100 == 0:
                print(f"{n}/{len(jobs)} cases", file=sys.stderr, flush=True)
            for verdict, detail in results:
                counts[verdict] += 1
                if detail:
                    failures.append(detail)
    print(f"{len(all_cases)} cases x {args.seeds} seeds x 2 modes = {sum(counts.values())} loads")
    for verdict in (*fz.VERDICTS, "FAILED"):
        print(f"  {verdict:16} {counts[verdict]}")
    for f in failures:
        print("FAILED", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
