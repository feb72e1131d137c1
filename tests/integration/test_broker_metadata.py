"""BrokerMetadataClient against three in-process controllers: it holds exactly the controller's
image, tells listeners every change in offset order, and a restart from its cache fetches only
what it missed."""
from __future__ import annotations

import logging
import os

import pytest
from conftest import wait_for
from test_controller_node import cluster  # noqa: F401  (fixture: 3 in-process ControllerNodes)

from quorum.broker.cache import CACHE_FILE, MetadataCache
from quorum.broker.metadata_client import BrokerMetadataClient
from quorum.controller import api
from quorum.errors import Errors

pytestmark = pytest.mark.slow


def bootstrap_of(cluster) -> str:
    return ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())


def same_as_controller(client, node) -> bool:
    """True once the client and controller ``node`` have applied the same offset and hold equal
    images there (NoOps keep both moving, so this is polled)."""
    def check(core):
        return client.applied_offset == core.last_committed_offset and client.image == core.image

    return node.call(check).result(5)


def replayed_on_active(cluster) -> int:
    """The active controller's replayed offset: every write it answered is at or below it (it
    answers once its records are replayed). A standby may be a fetch behind."""
    return cluster.nodes[cluster.active()].call(lambda core: core.last_committed_offset).result(5)


def first_run(cluster, cache_dir, topic: str) -> BrokerMetadataClient:
    """A broker's first run: it follows the log until ``topic`` exists, then stops cleanly."""
    cluster.active()
    cluster.register_brokers()
    first = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir, fetch_wait_ms=100)
    first.start()
    cluster.client.create_topic(topic, 3, 3)
    wait_for(lambda: first.image.topics.topic_by_name(topic) is not None, 10, f"topic {topic}")
    first.stop()
    return first


def test_follows_the_log_holds_the_controllers_image_and_publishes_in_order(cluster):
    cluster.active()
    cluster.register_brokers()
    updates = []
    client = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, fetch_wait_ms=100)
    client.add_listener(updates.append)
    client.start()
    try:
        assert client.stats.bootstrap_source == "log"
        cluster.client.create_topic("orders", 6, 3)
        cluster.client.create_topic("payments", 2, 2, [("retention.ms", "1000")])
        cluster.client.delete_topic("orders")
        deleted_at = replayed_on_active(cluster)  # controller 2 may be a standby a fetch behind
        wait_for(lambda: client.applied_offset >= deleted_at and same_as_controller(client, cluster.nodes[2]), 15,
                 "the broker to match controller 2 past the delete")
        image = client.image
        assert image.topics.topic_by_name("orders") is None
        assert len(image.topics.topic_by_name("payments").partitions) == 2
    finally:
        client.stop(save=False)
    # every update follows the previous one, and records inside are in offset order
    for before, after in zip(updates, updates[1:]):
        assert after.first_offset == before.last_offset + 1
    offsets = [o for u in updates for o, _ in u.records]
    assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
    assert updates[0].first_offset == 0 and updates[-1].last_offset == client.applied_offset
    names = [r.message.name for u in updates for _, r in u.records if type(r.message).__name__ == "TopicRecord"]
    assert names == ["orders", "payments"]


def test_a_restart_from_the_cache_fetches_only_what_it_missed(cluster, tmp_path):
    cache_dir = tmp_path / "broker-101"
    stopped_at = first_run(cluster, cache_dir, "before").next_offset  # a first clean stop writes the cache
    assert (cache_dir / CACHE_FILE).exists()

    for i in range(10):  # 10 x (1 TopicRecord + 1,000 PartitionRecords) while the broker is down
        # (a write whose first attempt timed out on a busy machine is retried: TOPIC_ALREADY_EXISTS
        # then means the first attempt was committed, as the client's contract says)
        (r,) = cluster.client.create_topics([api.CreatableTopic(f"missed-{i}", 1000, 1)])
        assert r.error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS), r

    created_at = replayed_on_active(cluster)
    second = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir, fetch_wait_ms=100)
    second.start()
    try:
        assert second.stats.bootstrap_source == "cache" and second.stats.bootstrap_offset == stopped_at - 1
        wait_for(lambda: second.applied_offset >= created_at and same_as_controller(second, cluster.nodes[1]), 20,
                 "the restarted broker to catch up")
        fetched = second.stats.records_fetched
        missed = second.next_offset - stopped_at
        assert 10_010 <= missed == fetched, "it fetched exactly what came after its cache"
        assert fetched < second.next_offset  # ...not the log from offset 0
        assert len(second.image.topics.topic_names()) == 11
    finally:
        second.stop(save=False)


