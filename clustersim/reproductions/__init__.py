"""The reproduction cases, one module per paper (clustersim/reproduction.py says what a case is).

Each module lists ``CASES`` (the figures a trace-driven simulator can reproduce) and
``NOT_REPRODUCIBLE`` (``(result, why)`` for the paper's results it cannot)."""

from __future__ import annotations


def not_reproducible() -> dict[str, list[tuple[str, str]]]:
    from importlib import import_module

    from clustersim.reproduction import PAPERS
    return {p: [list(x) for x in import_module(f"clustersim.reproductions.{p}").NOT_REPRODUCIBLE] for p in PAPERS}
