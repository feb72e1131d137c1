"""Partition reassignment (Kafka's AlterPartitionReassignments and ListPartitionReassignments, as
ReplicationControlManager does them).

A reassignment moves a partition from its replicas R to target replicas T in up to two changes:

1. Start: the replicas become T followed by R - T, with ``adding_replicas`` = T - R and
   ``removing_replicas`` = R - T. The brokers added are not in the ISR yet.
2. Complete: the partition's leader adds them to the ISR with AlterPartition once they have caught
   up (``quorum/broker/isr_expansion.py``); the change that finds every replica of T in the ISR
   drops R - T from the replicas and the ISR, and moves a leader among them to a replica of T
   (``partition_change.complete_reassignment``, applied on every change of the partition).

A target that only reorders or shrinks the replicas completes at once when the ISR already holds
all of T. A new target while one is in flight starts from the current replicas. Cancelling reverts
to the original replicas (the current ones minus those being added) and drops the added ones from
the ISR; if that leaves the ISR empty, the revert needs an unclean election and is refused unless
the topic allows one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from quorum.controller import api, bulk_changes, levels
from quorum.controller.partition_change import Election, change
from quorum.controller.settings import MV_REASSIGNMENT
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.image import MetadataImage
from quorum.metadata.topics import PartitionRegistration

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext


def alter(ctx: "ControllerContext", req: api.AlterPartitionReassignmentsRequest
          ) -> tuple[list, tuple[api.ElectLeadersResult, ...]]:
    """Each partition's reassignment started, changed or cancelled; each answered on its own."""
    levels.require_metadata_version(ctx.spec, MV_REASSIGNMENT, "Partition reassignment")
    limit = ctx.settings.max_partitions_per_request
    if len(req.partitions) > limit:
        raise SparkraftError(Errors.INVALID_REQUEST, f"{len(req.partitions):,} reassignments in one request, more "
                                                     f"than max.partitions.per.request ({limit:,})")
    names = [r.partition for r in req.partitions]
    if len(set(names)) != len(names):
        raise SparkraftError(Errors.INVALID_REQUEST, "a partition is named more than once")
    records, results = [], []
    for r in req.partitions:
        try:
            record = _alter_one(ctx, r)
        except SparkraftError as e:
            results.append(api.ElectLeadersResult(r.partition, e.error, e.message))
            continue
        if record is not None:
            records.append(record)
        results.append(api.ElectLeadersResult(r.partition))
    return records, tuple(results)


def _alter_one(ctx: "ControllerContext", r: api.ReassignablePartition) -> Optional[pb.PartitionChangeRecord]:
    tp = r.partition
    topic = ctx.spec.topics.topic_by_name(tp.topic)
    if topic is None:
        raise SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {tp.topic}.")
    p = topic.partition(tp.partition)
    if p is None:
        raise SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Unable to find partition {tp.topic}:{tp.partition}.")
    policies = bulk_changes.TopicPolicies(ctx)
    unclean, elr = policies(topic.topic_id), policies.elr(topic.topic_id)
    election = Election.UNCLEAN if unclean else Election.ANY
    if r.replicas is None:
        return _cancel(ctx, topic.topic_id, tp, p, unclean, election, elr)
    target = tuple(r.replicas)
    _validate(ctx, target)
    current = p.replicas
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return change(topic.topic_id, tp.partition, p, ctx.acceptable, target_replicas=target + removing,
                  target_adding=adding, target_removing=removing, election=election, elr=elr)


def _validate(ctx: "ControllerContext", target: tuple[int, ...]) -> None:
    """Kafka's validateManualPartitionAssignment: registered brokers, each once."""
    if not target:
        raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes an empty replica list.")
    brokers = ctx.spec.cluster.brokers
    for b in sorted(target):
        if b not in brokers:
            raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                                                    f"broker {b}, but no such broker is registered.")
    if len(set(target)) != len(target):
        twice = sorted(b for b in set(target) if target.count(b) > 1)[0]
        raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the "
                                                                f"broker {twice} more than once.")


def revert_targets(p: PartitionRegistration) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """(replicas, ISR, whether that is an unclean election) of reverting ``p``'s reassignment
    (Kafka's PartitionReassignmentRevert): the replicas being added leave the replicas and the ISR;
    an ISR that held only those becomes the first original replica."""
    original = tuple(b for b in p.replicas if b not in p.adding_replicas)
    isr = tuple(b for b in p.isr if b not in p.adding_replicas)
    return original, isr or original[:1], not isr


def _cancel(ctx: "ControllerContext", topic_id: str, tp: api.TopicPartition, p: PartitionRegistration,
            unclean: bool, election: Election, elr) -> Optional[pb.PartitionChangeRecord]:
    if not (p.adding_replicas or p.removing_replicas):
        raise SparkraftError(Errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    original, isr, needs_unclean = revert_targets(p)
    if needs_unclean and not unclean:
        raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Unable to revert partition assignment for {tp.topic}:{tp.partition} because "
                             f"it would require an unclean leader election.")
    return change(topic_id, tp.partition, p, ctx.acceptable, target_isr=isr, target_replicas=original,
                  target_adding=(), target_removing=(), election=election, elr=elr)


def ongoing(image: MetadataImage, req: api.ListPartitionReassignmentsRequest
            ) -> tuple[api.OngoingReassignment, ...]:
    """The reassignments in flight (of the partitions asked for; unknown ones are left out, as Kafka
    leaves them out)."""
    topics = image.topics
    out = []
    if req.partitions is None:
        for topic in sorted(topics.by_id.values(), key=lambda t: t.name):
            for pid in sorted(topic.partitions):
                p = topic.partitions[pid]
                if p.adding_replicas or p.removing_replicas:
                    out.append(_ongoing(topic.name, pid, p))
        return tuple(out)
    for tp in dict.fromkeys(req.partitions):
        topic = topics.topic_by_name(tp.topic)
        p = topic.partition(tp.partition) if topic is not None else None
        if p is not None and (p.adding_replicas or p.removing_replicas):
            out.append(_ongoing(tp.topic, tp.partition, p))
    return tuple(out)


def _ongoing(topic: str, pid: int, p: PartitionRegistration) -> api.OngoingReassignment:
    return api.OngoingReassignment(api.TopicPartition(topic, pid), p.replicas, p.adding_replicas,
                                   p.removing_replicas)