@pytest.mark.parametrize("crash", [False, True], ids=["clean stop", "torn copy"])
def test_a_stop_writes_no_image_and_a_restart_replays_its_own_copy_of_the_log(cluster, tmp_path, crash):
    """Only the first stop writes a cache; after that a stop flushes the broker's copy of the log
    (milliseconds, where an image at 2M partitions takes seconds), and a restart replays it after
    the cache. A copy torn by a crash is replayed as far as it is whole; the rest is fetched."""
    from quorum.broker.local_log import LOG_DIR

    cache_dir = tmp_path / "b"
    first_run(cluster, cache_dir, "cached")
    cached_at = MetadataCache(cache_dir, cluster.cluster_id).load()[1]

    second = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir, fetch_wait_ms=5000)
    second.start()
    assert second.stats.bootstrap_source == "cache" and second.next_offset == cached_at
    cluster.client.create_topic("after", 200, 3)
    wait_for(lambda: second.image.topics.topic_by_name("after") is not None, 10, "the second topic")
    cluster.client.create_topic("last", 3, 3)  # its batch is the one a crash tears
    wait_for(lambda: second.image.topics.topic_by_name("last") is not None, 10, "the third topic")
    second.stop()  # without waiting for its long poll (5 s here) to end
    stopped_at = second.next_offset
    assert MetadataCache(cache_dir, cluster.cluster_id).load()[1] == cached_at, "the stop wrote no image"
    cluster.client.create_topic("while-stopped", 3, 3)
    assert second.next_offset == stopped_at and second.image.topics.topic_by_name("while-stopped") is None
    if crash:
        last = sorted((cache_dir / LOG_DIR).glob("*.log"))[-1]
        os.truncate(last, last.stat().st_size - 5)

    third = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir, fetch_wait_ms=100)
    third.start()
    try:
        assert third.stats.bootstrap_source == "cache"
        replayed = third.stats.records_replayed_locally
        assert (200 < replayed < stopped_at - cached_at) if crash else replayed == stopped_at - cached_at
        wait_for(lambda: same_as_controller(third, cluster.nodes[cluster.active()]), 20, "the restarted broker to catch up")
        assert third.image.topics.topic_by_name("last") is not None
        wait_for(lambda: third.image.topics.topic_by_name("while-stopped") is not None, 10, "the topic made while stopped")
        assert third.stats.records_fetched == third.next_offset - cached_at - replayed, "fetched only the rest"
    finally:
        third.stop(save=False)


def test_a_foreign_or_damaged_cache_is_discarded_with_a_warning(cluster, tmp_path, caplog):
    cluster.active()
    cache_dir = tmp_path / "b"
    client = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir)
    client.bootstrap()
    client.poll(wait_ms=100)
    client.stop()
    good = (cache_dir / CACHE_FILE).read_bytes()

    MetadataCache(cache_dir, "Some0ther0Cluster0Idxx").save(client.image, 10**6)  # a foreign cache
    (cache_dir / CACHE_FILE).write_bytes(good[:len(good) // 2])  # ...and then a torn one
    for damaged in (good[:len(good) // 2], good[:-3] + b"xyz"):
        (cache_dir / CACHE_FILE).write_bytes(damaged)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            again = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir)
            again.bootstrap()
            again.stop(save=False)
        assert again.stats.bootstrap_source == "log"  # from offset 0: replayed from its own copy of the log
        assert again.next_offset == again.stats.records_replayed_locally > 0
        assert "Discarding the metadata cache" in caplog.text
        assert not (cache_dir / CACHE_FILE).exists()

    MetadataCache(cache_dir, "Some0ther0Cluster0Idxx").save(client.image, 10**6)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        foreign = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir)
        foreign.bootstrap()
        foreign.stop(save=False)
    assert foreign.stats.bootstrap_source == "log" and "belongs to cluster" in caplog.text


def test_the_cache_is_written_in_the_background_while_following(cluster, tmp_path):
    cluster.active()
    cluster.register_brokers()
    client = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, tmp_path / "b",
                                  cache_every_records=50, fetch_wait_ms=100)
    client.start()
    try:
        cluster.client.create_topic("big", 200, 1)
        wait_for(lambda: client.stats.cache_writes >= 1 and client.image.topics.topic_by_name("big"), 15,
                 "a cache write after 50 records")
        image, next_offset = MetadataCache(tmp_path / "b", cluster.cluster_id).load()
        assert next_offset > 50 and image.offset < next_offset
        # the cached image is the image the client held at that offset: replaying the rest of the
        # log from there reaches the client's current image
        from quorum.metadata.loader import MetadataLoader
        from quorum.rpc.log_reader import MetadataLogReader, replay

        with MetadataLogReader(bootstrap_of(cluster)) as reader:
            until = client.next_offset
            rest = replay(MetadataLoader(image), reader.follow(next_offset, until=until, wait_ms=100))
        assert rest.topics == client.image.topics
    finally:
        client.stop(save=False)


def test_a_big_image_waits_for_as_many_records_as_writing_its_cache_costs(cluster, tmp_path):
    """Past ``cache_every_records``, an image of P partitions waits for P x CACHE_COST_IN_RECORDS
    records before its cache is written again: replaying them costs about what writing it does."""
    cluster.active()
    cluster.register_brokers()
    client = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, tmp_path / "b",
                                  cache_every_records=50, fetch_wait_ms=100)
    client.bootstrap()

    def follow_then_maybe_save() -> int:
        target = replayed_on_active(cluster)
        while client.applied_offset < target:
            client.poll(wait_ms=100)
        client._maybe_save_cache()
        if client._cache_writer is not None:
            client._cache_writer.join(30)
        return client.stats.cache_writes

    try:
        cluster.client.create_topic("big", 800, 1)  # 800 x 0.25: 200 records between writes from now
        assert follow_then_maybe_save() == 1
        for i in range(50):  # 100 records: more than cache_every_records, fewer than 200
            cluster.client.create_topic(f"small-{i}", 1, 1)
        assert follow_then_maybe_save() == 1
        for i in range(50, 150):  # 200 more: past 960 x 0.25
            cluster.client.create_topic(f"small-{i}", 1, 1)
        assert follow_then_maybe_save() == 2
    finally:
        client.stop(save=False)


