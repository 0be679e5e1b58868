"""Run directories and sweeps: path-safe unique names, the sweep's expected runs, its progress.

A run directory is named ``<policy>_<trace>_s<seed>_<hash>``: ``hash`` is a short digest of the
run's own overrides (``hydra.*`` and ``progress`` left out: they do not change results), so two
runs that differ in any value never share a directory, and a swept value (``trace.path=../t.csv``)
never becomes part of a path. A single run's directory also starts with its start time to the
microsecond (``runs/<date>_<time>_<name>``); a sweep's runs sit directly in the sweep directory, so
re-running the same sweep into the same directory finds each run where it left it.

The names and the manifest's reading live in ``clustersim/rundirs.py`` (``clustersim.collect`` reads
them too, without Hydra); the sweep callback (configs/config.yaml ``hydra.callbacks``) writes ``sweep.json`` (every run the
sweep will make, by its overrides and hash) into the sweep directory before the first run, shows
a progress bar over the sweep's runs, and at the end reports complete, skipped, failed,
incomplete and damaged runs; the command exits 1 when a run failed.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from omegaconf import OmegaConf

import clustersim.configs  # noqa: F401  (makes config.yaml's sweeper visible to Hydra's plugin scan)
from clustersim.rundirs import (SWEEP_FILE, expected, file_sha256, hash_of, output_digests,  # noqa: F401
                                result_overrides, run_hash, run_name, safe)


def register_resolvers() -> None:
    """``${run_name:policy,trace,seed,overrides}`` for configs/config.yaml's hydra dirs."""
    if not OmegaConf.has_resolver("run_name"):
        OmegaConf.register_new_resolver(
            "run_name", lambda p, t, s, o: run_name(p, t, s, OmegaConf.to_container(o) if o is not None else []))


register_resolvers()


def expand(config) -> list[list[str]]:
    """Every run of the sweep ``config`` describes, as its overrides (Hydra's basic sweeper rules)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = list(config.hydra.overrides.task)
    params = OmegaConf.select(config, "hydra.sweeper.params")
    if params:
        args = [f"{k}={v}" for k, v in params.items()] + args
    parsed = OverridesParser.create().parse_overrides(args)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def write_manifest(sweep_dir: Path, jobs: list[list[str]]) -> None:
    from clustersim.simulator.metrics import atomic_write

    sweep_dir.mkdir(parents=True, exist_ok=True)
    data = {"runs": [{"overrides": list(j), "hash": run_hash(j)} for j in jobs]}
    atomic_write(sweep_dir / SWEEP_FILE, lambda p: Path(p).write_text(json.dumps(data, indent=2)))


def _ended(sweep_dir: Path, hashes: set[str]) -> int:
    """Runs of the sweep that have ended (complete or failed), by their run.json."""
    n = 0
    for d in sweep_dir.iterdir() if sweep_dir.is_dir() else ():
        if hash_of(d) in hashes and (d / "run.json").is_file():
            n += 1
    return n


try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object


def check_writable(directory: Path, key: str, prog: str) -> None:
    """Refuse, with one line and exit 1, an output directory that cannot be made or written (Hydra
    would make it and fail with a traceback): a scratch folder is made in it, or in its parent
    when it does not exist yet, and removed."""
    import os
    import tempfile

    directory = Path(directory)
    try:
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(20, "exists and is not a folder")
        where = directory if directory.is_dir() else directory.parent
        where.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".clustersim-probe-", dir=where))
    except OSError as e:
        print(f"{prog}: error: {key} {directory}: cannot write there ({e.strerror or e})", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


class OutputDirCallback(Callback):
    """Checks the run's (or sweep's) output directory before Hydra makes it (configs/config.yaml and
    configs/calibrate/config.yaml ``hydra.callbacks``)."""

    def __init__(self, prog: str = "clustersim", key: str = "hydra.run.dir"):
        self.prog, self.key = prog, key   # key: what the user sets to choose the directory

    def on_run_start(self, config, **kwargs) -> None:
        check_writable(Path(str(config.hydra.run.dir)), self.key, self.prog)

    def on_multirun_start(self, config, **kwargs) -> None:
        check_writable(Path(str(config.hydra.sweep.dir)), "hydra.sweep.dir", self.prog)


class SweepCallback(Callback):
    """A sweep's manifest, progress bar and closing report (runs in the process that launches)."""

    def __init__(self, poll_s: float = 1.0):
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = None

    def __getstate__(self):   # launchers pickle the callbacks to the workers: leave the bar behind
        return {"poll_s": self.poll_s}

    def __setstate__(self, state):
        self.__init__(**state)

    def on_multirun_start(self, config, **kwargs) -> None:
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            jobs = expand(config)
        except Exception as e:  # e.g. glob() sweeps, which need Hydra's config loader to expand
            print(f"clustersim: cannot list the sweep's runs ({e}); no sweep.json, no missing-run check",
                  file=sys.stderr)
            jobs = []
        else:
            write_manifest(self.sweep_dir, jobs)
        self.hashes = {run_hash(j) for j in jobs}
        self._stop.clear()
        self._thread = threading.Thread(target=self._progress, args=(len(self.hashes),), daemon=True)
        self._thread.start()

    def _progress(self, total: int) -> None:
        from tqdm import tqdm

        with tqdm(total=total, desc="sweep", unit="run", file=sys.stderr, disable=None, leave=True) as bar:
            while True:
                done = _ended(self.sweep_dir, self.hashes)
                bar.update(done - bar.n)
                if self._stop.wait(self.poll_s):
                    bar.update(_ended(self.sweep_dir, self.hashes) - bar.n)
                    return

    def on_multirun_end(self, config, **kwargs) -> None:
        from clustersim.collect import scan

        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        s = scan(self.sweep_dir)
        print(s.report(), file=sys.stderr, flush=True)
        print(f"clustersim: gather the runs with: clustersim-collect {self.sweep_dir}", file=sys.stderr, flush=True)
        if s.failed or s.incomplete or s.missing or s.damaged:
            raise SystemExit(1)
