"""Typed, bounded parameters: every configurable component declares its parameters as the
annotated keyword arguments of its ``__init__`` (or its dataclass fields), and ``check_params``
checks a config against them before anything runs.

Annotations understood: ``bool`` (only true/false: ``backfill=no`` is an error, not "on"),
``int`` (an integral number; ``2.5`` is rejected), ``float`` (finite unless the bound says
otherwise), ``str``, ``Literal[...]``, ``X | None``, ``list[X]``/``tuple[X, ...]``, ``dict``,
and ``Annotated[X, Range(...)]`` for bounds. Unknown keys are rejected with the list of
valid ones.

Rules beside the types: a list's shape (``Annotated[list[float], Increasing(), Length(1, 16)]``)
and rules across parameters (``@rules(Rule(("gittins", "queue_order"), test, reason))`` on the
``__init__``) are checked with the parameters, so that a bad config is a ``ConfigError`` naming
the key before anything runs; a component's constructor repeats no check.

An annotation that cannot be resolved is an error (``SchemaError``) where the component is
registered, at import: a schema that silently checked nothing would let every value through.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Mapping, Union

from clustersim.simulator.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """Bounds of a number: ``Annotated[float, Range(ge=0)]``. ``finite=False`` admits inf."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    finite: bool = True

    def check(self, v: float, key: str) -> None:
        if self.finite and not math.isfinite(v):
            raise ConfigError(f"{key}: must be a finite number, got {v!r}")
        for bound, ok, word in ((self.ge, lambda b: v >= b, ">="), (self.gt, lambda b: v > b, ">"),
                                (self.le, lambda b: v <= b, "<="), (self.lt, lambda b: v < b, "<")):
            if bound is not None and not ok(bound):
                raise ConfigError(f"{key}: must be {word} {bound:g}, got {v!r}")


@dataclass(frozen=True)
class Increasing:
    """A list whose items increase (``strict``: each greater than the one before)."""

    strict: bool = True

    def check(self, v, key: str) -> None:
        bad = next((i for i in range(1, len(v)) if (v[i] <= v[i - 1] if self.strict else v[i] < v[i - 1])), None)
        if bad is not None:
            word = "increasing" if self.strict else "non-decreasing"
            raise ConfigError(f"{key}: must be {word}, got {v!r} ({key}[{bad}] = {v[bad]!r} after {v[bad - 1]!r})")


@dataclass(frozen=True)
class Length:
    """How many items a list may hold: ``Length(1, 16)``."""

    min: int = 0
    max: int | None = None

    def check(self, v, key: str) -> None:
        if len(v) < self.min or (self.max is not None and len(v) > self.max):
            want = f"at least {self.min}" if self.max is None else f"{self.min} to {self.max}"
            raise ConfigError(f"{key}: must hold {want} items, got {len(v)}")


@dataclass(frozen=True)
class Rule:
    """A rule across parameters: ``test(*values of keys)`` must hold, else ``ConfigError``
    naming the first of ``keys`` the config set (or the first key) and ``reason``."""

    keys: tuple[str, ...]
    test: Callable[..., bool]
    reason: str


def rules(*declared: Rule) -> Callable:
    """Decorator of an ``__init__`` (or any checked callable): its cross-parameter rules."""
    def deco(fn):
        fn.__param_rules__ = tuple(getattr(fn, "__param_rules__", ())) + declared
        return fn
    return deco


class SchemaError(TypeError):
    """A component's parameter annotations cannot be read (a programming error, raised at import)."""


NonNegative = Annotated[float, Range(ge=0)]
Positive = Annotated[float, Range(gt=0)]
Count = Annotated[int, Range(ge=0)]
PositiveCount = Annotated[int, Range(ge=1)]
Fraction = Annotated[float, Range(ge=0, le=1)]


def parameters(fn: Callable) -> dict[str, tuple[Any, Any]]:
    """``{name: (annotation, default)}`` of a callable's keyword parameters (``self``, ``*args``,
    ``**kwargs`` and underscore names excluded)."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:   # checking nothing would pass every value: fail where it is declared
        raise SchemaError(f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}: a parameter "
                          f"annotation cannot be resolved ({type(e).__name__}: {e})") from None
    return {name: (hints.get(name, Any), p.default) for name, p in sig.parameters.items()
            if name != "self" and not name.startswith("_")
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def check_params(fn: Callable, params: Mapping, where: str = "{}", *, skip: tuple[str, ...] = ()) -> dict:
    """``params`` checked and converted against ``fn``'s annotated parameters.

    ``where`` formats a key into its config path (``"policy.{}"``). ``skip`` names parameters a
    config may not set (supplied by the code, e.g. a model's ``costs_of``).
    """
    spec = {k: v for k, v in parameters(fn).items() if k not in skip}
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise ConfigError(f"{where.format(unknown[0])}: unknown key; valid keys: {', '.join(sorted(spec)) or 'none'}")
    out = {k: coerce(v, spec[k][0], where.format(k)) for k, v in params.items()}
    declared = getattr(fn, "__param_rules__", ())
    if declared:
        values = {k: d for k, (_, d) in spec.items()} | out
        for rule in declared:
            if not rule.test(*(values[k] for k in rule.keys)):
                key = next((k for k in rule.keys if k in out), rule.keys[0])
                raise ConfigError(f"{where.format(key)}: {rule.reason}")
    return out


def defaults(fn: Callable) -> dict[str, Any]:
    """``{name: default}`` of ``fn``'s parameters that have one (tuples as lists, as a config has them)."""
    return {k: list(d) if isinstance(d, tuple) else dict(d) if isinstance(d, Mapping) else d
            for k, (_, d) in parameters(fn).items() if d is not inspect.Parameter.empty}


def coerce(value, tp, key: str, allow_inf: bool = False):
    """``value`` checked against the annotation ``tp``; lists become lists, ints stay ints.
    Numbers must be finite unless a ``Range(finite=False)`` admits inf."""
    origin = typing.get_origin(tp)
    if tp is Any or tp is inspect.Parameter.empty:
        return value
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        v = coerce(value, base, key, any(isinstance(m, Range) and not m.finite for m in meta))
        for m in meta:
            if v is not None and hasattr(m, "check"):   # Range, Increasing, Length
                m.check(v, key)
        return v
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return coerce(value, a, key, allow_inf)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{key}: {value!r} matches none of {_name(tp)}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices or isinstance(value, bool) != any(isinstance(c, bool) for c in choices):
            raise ConfigError(f"{key}: must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    if origin in (list, tuple, typing.Sequence, _abc_sequence()):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: must be a list, got {value!r}")
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return [coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, typing.Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: must be a mapping, got {value!r}")
        args = typing.get_args(tp)
        item = args[1] if len(args) == 2 else Any
        return {k: coerce(v, item, f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise ConfigError(f"{key}: must be an integer, got {value!r}")
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: must be a number, got {value!r}")
        if math.isnan(value) or (math.isinf(value) and not allow_inf):
            raise ConfigError(f"{key}: must be a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: must be a string, got {value!r}")
        return value
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise ConfigError(f"{key}: must be {_name(tp)}, got {value!r}")


def _abc_sequence():
    import collections.abc
    return collections.abc.Sequence


def _name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
