"""MetadataLogReader against real quorums: it returns exactly the committed log, in order, once,
follows the leader across a SIGKILL, and its image equals the controllers' own."""
from __future__ import annotations

import threading

import pytest
from conftest import wait_for
from test_controller_node import cluster  # noqa: F401  (fixture: 3 in-process ControllerNodes)

from quorum.errors import Errors, SparkraftError
from quorum.log.file_log import FileLog
from quorum.log.meta_properties import random_cluster_id
from quorum.metadata.loader import MetadataLoader
from quorum.rpc.log_reader import MetadataLogReader, read_image, replay

pytestmark = pytest.mark.slow


def test_read_image_equals_every_controllers_committed_image(cluster):
    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("orders", 6, 3, [("retention.ms", "1000")])
    cluster.client.create_topic("payments", 3, 2)
    cluster.client.delete_topic("payments")
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())

    node = cluster.nodes[1]
    with MetadataLogReader(bootstrap) as reader:
        hw = reader.high_watermark()  # the leader's, asked after the delete was acknowledged
    wait_for(lambda: node.call(lambda core: core.last_committed_offset >= hw - 1).result(5), 10,
             "controller 1 to replay the delete")
    committed = node.call(lambda core: core.image).result(5)
    with MetadataLogReader(bootstrap) as reader:
        loader = MetadataLoader()
        image = replay(loader, reader.follow(0, until=committed.offset + 1, wait_ms=200))
    assert image == committed
    assert image.topics.topic_by_name("payments") is None
    assert len(image.topics.topic_by_name("orders").partitions) == 6

    whole = read_image(bootstrap)  # up to the high watermark at call time: NoOps may have followed
    assert whole.offset >= committed.offset
    assert whole.topics == committed.topics and whole.configs == committed.configs


def test_reads_wait_for_commits_and_refuse_a_foreign_cluster(cluster):
    cluster.active()
    cluster.register_brokers()
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    with MetadataLogReader(bootstrap) as reader:
        hw = reader.high_watermark()
        assert hw > 0  # the LeaderChange record at least
        chunk = reader.read(0)
        assert chunk.records and chunk.records[0].offset == 0
        assert all(r.offset < chunk.high_watermark for r in chunk.records)
        offsets = [r.offset for r in chunk.records]
        assert offsets == list(range(len(offsets)))
        # Ahead of the log: nothing, after waiting, and no error.
        far = reader.read(chunk.high_watermark + 1_000, wait_ms=100)
        assert far.records == [] and far.next_offset == chunk.high_watermark + 1_000
        # A record committed while the reader long-polls is returned by that poll.
        start = reader.high_watermark()
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("c", reader.read(start, wait_ms=5_000)))
        t.start()
        cluster.client.create_topic("late", 1, 1)
        t.join(10)
        assert not t.is_alive() and got["c"].records
        assert got["c"].records[0].offset == start
    with pytest.raises(SparkraftError) as e:
        with MetadataLogReader(bootstrap, cluster_id=random_cluster_id(), timeout=2) as reader:
            reader.read(0)
    assert e.value.error is Errors.INCONSISTENT_CLUSTER_ID


def test_fetches_take_the_leaders_wire_and_a_long_poll_learns_the_commit_there(cluster):
    """A reader's fetches go on the leader's wire (answered from its event loop when the high
    watermark moves; gRPC held a server thread per long poll and passed the answer on late): each
    fetch is served by the wire's Fetch handler, and a write committed during a long poll is
    returned by it."""
    from quorum.rpc.wire_methods import BY_NAME

    active = cluster.nodes[cluster.active()]
    cluster.register_brokers()
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    number = BY_NAME["Fetch"].number
    handler, served = active.raft.wire.handlers[number], []
    active.raft.wire.handlers[number] = lambda conn, msg: (served.append(msg.replica_id), handler(conn, msg))[1]
    try:
        with MetadataLogReader(bootstrap) as reader:
            start = reader.high_watermark()
            got = {}
            t = threading.Thread(target=lambda: got.setdefault("c", reader.read(start, wait_ms=5_000)))
            t.start()
            wait_for(lambda: -1 in served, 10, "the reader's long poll on the wire")
            cluster.client.create_topic("wired-poll", 1, 1)
            t.join(10)
            assert not t.is_alive() and got["c"].records and got["c"].records[0].offset == start
            assert reader._wires, "the reader did not take the wire"
    finally:
        active.raft.wire.handlers[number] = handler


