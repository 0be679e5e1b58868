"""One seed per run, split per component so that adding randomness to one part of the
simulator never shifts the random numbers another part draws."""

from __future__ import annotations

import zlib

import numpy as np


def component_rng(seed: int, component: str) -> np.random.Generator:
    """The generator of ``component`` (a stable name, e.g. ``"workload"``) for run seed ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(zlib.crc32(component.encode()),)))
