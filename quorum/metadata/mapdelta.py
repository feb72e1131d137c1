"""Pending changes to a PMap (and to a PMap of PMaps): what most sub-deltas are made of.

A sub-delta records, per key, the new value or ``REMOVED``, reads through to its base map for keys
it did not touch, and ``apply()`` derives a new map through one evolver, so its cost is the number
of changed keys. A delta that changed nothing applies to its very base object: that identity is
how ``MetadataDelta.apply`` shares untouched sub-images.
"""
from __future__ import annotations

from typing import Any, Generic, TypeVar

from quorum.metadata.pmap import EMPTY, PMap

K = TypeVar("K")
K2 = TypeVar("K2")
V = TypeVar("V")


class _Removed:
    __slots__ = ()

    def __repr__(self) -> str:
        return "REMOVED"


REMOVED: Any = _Removed()
_MISSING: Any = object()


class MapDelta(Generic[K, V]):
    """Changes to one PMap: ``changes[key]`` is the new value or REMOVED."""

    __slots__ = ("base", "changes")

    def __init__(self, base: PMap[K, V]) -> None:
        self.base = base
        self.changes: dict[K, Any] = {}

    def get(self, key: K, default: Any = None) -> Any:
        value = self.changes.get(key, _MISSING)
        if value is _MISSING:
            return self.base.get(key, default)
        return default if value is REMOVED else value

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING  # type: ignore[arg-type]

    def set(self, key: K, value: V) -> None:
        self.changes[key] = value

    def remove(self, key: K) -> None:
        self.changes[key] = REMOVED

    def clear(self) -> None:
        """Remove every key (those of the base and those set since)."""
        self.changes = dict.fromkeys(self.base, REMOVED)

    def apply(self) -> PMap[K, V]:
        ev = None
        for key, value in self.changes.items():
            old = self.base.get(key, _MISSING)
            if old is value or old == value or (value is REMOVED and old is _MISSING):
                continue
            if ev is None:
                ev = self.base.evolver()
            if value is REMOVED:
                ev.discard(key)
            else:
                ev[key] = value
        return self.base if ev is None else ev.finish()


class NestedMapDelta(Generic[K, K2, V]):
    """Changes to a PMap of PMaps (resource -> key -> value); an emptied inner map is dropped."""

    __slots__ = ("base", "inner")

    def __init__(self, base: PMap[K, PMap[K2, V]]) -> None:
        self.base = base
        self.inner: dict[K, MapDelta[K2, V]] = {}

    def of(self, key: K) -> MapDelta[K2, V]:
        delta = self.inner.get(key)
        if delta is None:
            delta = self.inner[key] = MapDelta(self.base.get(key, EMPTY))
        return delta

    def apply(self) -> PMap[K, PMap[K2, V]]:
        ev = None
        for key, delta in self.inner.items():
            new = delta.apply()
            if new is delta.base:
                continue
            if ev is None:
                ev = self.base.evolver()
            if new:
                ev[key] = new
            else:
                ev.discard(key)
        return self.base if ev is None else ev.finish()
