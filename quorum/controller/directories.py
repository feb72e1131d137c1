"""Which log directory each replica is in (KIP-858, metadata.version 3.7-IV2 and later), as Kafka's
controller decides it: a new replica goes to its broker's only log directory if it has one, is
UNASSIGNED (the broker picks, then says which with AssignReplicasToDirs) if it has several, and
MIGRATING (not known) on a broker that registered none (sparkraft's own brokers hold no data).
A broker that put a replica somewhere else says so with AssignReplicasToDirs (:func:`assign`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Sequence

from quorum.controller import api
from quorum.controller.broker_epochs import check_broker_epoch
from quorum.controller.levels import directories_enabled
from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.topics import MIGRATING, UNASSIGNED, known_directories

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext


def default_dir_of(ctx: "ControllerContext") -> Optional[Callable[[int], str]]:
    """broker -> the directory a new replica there starts in; None where no directory is known of
    any broker (below 3.7-IV2, or only brokers without log directories): partitions then carry none."""
    image = ctx.spec
    if not directories_enabled(image):
        return None
    brokers = image.cluster.brokers
    if not any(b.log_dirs for b in brokers.values()):
        return None
    cache: dict[int, str] = {}

    def default_dir(broker_id: int) -> str:
        found = cache.get(broker_id)
        if found is None:
            registration = brokers.get(broker_id)
            if registration is None:
                found = UNASSIGNED
            elif not registration.log_dirs:
                found = MIGRATING
            else:
                found = registration.log_dirs[0] if len(registration.log_dirs) == 1 else UNASSIGNED
            cache[broker_id] = found
        return found
    return default_dir


def new_directories(default_dir: Optional[Callable[[int], str]], replicas: Sequence[int]) -> list[str]:
    """A new partition's directories (none: not known)."""
    if default_dir is None:
        return []
    dirs = [default_dir(b) for b in replicas]
    return [] if all(d == MIGRATING for d in dirs) else dirs


def assign(ctx: "ControllerContext", req: api.AssignReplicasToDirsRequest
           ) -> tuple[list, tuple[api.AssignmentResult, ...]]:
    """AssignReplicasToDirs (Kafka's ReplicationControlManager.handleAssignReplicasToDirs): each
    named replica of the broker is now in the directory given, a PartitionChangeRecord with the
    partition's directories where that changes them. A partition that does not exist is
    UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for a topic), one the broker holds no replica of
    NOT_LEADER_OR_FOLLOWER; the rest of the request goes on."""
    check_broker_epoch(ctx, req.broker_id, req.broker_epoch)
    topics = ctx.spec.topics
    changed: dict[tuple[str, int], list[str]] = {}
    results = []
    for a in req.assignments:
        topic = topics.topic(a.topic_id)
        partition = topic.partition(a.partition) if topic is not None else None
        if topic is None:
            results.append(api.AssignmentResult(a.topic_id, a.partition, Errors.UNKNOWN_TOPIC_ID))
        elif partition is None:
            results.append(api.AssignmentResult(a.topic_id, a.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION))
        elif req.broker_id not in partition.replicas:
            results.append(api.AssignmentResult(a.topic_id, a.partition, Errors.NOT_LEADER_OR_FOLLOWER))
        else:
            key = (a.topic_id, a.partition)
            dirs = changed.get(key) or list(partition.directories or [MIGRATING] * len(partition.replicas))
            dirs[partition.replicas.index(req.broker_id)] = a.directory
            changed[key] = dirs
            results.append(api.AssignmentResult(a.topic_id, a.partition))
    records = []
    for (topic_id, pid), dirs in changed.items():
        current = topics.topic(topic_id).partition(pid)
        if known_directories(dirs) != current.directories:
            records.append(pb.PartitionChangeRecord(topic_id=topic_id, partition_id=pid,
                                                    directories=pb.DirectoryIds(ids=dirs)))
    return records, tuple(results)


def directory_offline(ctx: "ControllerContext", p, broker: int) -> bool:
    """Is ``broker``'s replica of ``p`` in a log directory the broker no longer has online? (It may
    not rejoin the ISR: Kafka's controller's check of an ISR expansion.)"""
    if not p.directories:
        return False
    where = p.directory_of(broker)
    reg = ctx.spec.cluster.broker(broker)
    return where not in (MIGRATING, UNASSIGNED) and reg is not None and bool(reg.log_dirs) \
        and where not in reg.log_dirs
