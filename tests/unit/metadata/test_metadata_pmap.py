"""PMap behaves like an immutable dict, and an update copies only the path to its key."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from metadata_helpers import depth, new_nodes

from quorum.metadata.pmap import EMPTY, LEAF_MAX, PMap


class Colliding:
    """Keys that all hash alike: they must still be told apart, at any depth."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return 12345

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Colliding) and other.n == self.n


keys = st.one_of(st.integers(-10**6, 10**6), st.text(max_size=4), st.integers(0, 50).map(Colliding))
ops = st.lists(st.tuples(st.booleans(), keys, st.integers()), max_size=600)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(1, 40))
def test_pmap_matches_a_dict_and_old_versions_never_change(operations, every):
    model: dict = {}
    pmap: PMap = EMPTY
    history: list[tuple[PMap, dict]] = []
    ev = pmap.evolver()
    for i, (is_set, key, value) in enumerate(operations):
        if is_set:
            ev[key] = value
            model[key] = value
        else:
            assert ev.discard(key) == (key in model)
            model.pop(key, None)
        if i % every == 0:  # finish now and then: later changes must not leak into this version
            pmap = ev.finish()
            history.append((pmap, dict(model)))
    history.append((ev.finish(), dict(model)))
    for version, expected in history:
        assert len(version) == len(expected)
        assert dict(version.items()) == expected
        assert version == expected and version == PMap.from_items(expected)
        get = version.getter()
        for key, value in expected.items():
            assert key in version and version[key] == value and get(key) == value
        for absent in (10**7, "absent", Colliding(99)):
            assert get(absent) is None


def test_one_update_copies_one_path_and_shares_every_other_node():
    big = PMap.from_items((f"topic-{i}", i) for i in range(100_000))
    levels = depth(big)
    assert levels >= 3  # a real trie, not one dict

    ev = big.evolver()
    ev["topic-77"] = -1
    changed = ev.finish()

    assert changed["topic-77"] == -1 and big["topic-77"] == 77  # the old map is untouched
    fresh = new_nodes(big, changed)
    assert len(fresh) <= levels  # one root-to-leaf path, nothing else
    assert ev.copied == sum(len(node) for node in fresh) <= 32 * (levels - 1) + LEAF_MAX


def test_an_evolver_copies_each_node_once_however_many_keys_change_under_it():
    big = PMap.from_items((i, i) for i in range(10_000))
    ev = big.evolver()
    ev[0] = "a"
    first = ev.copied
    for _ in range(100):
        ev[0] = "b"
        ev[32 * 32 * 32] = "c"  # another key under the same root
    assert ev.copied - first < LEAF_MAX + 32 * depth(big)


def test_removing_an_absent_key_copies_nothing():
    m = PMap.from_items({1: 1})
    ev = m.evolver()
    assert not ev.discard(2)
    assert ev.copied == 0 and ev.finish() == m


def test_equality_and_hash_follow_contents():
    a = PMap.from_items({i: str(i) for i in range(500)})
    b = PMap.from_items({i: str(i) for i in reversed(range(500))})
    assert a == b and hash(a) == hash(b)
    assert a != b.set(3, "x") and a != b.discard(3)
    assert a.set(3, "3") == a


def test_more_colliding_keys_than_a_leaf_holds():
    m = PMap.from_items((Colliding(i), i) for i in range(3 * LEAF_MAX))
    assert len(m) == 3 * LEAF_MAX and all(m[Colliding(i)] == i for i in range(3 * LEAF_MAX))
    smaller = m.discard(Colliding(5))
    assert Colliding(5) not in smaller and Colliding(5) in m and len(smaller) == 3 * LEAF_MAX - 1


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, st.integers(), max_size=300), st.dictionaries(keys, st.integers(), max_size=200))
def test_updated_is_the_map_with_the_changes_and_leaves_the_original(base, changes):
    pmap = PMap.from_items(base)
    new = pmap.updated(changes)
    assert dict(new.items()) == {**base, **changes} and len(new) == len({**base, **changes})
    assert dict(pmap.items()) == base  # untouched
    assert new.updated({}) == new
