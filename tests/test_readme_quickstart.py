"""The README's quick start, its commands run as written, in a fresh clone of this repository.

The clone reuses the virtual environment the suite runs in (``.venv`` is a link to it) rather
than installing one again (CI's ``make test`` installed it from this same commit): its files are
dated before the environment's install stamps, so ``make run`` finds nothing to install and goes
straight to the run. The fresh install itself is timed by hand (docs/performance.md notes it).
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def quick_start() -> list[str]:
    section = (ROOT / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split(" #")[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_readme_quick_start_runs_as_written_in_a_fresh_clone(tmp_path, capsys):
    commands = quick_start()
    assert commands[0] == "make run" and any(c.startswith(".venv/bin/clustersim-plot") for c in commands)
    clone = tmp_path / "clustersim"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    (clone / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    old = 946684800   # 2000-01-01: older than any install stamp of the linked environment
    for p in clone.rglob("*"):
        if ".git" not in p.parts and ".venv" not in p.parts:
            os.utime(p, (old, old), follow_symlinks=False)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    took = {}
    for cmd in commands:
        t0 = time.perf_counter()
        p = subprocess.run(["bash", "-c", cmd], cwd=clone, capture_output=True, text=True, timeout=600, env=env)
        took[cmd] = time.perf_counter() - t0
        assert p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        if cmd == "make run":
            assert "make: running: clustersim" in p.stdout and "jobs finished            60 / 60" in p.stdout
            assert "Package would be ignored" not in p.stdout + p.stderr   # no setuptools banners
        if "trace-info" in cmd:
            assert "offered load               1.02" in p.stdout
    plots = clone / "runs" / "first" / "plots"
    assert (plots / "summary.png").stat().st_size > 20_000
    summary = pd.read_csv(plots / "summary.csv", index_col=0)
    assert summary.loc["srtf", "jct_mean"] < summary.loc["tiresias", "jct_mean"] < summary.loc["fifo", "jct_mean"]
    with capsys.disabled():
        print("\nREADME quick start: " + ", ".join(f"{c.split()[0].split('/')[-1]} {t:.1f} s" for c, t in took.items())
              + f"; total {sum(took.values()):.1f} s")
