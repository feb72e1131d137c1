"""``bench day2``'s PartitionHealth (the under-replicated and imbalanced partitions it waits on,
kept from each metadata update instead of scanning the image) agrees with a scan of the image
after every batch, through ISR shrinks and expansions, elections and multi-batch transactions."""
from __future__ import annotations

from controller_helpers import controller, create, heartbeat

from bench.day2_bench import PartitionHealth
from quorum.broker.metadata_client import MetadataUpdate
from quorum.controller import api
from quorum.metadata.loader import MetadataLoader
from quorum.metadata.records import decode_record


def _scan(image) -> tuple[int, int]:
    partitions = [p for t in image.topics.by_id.values() for p in t.partitions.values()]
    return (sum(len(p.isr) < len(p.replicas) for p in partitions),
            sum(p.leader != p.replicas[0] for p in partitions))


class Follower:
    """A broker's view: each committed batch replayed, then handed to the listener with the image
    its loader publishes (which stays at a transaction's start until the transaction ends)."""

    def __init__(self, c, health: PartitionHealth):
        self.c, self.health, self.loader, self.seen = c, health, MetadataLoader(), 0
        self.checked = 0

    def follow(self) -> None:
        for b in self.c.log[self.seen:]:
            if not b.control:
                records = tuple((b.base_offset + i, decode_record(raw)) for i, raw in enumerate(b.records))
                for offset, record in records:
                    self.loader.replay(record, offset, b.epoch)
                image = self.loader.flush()
                self.health.on_update(MetadataUpdate(b.base_offset, b.last_offset, records, image))
                under, imbalanced, pending = self.health.counts(image)
                if not pending:
                    assert (under, imbalanced) == _scan(image)
                    self.checked += 1
        self.seen = len(self.c.log)


def test_partition_health_agrees_with_a_scan_after_every_batch():
    c, epochs = controller(4, max_records_per_batch=3)  # operations of more than 3 records: transactions
    create(c, "t", 12, 3)
    follower = Follower(c, PartitionHealth())
    follower.follow()
    assert follower.health.counts(follower.loader.image)[:2] == (0, 0)
    heartbeat(c, 1, epochs[1], want_shutdown=True)  # leaves every ISR, its leaderships move
    follower.follow()
    under, imbalanced, pending = follower.health.counts(follower.loader.image)
    assert under > 0 and imbalanced > 0 and not pending
    heartbeat(c, 1, epochs[1], want_shutdown=False)
    image = c.core.image
    epochs[1] = image.cluster.brokers[1].broker_epoch
    by_leader: dict[int, list] = {}
    for t in image.topics.by_id.values():
        for pid, p in t.partitions.items():
            if 1 in p.replicas and 1 not in p.isr:
                by_leader.setdefault(p.leader, []).append(
                    api.PartitionIsr(t.topic_id, pid, p.leader_epoch, p.partition_epoch, p.isr + (1,)))
    for leader, partitions in by_leader.items():
        c.request(api.AlterPartitionRequest(leader, epochs[leader], tuple(partitions)))
    follower.follow()
    assert follower.health.counts(follower.loader.image)[0] == 0
    c.request(api.ElectLeadersRequest("PREFERRED", None))
    follower.follow()
    assert follower.health.counts(follower.loader.image) == (0, 0, False)
    assert follower.checked >= 6