def test_following_survives_sigkill_of_the_leader_and_matches_the_log_on_disk(controller_processes):
    """Controller processes append a NoOp every 500 ms, so the log grows by itself. A reader follows
    it while the leader is SIGKILLed: it sees every offset once, in order, and exactly the records
    a surviving controller has on disk."""
    cp = controller_processes()
    cp.format()
    cp.start()
    first = cp.wait_leader()
    seen = []
    stop = threading.Event()
    errors = []

    def follow():
        try:
            with MetadataLogReader(cp.bootstrap(), timeout=30) as reader:
                offset = 0
                while not stop.is_set():
                    chunk = reader.read(offset, wait_ms=200)
                    seen.extend(chunk.records)
                    offset = chunk.next_offset
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    wait_for(lambda: len(seen) >= 3, 15, "the reader to see a few records")
    cp.kill(first.leader_id)
    second = cp.wait_leader(exclude=(first.leader_id,))
    before = len(seen)
    wait_for(lambda: seen and seen[-1].epoch == second.leader_epoch and len(seen) > before + 2, 20,
             "records of the new leader's epoch")
    stop.set()
    t.join(10)
    assert not errors, errors
    assert [r.offset for r in seen] == list(range(len(seen)))

    survivor = next(i for i in cp.voters if i != first.leader_id)
    cp.stop(survivor)
    log = FileLog(cp.partition_dir(survivor))
    try:
        on_disk = {}
        for batch in log.batches(0, seen[-1].offset + 1):
            for i, raw in enumerate(batch.records):
                on_disk[batch.base_offset + i] = (batch.epoch, raw, batch.control)
    finally:
        log.close()
    assert all(on_disk[r.offset] == (r.epoch, r.data, r.control) for r in seen)


def test_a_change_block_reads_as_one_partition_change_per_offset_where_asked(cluster):
    """A reassignment of 100 partitions is written as blocks; a reader that unblocks (the lakehouse's)
    gets one PartitionChangeRecord per offset, and one that does not gets the blocks; both images
    equal the controllers'."""
    from quorum.controller import api
    from quorum.metadata import change_block
    from quorum.metadata.records import RecordType, decode_record

    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("wide", 100, 3)
    topic = cluster.client.describe_topics(["wide"])[0]
    rotated = [(api.TopicPartition("wide", p.partition), p.replicas[1:] + p.replicas[:1]) for p in topic.partitions]
    assert all(r.error is Errors.NONE for r in cluster.client.alter_reassignments(rotated))
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    with MetadataLogReader(bootstrap) as reader:
        hw = reader.high_watermark()
        stored = list(reader.follow(0, until=hw, wait_ms=200))
    with MetadataLogReader(bootstrap, unblock=True) as reader:
        unblocked = list(reader.follow(0, until=hw, wait_ms=200))
    assert [r.offset for r in stored] == [r.offset for r in unblocked] == list(range(hw))
    blocks = [r.offset for r in stored if not r.control and r.data[:2] == change_block.BLOCK_PREFIX]
    assert blocks, "the reassignment of 100 partitions was not written as a block"
    kinds = {decode_record(r.data).type for r in unblocked if not r.control}
    assert RecordType.PARTITION_CHANGE_BLOCK_RECORD not in kinds
    assert RecordType.PARTITION_CHANGE_BLOCK_CONTINUATION_RECORD not in kinds
    changes = [decode_record(r.data).message for r in unblocked[blocks[0]:blocks[0] + 100]]
    assert sorted(c.partition_id for c in changes) == list(range(100)) and all(c.HasField("replicas") for c in changes)
    node = cluster.nodes[cluster.active()]
    wait_for(lambda: node.call(lambda core: core.last_committed_offset >= hw - 1).result(5), 10, "the commit")
    committed = node.call(lambda core: core.image).result(5)
    for records in (stored, unblocked):
        image = replay(MetadataLoader(), [r for r in records if r.offset <= committed.offset])
        assert image.topics == committed.topics
