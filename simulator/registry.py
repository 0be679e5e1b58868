"""Named components (policies, trace formats, speed models, overhead mechanisms, profiles),
registered one way and discovered: every module of the component's package is imported on
first use, so a new component is one file plus its config; outside packages add theirs through
the entry-point group ``clustersim.<kind>`` (the entry point names a module or object to load).
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


class Registry:
    """``register`` names an object; ``get``/``names`` discover the package's modules first.

    ``package`` is a package (all its modules are imported) or a module; ``discover`` may add
    entries another way (the profile zoo registers YAML files).
    """

    def __init__(self, kind: str, package: str, group: str,
                 discover: Callable[["Registry"], None] | None = None):
        self.kind, self.package, self.group = kind, package, group
        self._discover_more = discover
        self._items: dict[str, Entry] = {}
        self._discovered = False

    def register(self, name: str | None = None, **meta) -> Callable:
        """Decorator: ``@REG.register("name", key=value)`` (or no name: the object's ``name``)."""
        def deco(obj):
            key = name if name is not None else getattr(obj, "name", None)
            if not isinstance(key, str) or not key:
                raise ValueError(f"a {self.kind} needs a name to be registered: {obj!r}")
            old = self._items.get(key)
            if old is not None and old.obj is not obj and _qualname(old.obj) != _qualname(obj):
                raise ValueError(f"{self.kind} name {key!r} is registered twice "
                                 f"({_qualname(old.obj)} and {_qualname(obj)})")
            self._items[key] = Entry(key, obj, dict(meta))
            return obj
        return deco

    def get(self, name: str) -> Entry:
        self.discover()
        entry = self._items.get(name)
        if entry is None:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}")
        return entry

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._items)

    def entries(self) -> Iterable[Entry]:
        self.discover()
        return [self._items[n] for n in sorted(self._items)]

    def discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        mod = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(getattr(mod, "__path__", [])):
            importlib.import_module(f"{self.package}.{info.name}")
        if self._discover_more:
            self._discover_more(self)
        for ep in importlib.metadata.entry_points(group=self.group):
            try:
                ep.load()
            except Exception as e:   # a broken plug-in names itself
                raise ImportError(f"entry point {ep.name!r} = {ep.value!r} (group {self.group}) "
                                  f"failed to load: {e}") from e


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
