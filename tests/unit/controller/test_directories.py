"""Log directories (KIP-858, metadata.version 3.7-IV2 and later), as Kafka's controller keeps them:
a new replica in its broker's only directory, UNASSIGNED where the broker has several, not known on
a broker without any; AssignReplicasToDirs moves a replica's directory; the image keeps them
through changes, snapshots and checkpoints, and reads replicas moved without them as not known."""
from __future__ import annotations

from controller_helpers import create, metadata_written, register

from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.controller.settings import ControllerSettings
from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.topics import MIGRATING, UNASSIGNED, PartitionRegistration
from quorum.snapshot.checkpoint import checkpoint_body

A, B, C = "Uvwkq7q1T9Cb96OVaGex7A", "CkQ1SrseSvGDApIStVUtIw", "5FVl8RDQSXWM5R7iCaavmA"


def cluster(level: int = 29) -> LocalController:
    c = LocalController(ControllerSettings(seed=3, bootstrap_metadata_version=level))
    register(c, 1, log_dirs=(A,))  # one directory
    register(c, 2, log_dirs=(B, C))  # JBOD: two
    register(c, 3)  # a sparkraft broker: none
    return c


def partition(c, topic: str, pid: int = 0) -> PartitionRegistration:
    return c.core.image.topics.topic_by_name(topic).partitions[pid]


def test_a_new_replica_starts_where_kafkas_controller_puts_it():
    c = cluster()
    assert c.core.image.cluster.broker(2).log_dirs == (B, C)
    create(c, "t", -1, -1, assignments=((1, 2, 3),))
    p = partition(c, "t")
    assert p.directories == (A, UNASSIGNED, MIGRATING)
    assert [p.directory_of(b) for b in (1, 2, 3, 9)] == [A, UNASSIGNED, MIGRATING, MIGRATING]


def test_below_3_7_iv2_registrations_and_partitions_carry_no_directories():
    c = cluster(level=14)  # 3.6-IV2
    assert c.core.image.cluster.broker(1).log_dirs == ()
    create(c, "t", -1, -1, assignments=((1, 2),))
    assert partition(c, "t").directories == ()


def test_assign_replicas_to_dirs_moves_a_replica_and_refuses_what_it_cannot_name():
    c = cluster()
    create(c, "t", -1, -1, assignments=((1, 2, 3), (2, 1, 3)))
    epoch = c.core.image.cluster.broker(2).broker_epoch
    topic_id = c.core.image.topics.topic_by_name("t").topic_id
    before = partition(c, "t").partition_epoch
    results = c.request(api.AssignReplicasToDirsRequest(2, epoch, (
        api.DirectoryAssignment(topic_id, 0, C), api.DirectoryAssignment(topic_id, 1, B),
        api.DirectoryAssignment(topic_id, 7, B), api.DirectoryAssignment("AAAAAAAAAAAAAAAAAAAAAQ", 0, B))))
    assert [r.error for r in results] == [Errors.NONE, Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                          Errors.UNKNOWN_TOPIC_ID]
    assert partition(c, "t", 0).directories == (A, C, MIGRATING)
    assert partition(c, "t", 1).directories == (B, A, MIGRATING)
    assert partition(c, "t", 0).partition_epoch == before + 1 and partition(c, "t", 0).leader_epoch == 0
    (again,) = c.request(api.AssignReplicasToDirsRequest(2, epoch, (api.DirectoryAssignment(topic_id, 0, C),)))
    assert again.error is Errors.NONE and partition(c, "t", 0).partition_epoch == before + 1, "nothing to change"
    (not_mine,) = c.request(api.AssignReplicasToDirsRequest(
        1, c.core.image.cluster.broker(1).broker_epoch, (api.DirectoryAssignment(topic_id, 0, B),)))
    assert not_mine.error is Errors.NONE
    stale = c.expect_error(api.AssignReplicasToDirsRequest(2, epoch + 1000, ()))
    assert stale.error is Errors.STALE_BROKER_EPOCH


def test_replicas_moved_without_directories_read_as_not_known_and_checkpoints_keep_them():
    p = PartitionRegistration((1, 2), (1, 2), leader=1, directories=(A, B))
    kept = p.merge(pb.PartitionChangeRecord(topic_id="x", partition_id=0, isr=pb.BrokerIds(ids=[1])))
    assert kept.directories == (A, B)
    moved = p.merge(pb.PartitionChangeRecord(topic_id="x", partition_id=0, replicas=pb.BrokerIds(ids=[1, 3])))
    assert moved.directories == ()
    given = p.merge(pb.PartitionChangeRecord(topic_id="x", partition_id=0, replicas=pb.BrokerIds(ids=[1, 3]),
                                             directories=pb.DirectoryIds(ids=[A, C])))
    assert given.directories == (A, C)
    c = cluster()
    create(c, "t", -1, -1, assignments=((1, 2),))
    from quorum.metadata.loader import MetadataLoader
    from quorum.metadata.records import decode_record

    loader = MetadataLoader()
    loader.load_batch([decode_record(r) for r in checkpoint_body(c.core.image)], 0, 1)
    assert loader.image.topics.topic_by_name("t").partitions[0].directories == (A, UNASSIGNED)


