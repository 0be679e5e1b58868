"""DLRover Stage 1: the job-history store and the warm start (DLRover-RM §4.3, Algorithm 1, Eq. 10).

The Config DB of DLRover-RM Fig. 4 holds finished jobs: model, data (training table), user,
the configuration the job ended with and what it measured there (throughput, CPU and memory
used per task). Here it is an SQLite file (``sqlite3``), written as jobs finish and reused by
later runs. A run reads the rows once, at its start (a snapshot ordered by row id), and adds
its own finished jobs to that snapshot as it writes them: its decisions depend on the file's
content at its start and on the run itself, never on runs writing the same file meanwhile
(parallel sweeps), and no wall-clock value is stored. Each write is its own transaction, in
WAL mode, with a busy timeout, so that concurrent runs can share one file.

Warm start (Algorithm 1): the top-k most similar finished jobs, ranked so that the most
similar comes last, are smoothed exponentially, ``Ā^i = μ·A^i + (1−μ)·Ā^{i−1}`` (Eq. 10), field
by field. Similarity (not given by the paper; notes/dlrover.md A11): a weighted match of model,
dataset and user ([RM] §4.3 "similarity in each type of feature", [D] §4.3 "data source and
user ... jobs that are using the same table"), among the rows of the job's own model only (a
job that names one): dataset and user together weigh as much as the model, so a threshold
alone would let another model's row through; ties go to the most recent row.
"""

from __future__ import annotations

import math
import os
import sqlite3
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from clustersim.simulator.errors import ConfigError

# weights of the matching features (notes/dlrover.md A11; a choice, docs/policies/dlrover.md)
SIMILARITY = (("model", 0.5), ("dataset", 0.3), ("user", 0.2))
MEMORY = ":memory:"


@dataclass(frozen=True)
class Config:
    """A PS/worker configuration: task counts and each task's CPU cores and GB."""

    workers: int
    ps: int
    worker_cpu: float
    ps_cpu: float
    worker_mem: float
    ps_mem: float

    @property
    def cpu(self) -> float:
        return self.workers * self.worker_cpu + self.ps * self.ps_cpu

    @property
    def mem(self) -> float:
        return self.workers * self.worker_mem + self.ps * self.ps_mem


@dataclass(frozen=True)
class Record:
    """One finished job of the history: its features, final configuration and measurements."""

    run: str
    job_id: str
    model: str | None
    dataset: str | None
    user: str | None
    finished_at: float          # simulated seconds
    config: Config
    throughput: float           # steps/s measured at ``config``
    worker_cpu_used: float      # per task, from the job's usage reports
    ps_cpu_used: float
    worker_mem_used: float
    ps_mem_used: float

    def row(self) -> tuple:
        return (self.run, self.job_id, self.model, self.dataset, self.user, self.finished_at,
                *astuple(self.config), self.throughput, self.worker_cpu_used, self.ps_cpu_used,
                self.worker_mem_used, self.ps_mem_used)


