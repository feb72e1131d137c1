"""Record batches decode to exactly what was encoded, runs of identical records included (a
partition change block's continuations are decoded in bulk)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.log.batch import CorruptBatchError, decode, encode_batch

CONTINUATION = b"\x7e\x02\x00\x00"
records = st.lists(st.one_of(
    st.just(CONTINUATION), st.binary(max_size=20), st.binary(min_size=17, max_size=60),
    st.tuples(st.just(CONTINUATION), st.integers(1, 2500)).map(lambda t: [t[0]] * t[1]),
    st.tuples(st.binary(max_size=16), st.integers(2, 40)).map(lambda t: [t[0]] * t[1])), min_size=1, max_size=30)


def _flat(items) -> list[bytes]:
    out = []
    for item in items:
        out.extend(item if isinstance(item, list) else [item])
    return out


@settings(max_examples=300, deadline=None)
@given(records)
def test_a_batch_decodes_to_its_records(items):
    recs = _flat(items)
    (batch,) = decode(encode_batch(7, 2, 1000, recs))
    assert list(batch.records) == recs and batch.end_offset == 7 + len(recs)


def test_a_long_run_is_one_object_repeated_and_its_end_is_exact():
    recs = [b"block"] + [CONTINUATION] * 2999 + [CONTINUATION[:3]] + [CONTINUATION] * 5
    (batch,) = decode(encode_batch(0, 1, 0, recs))
    assert list(batch.records) == recs
    assert len({id(r) for r in batch.records[1:3000]}) == 1


def test_lengths_that_do_not_add_up_are_still_caught():
    data = bytearray(encode_batch(0, 1, 0, [CONTINUATION] * 10))
    data[30:34] = (11).to_bytes(4, "big")  # says one record more than it holds
    with pytest.raises(CorruptBatchError, match="do not add up"):
        decode(bytes(data), verify=False)
