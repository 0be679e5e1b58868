"""Named components (policies, trace formats, speed models, overhead mechanisms, profiles),
registered one way and found lazily, as Gymnasium's registry finds environments: asking for a
name imports only the module that holds it (the module named like it, or like its prefix:
``optimus_oracle`` in ``optimus.py``), else the outside package's entry point of that name
(group ``clustersim.<kind>s``: the entry point names a module or object to load), and only then
every other module. A module that fails to import breaks only the names it holds: a full
listing records its error and goes on, and says so where a name is not found.

Each entry carries its doc line and its parameters' defaults (``simulator/params.py``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class Entry:
    name: str
    obj: Any
    meta: dict = field(default_factory=dict)

    @property
    def doc(self) -> str:
        """The first line of the component's docstring ("" if it has none)."""
        text = self.meta.get("doc") or getattr(self.obj, "__doc__", None) or ""
        if not text.strip():   # else its module's (one component per module, as a rule)
            import sys
            text = getattr(sys.modules.get(getattr(self.obj, "__module__", "")), "__doc__", None) or ""
        return text.strip().splitlines()[0].strip() if text.strip() else ""

    @property
    def defaults(self) -> dict[str, Any]:
        """The component's parameters with their defaults (its config schema's defaults)."""
        from clustersim.simulator.params import defaults
        fn = _signature_of(self.obj)
        return defaults(fn) if fn is not None else {}


class Registry:
    """``register`` names an object; ``get`` finds one name, ``names``/``entries`` list them all.

    ``package`` is a package (its modules are searched) or a module; ``discover`` may add
    entries another way (the profile zoo registers YAML files).
    """

    def __init__(self, kind: str, package: str, group: str,
                 discover: Callable[["Registry"], None] | None = None):
        self.kind, self.package, self.group = kind, package, group
        self._discover_more = discover
        self._items: dict[str, Entry] = {}
        self._discovered = False
        self.broken: dict[str, str] = {}   # module or entry point -> why it did not load

    def register(self, name: str | None = None, **meta) -> Callable:
        """Decorator: ``@REG.register("name", key=value)`` (or no name: the object's ``name``).
        The object's parameter annotations are read here, so that one that cannot be resolved
        fails at import (``params.SchemaError``), not as a schema that checks nothing."""
        def deco(obj):
            key = name if name is not None else getattr(obj, "name", None)
            if not isinstance(key, str) or not key:
                raise ValueError(f"a {self.kind} needs a name to be registered: {obj!r}")
            old = self._items.get(key)
            if old is not None and old.obj is not obj and _qualname(old.obj) != _qualname(obj):
                raise ValueError(f"{self.kind} name {key!r} is registered twice "
                                 f"({_qualname(old.obj)} and {_qualname(obj)})")
            fn = _signature_of(obj)
            if fn is not None:
                from clustersim.simulator.params import parameters
                parameters(fn)
            self._items[key] = Entry(key, obj, dict(meta))
            return obj
        return deco

    def get(self, name: str) -> Entry:
        entry = self._items.get(name)
        if entry is None:
            self._find(name)
            entry = self._items.get(name)
        if entry is None:
            broken = "".join(f"; {where} did not load ({why})" for where, why in self.broken.items())
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}{broken}")
        return entry

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._items)

    def entries(self) -> Iterable[Entry]:
        self.discover()
        return [self._items[n] for n in sorted(self._items)]

    # ------------------------------------------------------------------ finding
    def _modules(self) -> list[str]:
        mod = importlib.import_module(self.package)
        return [info.name for info in pkgutil.iter_modules(getattr(mod, "__path__", []))]

    def _find(self, name: str) -> None:
        """Import what may hold ``name``: its own module first (an error there is this name's
        error and is raised), then an entry point of that name, then everything."""
        own = sorted((m for m in self._modules() if name == m or name.startswith(m + "_")), key=len, reverse=True)
        for m in own:
            importlib.import_module(f"{self.package}.{m}")
            if name in self._items:
                return
        for ep in _entry_points(self.group):
            if ep.name == name:
                _load(ep, self.group)
                if name in self._items:
                    return
        self.discover()

    def discover(self) -> None:
        """Import every module of the package and every entry point of the group; one that
        fails is recorded in ``broken`` (its names are then unknown) and the rest load."""
        if self._discovered:
            return
        self._discovered = True
        for m in self._modules():
            try:
                importlib.import_module(f"{self.package}.{m}")
            except Exception as e:
                self.broken[f"module {self.package}.{m}"] = f"{type(e).__name__}: {e}"
        if self._discover_more:
            self._discover_more(self)
        for ep in _entry_points(self.group):
            try:
                _load(ep, self.group)
            except ImportError as e:
                self.broken[f"entry point {ep.name!r}"] = str(e)


class PluginError(ImportError):
    """An outside package's entry point failed to load (the message names it and why)."""


def _entry_points(group: str):
    return sorted(importlib.metadata.entry_points(group=group), key=lambda ep: ep.name)


def _load(ep, group: str) -> None:
    try:
        ep.load()
    except Exception as e:   # a broken plug-in names itself
        raise PluginError(f"entry point {ep.name!r} = {ep.value!r} (group {group}) failed to load: "
                          f"{type(e).__name__}: {e}") from e


def _signature_of(obj) -> Callable | None:
    """The callable whose keyword parameters are ``obj``'s config schema: a class's ``__init__``
    (a dataclass's generated one included), a function itself; None for data (profile files)."""
    if isinstance(obj, type):
        return obj.__init__ if obj.__init__ is not object.__init__ else None
    return obj if callable(obj) else None


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
