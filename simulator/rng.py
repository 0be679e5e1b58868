"""One seed per run, split per component so that adding randomness to one part of the
simulator never shifts the random numbers another part draws."""

from __future__ import annotations

import zlib
from contextlib import contextmanager

import numpy as np

_watching: "Draws | None" = None


def component_rng(seed: int, component: str) -> np.random.Generator:
    """The generator of ``component`` (a stable name, e.g. ``"workload"``) for run seed ``seed``."""
    g = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(zlib.crc32(component.encode()),)))
    if _watching is not None:
        _watching.add(component, g)
    return g


class Draws:
    """The random streams made while watching (``watch``) and which of them gave numbers: a run
    whose seed fed no stream is the same run under every seed."""

    CHECK_EVERY = 64   # streams kept before looking which were drawn (bounds what is held)

    def __init__(self) -> None:
        self._pending: list[tuple[str, np.random.Generator, dict]] = []
        self._drawn: list[str] = []

    def add(self, component: str, g: np.random.Generator) -> None:
        if self._drawn:   # the seed has an effect: nothing more to learn
            return
        self._pending.append((component, g, g.bit_generator.state))
        if len(self._pending) >= self.CHECK_EVERY:
            self.drawn()

    def drawn(self) -> list[str]:
        """The components whose stream gave at least one number (the first found: once one has,
        later streams are not followed)."""
        still = []
        for component, g, state in self._pending:
            if g.bit_generator.state != state:
                self._drawn.append(component)
            else:
                still.append((component, g, state))
        self._pending = [] if self._drawn else still
        return list(self._drawn)


@contextmanager
def watch():
    """``with watch() as draws:`` records every ``component_rng`` made inside; ``draws.drawn()``
    names those that were used."""
    global _watching
    outer, _watching = _watching, Draws()
    try:
        yield _watching
    finally:
        _watching = outer