_COLUMNS = ("run", "job_id", "model", "dataset", "user", "finished_at", *(f.name for f in fields(Config)),
            "throughput", "worker_cpu_used", "ps_cpu_used", "worker_mem_used", "ps_mem_used")
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run TEXT NOT NULL, job_id TEXT NOT NULL, model TEXT, dataset TEXT, user TEXT,
    finished_at REAL NOT NULL, workers INTEGER NOT NULL, ps INTEGER NOT NULL,
    worker_cpu REAL NOT NULL, ps_cpu REAL NOT NULL, worker_mem REAL NOT NULL, ps_mem REAL NOT NULL,
    throughput REAL NOT NULL, worker_cpu_used REAL NOT NULL, ps_cpu_used REAL NOT NULL,
    worker_mem_used REAL NOT NULL, ps_mem_used REAL NOT NULL,
    UNIQUE (run, job_id))"""


def default_path() -> Path:
    """``$CLUSTERSIM_CACHE/dlrover/history.sqlite``, else ``~/.cache/clustersim/dlrover/history.sqlite``
    (the same cache root as the trace cache)."""
    root = os.environ.get("CLUSTERSIM_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "clustersim"
    return base / "dlrover" / "history.sqlite"


class History:
    """The Config DB: an SQLite file (or ``":memory:"``), snapshotted at open."""

    def __init__(self, path: str | os.PathLike | None, run: str = "default"):
        """Open (or create) the history and read its snapshot. A path that cannot hold one (a
        folder, a file that is not an SQLite history of this schema, a read-only or unreachable
        place) is a ``ConfigError`` naming ``policy.history`` and the path, before any job runs:
        the file is written as jobs finish, so it must be writable from the start."""
        self.path = MEMORY if path in (None, MEMORY) else Path(path).expanduser()
        self.run = run
        self._db = None
        try:
            if self.path != MEMORY:
                if self.path.is_dir():
                    raise IsADirectoryError(21, "is a folder")
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                except FileExistsError:
                    raise NotADirectoryError(20, "a folder on its path is a file") from None
            self._db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
            if self.path != MEMORY:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            cur = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs ORDER BY id")
            self.records: list[Record] = [_record(r) for r in cur]
            self._db.execute("BEGIN IMMEDIATE")   # a write, undone: a read-only file fails here, not mid-run
            try:
                self._db.execute("CREATE TABLE _write_probe (x INTEGER)")
            finally:
                self._db.execute("ROLLBACK")
        except (sqlite3.Error, OSError, ValueError, TypeError) as e:
            if self._db is not None:
                self._db.close()
            reason = e.strerror if isinstance(e, OSError) and e.strerror else e
            raise ConfigError(f"policy.history: {self.path}: cannot use it as the job history ({reason})") from None

    def add(self, rec: Record) -> None:
        """Write one finished job (its own transaction) and add it to this run's snapshot."""
        try:
            with self._db:   # BEGIN ... COMMIT
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(f"INSERT OR REPLACE INTO jobs ({', '.join(_COLUMNS)}) "
                                 f"VALUES ({', '.join('?' * len(_COLUMNS))})", rec.row())
        except sqlite3.Error as e:
            raise ConfigError(f"policy.history: {self.path}: cannot write job {rec.job_id!r}: {e}") from None
        self.records = [r for r in self.records if (r.run, r.job_id) != (rec.run, rec.job_id)] + [rec]

    def close(self) -> None:
        self._db.close()

    def similar(self, model, dataset, user, k: int, min_similarity: float) -> list[Record]:
        """The ``k`` most similar records, least similar first (Algorithm 1's order); ties: the
        more recent row counts as more similar."""
        scored = []
        for i, r in enumerate(self.records):
            if model is not None and r.model != model:
                continue   # another model's configuration says nothing of this one's (W&D 24 x 3 cores, xDeepFM 8 x 20)
            s = similarity(r, model, dataset, user)
            if s >= min_similarity:
                scored.append((s, i, r))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [r for _, _, r in scored[-k:]]


def similarity(rec: Record, model, dataset, user) -> float:
    """Sum of the weights of the features ``rec`` shares with the job (a missing one matches nothing)."""
    mine = {"model": model, "dataset": dataset, "user": user}
    return sum(w for f, w in SIMILARITY if mine[f] is not None and getattr(rec, f) == mine[f])


def smooth(configs: list[Config], mu: float) -> Config:
    """Algorithm 1: ``configs`` least similar first; Eq. 10 field by field, counts rounded."""
    acc = [float(v) for v in astuple(configs[0])]
    for c in configs[1:]:
        acc = [mu * float(v) + (1.0 - mu) * a for v, a in zip(astuple(c), acc)]
    w, p, wc, pc, wm, pm = acc
    return Config(max(1, int(w + 0.5)), max(1, int(p + 0.5)), wc, pc, wm, pm)


def _record(row) -> Record:
    """A row as a record; a row of other types (a file written by something else) is a ValueError."""
    run, job_id, model, dataset, user, finished_at, w, p, wc, pc, wm, pm, thr, wcu, pcu, wmu, pmu = row
    nums = [float(x) for x in (finished_at, wc, pc, wm, pm, thr, wcu, pcu, wmu, pmu)]
    if not all(math.isfinite(x) for x in nums) or int(w) < 1 or int(p) < 1:
        raise ValueError(f"row of job {job_id!r} holds a value out of range")
    finished_at, wc, pc, wm, pm, thr, wcu, pcu, wmu, pmu = nums
    return Record(str(run), str(job_id), model, dataset, user, finished_at, Config(int(w), int(p), wc, pc, wm, pm),
                  thr, wcu, pcu, wmu, pmu)
