"""Check that a refactor keeps every output byte-identical: a fixed set of runs made with two
checkouts' code, their jobs.parquet, events.parquet and timeline.parquet compared by SHA-256 and
their summary.json compared without its wall times. Exits 1 when any differs.

    .venv/bin/python tools/same_outputs.py /work/main            # that checkout against this one
    .venv/bin/python tools/same_outputs.py /work/main --runs fifo,tiresias_faults

Each run is ``clustersim`` in a fresh process started in the checkout's own directory (so that
its code, not the current directory's, is imported), with that checkout's ``.venv`` when it has
one. The runs cover the engine's paths: rigid starts and finishes (FIFO), preemption (Tiresias),
decision rounds, elastic rescales with overheads (Elastic-Tiresias), the SideCar and DLRover-RM
experiments, Optimus, node failures, a real trace (ITP cluster 01) and nodes of several GPU types.
About a minute a side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PHILLY = ["trace=synthetic_philly", "trace.options.jobs=3000", "trace.cache.enabled=false", "cluster=auto8"]
ITP = ["trace=elasticflow_raw", "trace.path=bundled:elasticflow/raw/cluster01.csv", "trace.cache.enabled=false",
       "cluster=auto8"]
RUNS = {
    "fifo": PHILLY + ["policy=fifo"],
    "tiresias": PHILLY + ["policy=tiresias"],
    "tiresias_rounds": PHILLY + ["policy=tiresias", "policy.decision_interval=300"],
    "elastic_tiresias": PHILLY + ["policy=elastic_tiresias", "overhead=constant20"],
    "sidecar": ["+experiment=sidecar_sidecar"],
    "dlrover": ["+experiment=dlrover_cluster"],
    "optimus": ["trace=synthetic_optimus", "policy=optimus", "cluster=n16g4"],
    # node failures ~63 x Llama 3's rate, so that a 3,000-job run meets a couple of hundred
    "tiresias_faults": PHILLY + ["policy=tiresias", "faults=llama3_nodes", "faults.node.mtbf_h=100"],
    "itp01_fifo": ITP + ["policy=fifo"],
    "itp01_tiresias": ITP + ["policy=tiresias"],
    # nodes of three GPU types: the recorder's GPU-seconds per type, node by node
    "types_tiresias": ["trace=synthetic_philly", "trace.options.jobs=1000", "trace.cache.enabled=false",
                       "cluster=gavel_heterogeneous", "policy=tiresias"],
}
FILES = ("jobs.parquet", "events.parquet", "timeline.parquet")


def digests(tree: Path, name: str) -> dict:
    """Run ``name`` with ``tree``'s code; the SHA-256 of each output (an ``error`` if it failed)."""
    python = tree / ".venv" / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory(prefix=f"same-{name}-") as tmp:
        r = subprocess.run([str(python) if python.exists() else sys.executable, "-c",
                            "import sys; from clustersim.cli import entry; sys.exit(entry())",
                            *RUNS[name], "progress=false", f"hydra.run.dir={tmp}/run"],
                           env=env, cwd=tree, capture_output=True, text=True)
        if r.returncode:
            return {"error": (r.stdout + r.stderr).strip().splitlines()[-1:]}
        out = {f: hashlib.sha256((Path(tmp) / "run" / f).read_bytes()).hexdigest() for f in FILES}
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
        summary = {k: v for k, v in summary.items() if "wall" not in k}
        out["summary.json"] = hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, help="the other checkout (e.g. /work/main)")
    ap.add_argument("--tree", type=Path, default=HERE, help="this checkout (default: the one holding this file)")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of: {', '.join(RUNS)}")
    args = ap.parse_args()
    names = args.runs.split(",")
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        raise SystemExit(f"same_outputs: unknown run(s) {', '.join(unknown)}")
    bad = 0
    for name in names:
        a, b = digests(args.base.resolve(), name), digests(args.tree.resolve(), name)
        if "error" in a or "error" in b:
            print(f"{name:18s} ERROR base {a.get('error')} tree {b.get('error')}")
            bad += 1
            continue
        diff = [f for f in a if a[f] != b[f]]
        print(f"{name:18s} {'same' if not diff else 'DIFFERS: ' + ', '.join(diff)}", flush=True)
        bad += bool(diff)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