def test_a_broker_bootstraps_from_the_delta_cut_and_fetches_only_what_follows(cluster, tmp_path):
    """The warehouse is written by the materialiser (fed straight from the log, no Spark here);
    the broker loads the cut's image, which equals the controller's at that offset, and then
    fetches only the records after it."""
    from delta_tables.bootstrap import image_from_cut
    from delta_tables.cut import latest_cut
    from delta_tables.writer import DeltaRsWriter
    from quorum.rpc.log_reader import MetadataLogReader
    from streaming.materializer import Materializer
    from streaming.source import record_row

    sys_path_streaming()
    from test_materializer import as_batch

    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("orders", 6, 3)
    cluster.client.create_topic("payments", 2, 2, [("retention.ms", "1000")])
    wh = str(tmp_path / "wh")
    with MetadataLogReader(bootstrap_of(cluster)) as reader:
        hw = reader.high_watermark()
        rows = [record_row(r.offset, r.epoch, r.append_time_ms, r.data, r.control)
                for r in reader.follow(0, until=hw, wait_ms=100)]
    Materializer(DeltaRsWriter(wh)).process(as_batch(rows))
    cut = latest_cut(wh)
    assert cut.offset == hw - 1
    cluster.client.create_topic("after-the-cut", 3, 3)
    with MetadataLogReader(bootstrap_of(cluster)) as reader:
        created_by = reader.high_watermark() - 1  # the create is committed at or before this offset

    client = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, tmp_path / "b",
                                  bootstrap_source=lambda: image_from_cut(wh), fetch_wait_ms=100)
    client.bootstrap()
    assert client.stats.bootstrap_source == "delta" and client.stats.bootstrap_offset == cut.offset
    client.follow()
    try:
        assert client.wait_for(created_by, 15), "the broker did not catch up"
        assert client.image.topics.topic_by_name("after-the-cut") is not None
        wait_for(lambda: same_as_controller(client, cluster.nodes[3]), 15, "the broker to equal controller 3")
        assert client.stats.records_fetched == client.next_offset - (cut.offset + 1)
    finally:
        client.stop(save=False)


def sys_path_streaming():
    import sys
    from pathlib import Path

    path = str(Path(__file__).parent.parent / "streaming")
    if path not in sys.path:
        sys.path.insert(0, path)


def test_a_copy_of_the_log_that_does_not_replay_is_discarded_and_the_rest_fetched(cluster, tmp_path, caplog):
    """Records in the broker's copy that do not apply to its cache (a copy from elsewhere, or
    damage with valid CRCs): the image is the cache's again, the copy goes, the quorum is asked."""
    from quorum.broker.local_log import LOG_DIR, LocalMetadataLog
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.metadata.records import encode_record
    from quorum.rpc.log_reader import LogRecord

    cache_dir = tmp_path / "b"
    first_run(cluster, cache_dir, "cached")
    cached_at = MetadataCache(cache_dir, cluster.cluster_id).load()[1]
    junk = LocalMetadataLog(cache_dir)
    junk.restart_at(cached_at)
    no_such_topic = encode_record(pb.PartitionChangeRecord(topic_id="AAAAAAAAAAAAAAAAAAAD5w", partition_id=0, leader=5))
    junk.append([LogRecord(cached_at, 1, 0, no_such_topic)])
    junk.flush()
    junk.close()

    cluster.client.create_topic("later", 3, 3)
    with caplog.at_level(logging.WARNING, logger="quorum.broker.metadata_client"):
        again = BrokerMetadataClient(bootstrap_of(cluster), cluster.cluster_id, cache_dir, fetch_wait_ms=100)
        again.start()
    try:
        assert "Discarded the broker's copy of the metadata log" in caplog.text
        assert again.stats.records_replayed_locally == 0 and again.stats.bootstrap_offset == cached_at - 1
        wait_for(lambda: same_as_controller(again, cluster.nodes[cluster.active()]), 20, "the broker to catch up")
        assert again.image.topics.topic_by_name("later") is not None
        assert list((cache_dir / LOG_DIR).glob("*.log")), "a fresh copy is kept from there on"
    finally:
        again.stop(save=False)
