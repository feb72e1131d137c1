"""PMap: an immutable hash map whose updates copy only the path to the changed keys.

Why: a metadata image holds up to millions of partitions and every committed batch produces a new
image. Copying a dict per change would make applying a 10-record delta cost as much as the whole
cluster. A PMap is a hash trie (a simplified HAMT): internal nodes are 32-slot lists indexed by five
bits of ``hash(key)`` per level, leaves are plain dicts of at most ``LEAF_MAX`` entries (a dict is
the most compact and fastest thing CPython offers for a small map). An update copies the nodes on
the way to its leaf (at most 32 slots per level, ``LEAF_MAX`` entries in the leaf) and shares every
other node with the map it came from, so its cost is O(log n), not O(n).

Updates go through an ``Evolver`` (Clojure's "transient"): it copies a node the first time it
changes it and then mutates its own copy in place, so a delta of k keys copies each touched node
once. ``finish()`` hands back a new PMap and forgets which nodes it owns, so a finished map is never
mutated again. Nodes are never shrunk back when keys are removed: a map that shrank a lot keeps some
empty slots, which costs memory, not correctness.

Maps with fewer than ``LEAF_MAX`` keys are a single dict, so small maps (configs of one resource,
partitions of a typical topic) cost no more than a dict.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

LEAF_MAX = 128  # a leaf with more entries is split into an internal node (unless hash bits ran out)
_BITS = 5
_WIDTH = 1 << _BITS
_MASK = _WIDTH - 1
_MAX_SHIFT = 64  # hash() is 64 bits wide; past this keys that collide share one leaf
_MISSING: Any = object()


class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``evolver()`` gives a cheap way to derive changed copies."""

    __slots__ = ("_root", "_len")

    def __init__(self, _root: dict | list | None = None, _len: int = 0) -> None:
        self._root = {} if _root is None else _root
        self._len = _len

    @classmethod
    def from_dict(cls, d: dict[K, V]) -> PMap[K, V]:
        """A new map of ``d``'s items (``d`` is copied): one leaf, built at once, when it fits."""
        if len(d) <= LEAF_MAX:
            return cls(dict(d), len(d))
        return cls.from_items(d)

    @classmethod
    def from_items(cls, items: Mapping[K, V] | Any) -> PMap[K, V]:
        ev: Evolver[K, V] = Evolver(EMPTY)
        for k, v in (items.items() if isinstance(items, Mapping) else items):
            ev[k] = v
        return ev.finish()

    # -- reading --------------------------------------------------------------------------------
    def get(self, key: K, default: Any = None) -> Any:
        return _lookup(self._root, key, default)

    def getter(self) -> Callable[[K], V | None]:
        """``get`` as a function of the key alone, for many lookups in a row: a map held in one
        leaf (up to ``LEAF_MAX`` keys, such as one topic's partitions) hands out its dict's."""
        root = self._root
        if type(root) is dict:
            return root.get
        return lambda key: _lookup(root, key, None)

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        for leaf in self._leaves():
            yield from leaf

    def items(self) -> Iterator[tuple[K, V]]:  # type: ignore[override]
        for leaf in self._leaves():
            yield from leaf.items()

    def values(self) -> Iterator[V]:  # type: ignore[override]
        for leaf in self._leaves():
            yield from leaf.values()

    def __eq__(self, other: object) -> bool:
        if self is other or (isinstance(other, PMap) and self._root is other._root):
            return True
        if not isinstance(other, Mapping) or len(self) != len(other):
            return False
        for k, v in self.items():
            if other.get(k, _MISSING) != v:
                return False
        return True

    def __hash__(self) -> int:  # like frozenset: O(n), hashable when the values are
        return hash(frozenset(self.items()))

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"

    # -- deriving -------------------------------------------------------------------------------
    def evolver(self) -> Evolver[K, V]:
        return Evolver(self)

    def updated(self, changes: Mapping[K, V]) -> PMap[K, V]:
        """This map with ``changes`` set: a map held in one leaf that stays one is copied and
        updated as a dict (a balance changes half of every topic's partitions: a dict copy of a
        hundred entries beats fifty evolver writes)."""
        root = self._root
        if type(root) is dict:
            new = root.copy()
            new.update(changes)
            if len(new) <= LEAF_MAX:
                return PMap(new, len(new))
        ev = Evolver(self)
        for key, value in changes.items():
            ev[key] = value
        return ev.finish()

    def set(self, key: K, value: V) -> PMap[K, V]:
        ev = Evolver(self)
        ev[key] = value
        return ev.finish()

    def discard(self, key: K) -> PMap[K, V]:
        ev = Evolver(self)
        ev.discard(key)
        return ev.finish()

    def diff(self, newer: PMap[K, V]) -> Iterator[tuple[K, V | None, V | None]]:
        """(key, value here or None, value in ``newer`` or None) for every key whose value differs:
        subtrees the two maps share are skipped, so a map derived by a few updates costs a few
        paths, not a scan (how a follower of the image finds what one batch changed)."""
        stack = [(self._root, newer._root)]
        while stack:
            a, b = stack.pop()
            if a is b:
                continue
            if type(a) is list and type(b) is list:
                stack.extend((x if x is not None else {}, y if y is not None else {})
                             for x, y in zip(a, b) if x is not y)
                continue
            old, new = dict(_items(a)), dict(_items(b))
            for key, value in old.items():
                other = new.get(key, _MISSING)
                if other is _MISSING:
                    yield key, value, None
                elif other is not value and other != value:
                    yield key, value, other
            for key, value in new.items():
                if key not in old:
                    yield key, None, value

    # -- structure (for tests and memory accounting) -------------------------------------------
    def nodes(self) -> Iterator[dict | list]:
        """Every node of the trie; tests compare them by identity to prove sharing."""
        stack = [self._root]
        while stack:
            node = stack.pop()
            yield node
            if type(node) is list:
                stack.extend(child for child in node if child is not None)

    def _leaves(self) -> Iterator[dict]:
        return (node for node in self.nodes() if type(node) is dict)


