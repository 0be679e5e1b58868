"""The measured points of a calibration, one JSON object per line, appended as each is measured.

A point is keyed by what determines it (kind, sizes, model and run parameters); a rerun with
the same configuration finds the points already measured and skips them, so a killed sweep keeps
what it measured. A line cut short by the kill is ignored (and rewritten by the rerun).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def point_key(kind: str, **fields) -> str:
    """A stable key: the kind and the fields, sorted, as compact JSON."""
    return json.dumps({"kind": kind, **fields}, sort_keys=True, separators=(",", ":"), default=str)


def shuffled_rounds(grid: list[tuple], repeats: int) -> list[tuple]:
    """Every grid point once per round, (*point, round), each round in an order seeded by its
    number: a drift of the host over the sweep spreads over the points instead of following the grid."""
    import random
    out = []
    for r in range(int(repeats)):
        order = list(grid)
        random.Random(r).shuffle(order)
        out += [(*pt, r) for pt in order]
    return out


class PointStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.points: dict[str, dict] = {}
        self.torn = 0                      # lines that could not be read (a kill mid-write)
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                    self.points[rec["key"]] = rec
                except (json.JSONDecodeError, KeyError, TypeError):
                    self.torn += 1

    def __contains__(self, key: str) -> bool:
        return key in self.points

    def get(self, key: str) -> dict | None:
        return self.points.get(key)

    def add(self, key: str, record: dict) -> dict:
        """Append one measured point and flush it to disk before returning."""
        rec = {"key": key, **record}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab+") as f:
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")          # never glue a new point onto a line cut short
            f.write((json.dumps(rec, default=float) + "\n").encode())
            f.flush()
            os.fsync(f.fileno())
        self.points[key] = rec
        return rec

    def of_kind(self, kind: str) -> list[dict]:
        return [r for r in self.points.values() if r.get("kind") == kind]
