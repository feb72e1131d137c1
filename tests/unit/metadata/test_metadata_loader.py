"""MetadataLoader publishes batches, and transactions all at once or not at all."""
from __future__ import annotations

import pytest
from metadata_helpers import partition, topic, uid

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import MetadataImage, MetadataLoader, Provenance, ReplayError

BEGIN = pb.BeginTransactionRecord(name="t")
END, ABORT = pb.EndTransactionRecord(), pb.AbortTransactionRecord()


def names(loader: MetadataLoader) -> list[str]:
    return loader.image.topics.topic_names()


def test_a_batch_is_published_with_its_last_offset_and_epoch():
    loader = MetadataLoader()
    image = loader.load_batch([topic("a", 1), partition(1, 0, [1])], base_offset=0, epoch=3)
    assert image is loader.image and image.provenance == Provenance(1, 3) and names(loader) == ["a"]
    assert loader.flush() is image  # nothing new: the same image


def test_records_before_begin_are_published_then_the_transaction_waits_for_end():
    loader = MetadataLoader()
    for offset, record in enumerate([topic("a", 1), BEGIN, topic("b", 2), partition(2, 0, [1])]):
        loader.replay(record, offset, epoch=1)
    assert loader.in_transaction
    image = loader.flush()
    assert names(loader) == ["a"] and image.provenance == Provenance(0, 1)  # never inside the txn
    loader.replay(topic("c", 3), 4, epoch=2)
    assert loader.flush() is image  # still open, even across batches and epochs
    loader.replay(END, 5, epoch=2)
    assert not loader.in_transaction
    image = loader.flush()
    assert names(loader) == ["a", "b", "c"] and image.provenance == Provenance(5, 2)


def test_an_aborted_transaction_leaves_no_trace_but_the_offset_moves_on():
    loader = MetadataLoader()
    before = loader.load_batch([topic("a", 1)], 0, 1)
    after = loader.load_batch([BEGIN, topic("b", 2), pb.RemoveTopicRecord(topic_id=uid(1)), ABORT], 1, 1)
    assert names(loader) == ["a"] and after.topics is before.topics
    assert after.provenance == Provenance(4, 1)
    assert loader.load_batch([topic("b", 2)], 5, 1).topics.topic_names() == ["a", "b"]


@pytest.mark.parametrize("records, match", [
    ([BEGIN, BEGIN], "inside the transaction begun at 0"),
    ([END], "outside a transaction"),
    ([ABORT], "outside a transaction"),
])
def test_markers_out_of_place_are_refused(records, match):
    loader = MetadataLoader()
    with pytest.raises(ReplayError, match=match):
        for offset, record in enumerate(records):
            loader.replay(record, offset, 1)


def test_a_refused_record_changes_nothing_and_replay_can_go_on():
    loader = MetadataLoader()
    loader.replay(topic("a", 1), 0, 1)
    with pytest.raises(ReplayError):
        loader.replay(partition(9, 0, [1]), 1, 1)
    with pytest.raises(ReplayError, match="not after"):
        loader.replay(topic("b", 2), 0, 1)
    assert loader.last_offset == 0
    loader.replay(topic("b", 2), 1, 1)
    assert loader.flush().topics.topic_names() == ["a", "b"]


def test_reset_starts_from_a_given_image():
    loader = MetadataLoader()
    loader.load_batch([topic("a", 1)], 0, 1)
    loader.replay(BEGIN, 1, 1)
    loader.reset(MetadataImage.EMPTY)
    assert not loader.in_transaction and loader.flush() is MetadataImage.EMPTY
