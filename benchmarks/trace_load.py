"""Trace loading speed and memory.

1. The ten ElasticFlow clusters (69,351 jobs) parsed from CSV, no cache: target < 5 s together.
2. The same through the Parquet cache (second load).
3. A Philly ``cluster_job_log`` of about ``--philly-mb`` MB, written from the bundled sample's
   jobs with fresh ids, streamed: wall time and peak resident memory (target < 2 GB for 1 GB).

    .venv/bin/python benchmarks/trace_load.py [--philly-mb 1000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clustersim import traces  # noqa: E402
from clustersim.traces.load import load  # noqa: E402

CLUSTERS = [f"bundled:elasticflow/raw/cluster{i:02d}.csv" for i in range(1, 11)]


def elasticflow(cache_dir: str) -> None:
    t0 = time.perf_counter()
    n = sum(traces.read("elasticflow", p).num_rows for p in CLUSTERS)
    parse = time.perf_counter() - t0
    print(f"elasticflow, 10 clusters, parsed: {n} jobs in {parse:.2f} s (target < 5 s)")
    cfg = {"name": "ef", "format": "elasticflow", "path": CLUSTERS, "cache": {"dir": cache_dir}}
    load(cfg)
    t0 = time.perf_counter()
    table, _ = load(cfg)
    print(f"elasticflow, 10 clusters, from cache: {table.num_rows} jobs in {time.perf_counter() - t0:.2f} s")


def write_philly(path: Path, megabytes: float) -> int:
    """Repeat the sample's jobs with new ids until the file reaches the size. Each attempt's
    server list is widened to 12 servers (about 1 KB a job). The real log holds 117,325 jobs
    in about 1 GB, so this file holds some 8 times more jobs per byte: memory, which grows
    with the jobs kept, is tested harder than the real log would test it."""
    sample = json.loads((traces.DATA / "samples/philly/cluster_job_log").read_text())
    for job in sample:
        for a in job["attempts"]:
            a["detail"] = (a["detail"] * 12)[:12]
    target, written, n = megabytes * 1e6, 0, 0
    with open(path, "w") as f:
        f.write("[")
        while written < target:
            for job in sample:
                text = json.dumps({**job, "jobid": f"application_{n:012d}"})
                f.write(("," if n else "") + text + "\n")
                written += len(text) + 2
                n += 1
        f.write("]")
    return n


def philly(megabytes: float) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cluster_job_log"
        n = write_philly(path, megabytes)
        size = path.stat().st_size / 1e6
        code = ("import resource,time,traces;t=time.perf_counter();"
                f"x=traces.read('philly',{str(path)!r});"
                "print(x.num_rows, round(time.perf_counter()-t,1), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
        rows, secs, rss_kb = out.stdout.split()
        print(f"philly job log, {size:.0f} MB, {n} jobs written: {rows} jobs loaded in {secs} s, "
              f"peak memory {int(rss_kb) / 1024:.0f} MB (target < 2048 MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--philly-mb", type=float, default=200.0, help="size of the synthetic Philly log (MB)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache_dir:
        elasticflow(cache_dir)
    philly(args.philly_mb)
    print(f"benchmark process peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