EMPTY: PMap = PMap()


def _items(node: dict | list) -> Iterator[tuple[Any, Any]]:
    if type(node) is dict:
        yield from node.items()
        return
    for child in node:
        if child is not None:
            yield from _items(child)


def _lookup(node: dict | list, key: Any, default: Any) -> Any:
    h = hash(key)
    while type(node) is list:
        node = node[h & _MASK]
        if node is None:
            return default
        h >>= _BITS
    return node.get(key, default)


class Evolver(Generic[K, V]):
    """A mutable draft of a PMap. ``copied`` counts the slots and entries it had to copy."""

    __slots__ = ("_root", "_len", "_owned", "copied")

    def __init__(self, base: PMap[K, V]) -> None:
        self._root: dict | list = base._root
        self._len = base._len
        self._owned: dict[int, dict | list] = {}  # id -> node this evolver copied (kept alive)
        self.copied = 0

    def __len__(self) -> int:
        return self._len

    def get(self, key: K, default: Any = None) -> Any:
        return _lookup(self._root, key, default)

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING  # type: ignore[arg-type]

    def _own(self, node: dict | list) -> dict | list:
        if id(node) in self._owned:
            return node
        node = node.copy()
        self.copied += len(node)
        self._owned[id(node)] = node
        return node

    def _new(self, node: dict | list) -> dict | list:
        self._owned[id(node)] = node
        return node

    def __setitem__(self, key: K, value: V) -> None:
        h = hash(key)
        parent: list | None = None
        index = 0
        node = self._root = self._own(self._root)
        shift = 0
        while type(node) is list:
            parent, index = node, (h >> shift) & _MASK
            child = node[index]
            child = self._new({}) if child is None else self._own(child)
            node[index] = child
            node = child
            shift += _BITS
        if key not in node:
            self._len += 1
        node[key] = value
        if len(node) > LEAF_MAX and shift < _MAX_SHIFT:
            split = self._split(node, shift)
            if parent is None:
                self._root = split
            else:
                parent[index] = split

    def _split(self, leaf: dict, shift: int) -> list:
        children: list = [None] * _WIDTH
        for k, v in leaf.items():
            i = (hash(k) >> shift) & _MASK
            child = children[i]
            if child is None:
                child = children[i] = self._new({})
            child[k] = v
        return self._new(children)  # type: ignore[return-value]

    def discard(self, key: K) -> bool:
        """Remove ``key`` if present; True if it was. Copies nothing when it is absent."""
        if key not in self:
            return False
        h = hash(key)
        parent: list | None = None
        index = 0
        node = self._root = self._own(self._root)
        shift = 0
        while type(node) is list:
            parent, index = node, (h >> shift) & _MASK
            child = self._own(node[index])
            node[index] = child
            node = child
            shift += _BITS
        del node[key]
        self._len -= 1
        if not node and parent is not None:
            parent[index] = None
        return True

    def __delitem__(self, key: K) -> None:
        if not self.discard(key):
            raise KeyError(key)

    def finish(self) -> PMap[K, V]:
        """The current contents as a PMap; later changes through this evolver copy again."""
        self._owned = {}
        return PMap(self._root, self._len)