def test_a_failed_log_directory_takes_its_replicas_out_and_they_may_not_rejoin():
    """Broker 2 (directories B and C) loses C: its replicas in C leave their ISRs and leaderships,
    those in B stay; its registration keeps B only; the leader cannot add a replica in C back."""
    c = cluster()
    register(c, 4, log_dirs=(A,))
    create(c, "t", -1, -1, assignments=((2, 1, 4), (2, 1, 4)), configs=(("min.insync.replicas", "1"),))
    topic_id = c.core.image.topics.topic_by_name("t").topic_id
    epoch = c.core.image.cluster.broker(2).broker_epoch
    c.request(api.AssignReplicasToDirsRequest(2, epoch, (api.DirectoryAssignment(topic_id, 0, C),
                                                         api.DirectoryAssignment(topic_id, 1, B))))
    assert partition(c, "t", 0).leader == 2 and partition(c, "t", 1).leader == 2
    reply = c.request(api.BrokerHeartbeatRequest(2, epoch, c.core.last_committed_offset, offline_log_dirs=(C,)))
    assert not reply.is_fenced
    lost, kept = partition(c, "t", 0), partition(c, "t", 1)
    assert 2 not in lost.isr and lost.leader == 1, lost
    assert 2 in kept.isr and kept.leader == 2, kept
    assert c.core.image.cluster.broker(2).log_dirs == (B,)
    (r,) = c.request(api.AlterPartitionRequest(1, c.core.image.cluster.broker(1).broker_epoch, (api.PartitionIsr(
        topic_id, 0, lost.leader_epoch, lost.partition_epoch, (1, 2, 4)),)))
    assert r.error is Errors.INELIGIBLE_REPLICA
    again = c.request(api.BrokerHeartbeatRequest(2, epoch, c.core.last_committed_offset, offline_log_dirs=(C,)))
    assert not again.is_fenced and partition(c, "t", 0) == lost, "a directory already offline changes nothing"


# ---------------------------------------------------------------- cordoned log directories (KIP-1066)
def _heartbeat(c, broker: int, cordoned):
    epoch = c.core.image.cluster.broker(broker).broker_epoch
    return c.request(api.BrokerHeartbeatRequest(broker, epoch, c.core.last_committed_offset,
                                                cordoned_log_dirs=cordoned))


def test_a_broker_with_every_directory_cordoned_gets_no_new_replicas():
    c = cluster(33)
    _heartbeat(c, 2, (B,))
    assert c.core.image.cluster.broker(2).cordoned_log_dirs == (B,)
    assert c.core.image.cluster.broker(2).takes_new_replicas  # C is not cordoned
    _heartbeat(c, 2, (B, C, "AAAAAAAAAAAAAAAAAAAAAQ"))  # a directory it does not have is left out
    assert c.core.image.cluster.broker(2).cordoned_log_dirs == (B, C)
    create(c, "spread", 6, 2)
    assert all(2 not in p.replicas for p in c.core.image.topics.topic_by_name("spread").partitions.values())
    _heartbeat(c, 2, ())  # uncordoned: it takes replicas again
    assert c.core.image.cluster.broker(2).cordoned_log_dirs == ()
    create(c, "again", 6, 3)
    assert any(2 in p.replicas for p in c.core.image.topics.topic_by_name("again").partitions.values())
    # the same list again writes nothing; a broker that says nothing (None) changes nothing
    end = c.end_offset
    _heartbeat(c, 2, ())
    _heartbeat(c, 2, None)
    assert metadata_written(c, end) == 0 and c.core.image.cluster.broker(2).cordoned_log_dirs == ()


def test_before_4_3_iv0_cordoned_directories_are_not_kept():
    c = cluster(29)
    _heartbeat(c, 2, (B, C))
    assert c.core.image.cluster.broker(2).cordoned_log_dirs is None
    create(c, "anywhere", 6, 3)
    assert all(2 in p.replicas for p in c.core.image.topics.topic_by_name("anywhere").partitions.values())


def test_cordoned_directories_survive_a_snapshot():
    c = cluster(33)
    _heartbeat(c, 2, (C,))
    reg = c.core.image.cluster.broker(2)
    assert type(reg).from_record(reg.to_record()) == reg
    changed = pb.BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=reg.broker_epoch,
                                                cordoned_log_dirs=pb.DirectoryIds())
    assert changed.HasField("cordoned_log_dirs")  # an empty list still says "none cordoned now"
