"""A PartitionChangeBlockRecord applies as its rows would one by one, keeps their offsets, and
refuses a malformed block without changing anything."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller.batching import chunk
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import MetadataDelta, MetadataImage
from quorum.metadata import change_block
from quorum.metadata.errors import ReplayError
from quorum.metadata.records import decode_record, encode_record, from_json, to_json
from tests.unit.metadata.metadata_helpers import partition, replay, topic, uid

TOPICS, PARTITIONS = 3, 8
LISTS = ("isr", "replicas", "removing_replicas", "adding_replicas", "eligible_leader_replicas", "last_known_elr")


def base_image() -> MetadataImage:
    records = []
    for t in range(TOPICS):
        records.append(topic(f"t{t}", t + 1))
        records += [partition(t + 1, p, [1, 2, 3]) for p in range(PARTITIONS)]
    return replay(MetadataImage.EMPTY, records)


broker_lists = st.lists(st.integers(0, 6), max_size=4, unique=True)


@st.composite
def a_change(draw) -> pb.PartitionChangeRecord:
    c = pb.PartitionChangeRecord(topic_id=uid(draw(st.integers(1, TOPICS))),
                                 partition_id=draw(st.integers(0, PARTITIONS - 1)))
    if draw(st.booleans()):
        c.leader = draw(st.integers(-1, 6))
    for name in LISTS:
        if draw(st.integers(0, 3)) == 0:
            field = getattr(c, name)
            field.SetInParent()  # an empty list is "now empty"
            field.ids.extend(draw(broker_lists))
    return c


def one_by_one(image: MetadataImage, changes) -> MetadataImage:
    return replay(image, changes)


@settings(max_examples=300, deadline=None)
@given(st.lists(a_change(), min_size=1, max_size=80))
def test_a_block_applies_as_its_rows_one_by_one(changes):
    image = base_image()
    block = change_block.block_of(changes)
    via_block = replay(image, [block] + [change_block.CONTINUATION] * (len(changes) - 1))
    assert via_block.topics == one_by_one(image, changes).topics
    # ...and its frame decodes to the same rows
    decoded = decode_record(encode_record(block))
    assert change_block.Columns(decoded.message).changes() == list(changes)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, TOPICS), st.integers(0, PARTITIONS - 1), st.integers(-1, 6)),
                min_size=1, max_size=60))
def test_an_election_block_applies_as_its_rows_one_by_one(elections):
    """(a block whose rows only move leaders takes a shorter path)"""
    image = base_image()
    changes = [pb.PartitionChangeRecord(topic_id=uid(t), partition_id=p, leader=leader) for t, p, leader in elections]
    block = change_block.block_of(changes)
    assert not block.isr and len(block.leaders) == len(changes)
    via_block = replay(image, [block] + [change_block.CONTINUATION] * (len(changes) - 1))
    assert via_block.topics == one_by_one(image, changes).topics


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(a_change(), st.just(pb.NoOpRecord())), max_size=200))
def test_pack_keeps_every_offset_and_each_change(records):
    packed = change_block.pack(records)
    assert len(packed) == len(records)  # one record per offset, as before
    frames = [change_block.CONTINUATION_BYTES if r is change_block.CONTINUATION else encode_record(r) for r in packed]
    assert [decode_record(f).message for f in change_block.unblocked(frames)] == list(records)
    runs = [r for r in packed if type(r) is pb.PartitionChangeBlockRecord]
    assert all(len(b.partition_ids) <= change_block.MAX_ROWS for b in runs)


def test_a_long_run_becomes_blocks_and_a_short_one_does_not():
    short = [pb.PartitionChangeRecord(topic_id=uid(1), partition_id=p, leader=2) for p in range(5)]
    assert change_block.pack(short) == short
    long = [pb.PartitionChangeRecord(topic_id=uid(1 + p % 2), partition_id=p, leader=2) for p in range(2500)]
    packed = change_block.pack(long)
    blocks = [i for i, r in enumerate(packed) if type(r) is pb.PartitionChangeBlockRecord]
    assert blocks == [0, 1000, 2000]
    assert len(packed[2000].partition_ids) == 500


def test_a_block_stays_in_one_batch_with_its_continuations():
    long = [pb.PartitionChangeRecord(topic_id=uid(1), partition_id=p, leader=2) for p in range(1500)]
    encoded = [encode_record(pb.NoOpRecord())] * 7 + [
        change_block.CONTINUATION_BYTES if r is change_block.CONTINUATION else encode_record(r)
        for r in change_block.pack(long)]
    chunks = chunk(encoded, max_records=1200, max_bytes=1 << 20)
    assert [len(c) for c in chunks] == [7 + 1000, 500]  # the second block would pass 1,200: a batch of its own
    for c in chunks:
        assert not c[0] == change_block.CONTINUATION_BYTES


def test_its_json_names_its_columns_and_reads_back():
    block = change_block.block_of([pb.PartitionChangeRecord(topic_id=uid(1), partition_id=p, leader=2,
                                                            isr=pb.BrokerIds(ids=[2, 3])) for p in range(3)])
    form = to_json(block)
    assert form["type"] == "PARTITION_CHANGE_BLOCK_RECORD"
    assert form["data"]["partition_ids"] == [0, 1, 2] and form["data"]["leaders"] == [2, 2, 2]
    assert from_json(form).message == block


@pytest.mark.parametrize("damage, error", [
    (lambda b: b.topic_rows.append(1), "topic runs"),
    (lambda b: b.leaders.append(3), "leaders"),
    (lambda b: b.isr.__setitem__(0, 7), "names list 7"),
    (lambda b: b.isr.__setitem__(0, -5), "names list -5"),
    (lambda b: b.list_lengths.append(9), "run past"),
    (lambda b: b.list_ids.append(9), "in no list"),
    (lambda b: b.partition_ids.__setitem__(2, 99), "no such partition"),
    (lambda b: b.leaders.__setitem__(0, -3), "below -2"),
])
def test_a_malformed_block_changes_nothing(damage, error):
    image = base_image()
    block = change_block.block_of([pb.PartitionChangeRecord(topic_id=uid(1), partition_id=p, leader=2,
                                                            isr=pb.BrokerIds(ids=[2])) for p in range(3)])
    damage(block)
    delta = MetadataDelta(image)
    with pytest.raises(ReplayError, match=error):
        delta.replay(block)
    assert delta.apply().topics == image.topics


column_changes = st.lists(
    st.tuples(st.sampled_from(["t1", "t2", "t3"]), st.integers(0, 500),
              st.one_of(st.just(change_block.UNCHANGED_LEADER), st.integers(-1, 40)),
              st.one_of(st.none(), st.tuples(), st.lists(st.integers(0, 5), max_size=3, unique=True).map(tuple))),
    max_size=120).filter(lambda rows: all(leader != change_block.UNCHANGED_LEADER or isr is not None
                                          for _, _, leader, isr in rows))  # every row changes something


def _columns(rows) -> change_block.ChangeColumns:
    out = change_block.ChangeColumns()
    for tid, pid, leader, isr in rows:
        pids, leaders, isrs = out.topic(tid)
        pids.append(pid)
        leaders.append(leader)
        isrs.append(isr)
    return out


def _record(tid, pid, leader, isr) -> pb.PartitionChangeRecord:
    r = pb.PartitionChangeRecord(partition_id=pid, topic_id=tid)
    if leader != change_block.UNCHANGED_LEADER:
        r.leader = leader
    if isr is not None:
        r.isr.SetInParent()
        r.isr.ids.extend(isr)
    return r


@settings(max_examples=300, deadline=None)
@given(column_changes, st.integers(1, 50), st.integers(1, 60))
def test_change_columns_are_written_as_pack_writes_their_changes(rows, min_rows, max_rows):
    """Columns straight to blocks: the same blocks, continuations and records as packing one
    PartitionChangeRecord per change (a new leader, a new ISR, or both), in order; where blocks are
    not written, those records."""
    columns = _columns(rows)
    changes = [_record(*row) for row in rows]
    assert len(columns) == len(rows) and columns.changes() == changes
    masks: dict[str, int] = {}
    for tid, pid, leader, _ in rows:
        if leader != change_block.UNCHANGED_LEADER:
            masks[tid] = masks.get(tid, 0) | 1 << pid
    assert columns.leader_masks() == masks
    before = pb.TopicRecord(name="x", topic_id="a" * 22)  # another record around it stays where it is
    assert change_block.rows([before, columns, before]) == len(rows) + 2
    assert change_block.pack([before, columns, before], min_rows, max_rows) == \
        change_block.pack([before, *changes, before], 1 if len(rows) >= min_rows else len(rows) + 1, max_rows)
    assert change_block.expanded([before, columns, before]) == [before, *changes, before]


def test_records_without_leader_elections_are_not_copied():
    records = [pb.TopicRecord(name="x", topic_id="a" * 22)]
    assert change_block.expanded(records) is records and change_block.rows(records) == 1
