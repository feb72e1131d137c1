"""Topics and partitions (Kafka's ReplicationControlManager): create, delete, add partitions,
elect leaders, AlterPartition, and moving partitions off a broker that is fenced, shutting down
or unregistered.

Every function reads the controller's speculative image (``ctx.spec``: committed + handled but
uncommitted) and returns records plus a reply; none changes anything itself. Per-item problems go
into the reply; a problem with the whole request raises SparkraftError.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from google.protobuf.message import Message

from quorum.controller import api, bulk_changes, configs_control
from quorum.controller.bulk_changes import TopicPolicies
from quorum.controller.directories import default_dir_of, directory_offline, new_directories
from quorum.controller.index import bits, masks_of
from quorum.controller.levels import cordoning_enabled
from quorum.controller.partition_change import Election, Elr, IsrShrinks, change, preferred_leader_only
from quorum.controller.placement import UsableBroker, place
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import change_block
from quorum.metadata.configs import TOPIC
from quorum.metadata.topics import NO_LEADER, PartitionRegistration, collision_key

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate, with its messages (INVALID_TOPIC_EXCEPTION)."""
    bad = Errors.INVALID_TOPIC_EXCEPTION
    if not name:
        raise SparkraftError(bad, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise SparkraftError(bad, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise SparkraftError(bad, f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} "
                                  f"characters, topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise SparkraftError(bad, f"Topic name \"{name}\" is illegal, it contains a character other "
                                  f"than ASCII alphanumerics, '.', '_' and '-'")


def usable_brokers(ctx: "ControllerContext") -> list[UsableBroker]:
    """Registered brokers not in controlled shutdown (fenced ones included, marked), and with a log
    directory that is not cordoned (KIP-1066)."""
    cordons = cordoning_enabled(ctx.spec)
    return [UsableBroker(b.broker_id, b.rack, b.fenced) for b in ctx.spec.cluster.brokers.values()
            if not b.in_controlled_shutdown and (b.takes_new_replicas or not cordons)]


def _placement(ctx: "ControllerContext", count: int, rf: int, existing: Sequence[Sequence[int]] = ()
               ) -> list[list[int]]:
    try:
        return place(usable_brokers(ctx), count, rf, ctx.rng, existing)
    except SparkraftError as e:
        raise SparkraftError(e.error, f"Unable to replicate the partition {rf} time(s): {e.message}") from None


def _manual(ctx: "ControllerContext", assignments: Sequence[Sequence[int]], rf: Optional[int],
            first_id: int) -> list[list[int]]:
    bad = Errors.INVALID_REPLICA_ASSIGNMENT
    brokers = ctx.spec.cluster.brokers
    out = []
    for i, replicas in enumerate(assignments):
        if not replicas:
            raise SparkraftError(bad, "The manual partition assignment includes an empty replica list.")
        seen = set()
        for b in replicas:
            if b in seen:
                raise SparkraftError(bad, f"The manual partition assignment includes the broker {b} "
                                          f"more than once.")
            seen.add(b)
            if b not in brokers:
                raise SparkraftError(bad, f"The manual partition assignment includes broker {b}, but "
                                          f"no such broker is registered.")
        if rf is None:
            rf = len(replicas)
        elif len(replicas) != rf:
            raise SparkraftError(bad, f"The manual partition assignment includes a partition with "
                                      f"{len(replicas)} replica(s), but this is not consistent with "
                                      f"previous partitions, which have {rf} replica(s).")
        if not any(ctx.acceptable(b) for b in replicas):
            raise SparkraftError(bad, f"All brokers specified in the manual partition assignment for "
                                      f"partition {first_id + i} are fenced or in controlled shutdown.")
        out.append(list(replicas))
    return out


def _partition_record(ctx: "ControllerContext", topic_id: str, pid: int, replicas: Sequence[int], default_dir
                      ) -> pb.PartitionRecord:
    acceptable = ctx.acceptable
    isr = [b for b in replicas if acceptable(b)]
    return pb.PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=replicas, isr=isr,
                              leader=isr[0] if isr else NO_LEADER, leader_epoch=0, partition_epoch=0,
                              directories=new_directories(default_dir, replicas))


# ---------------------------------------------------------------- create / delete / add partitions
class PartitionBudget:
    """The partitions one request may still add, checked before any of them is placed: a request
    for 2,147,483,647 partitions is refused at once, not after building them."""

    def __init__(self, ctx: "ControllerContext"):
        self.per_request = ctx.settings.max_partitions_per_request
        self.cluster_left = ctx.settings.max_partitions - ctx.spec.topics.partition_count()
        self.spent = 0

    def check(self, n: int) -> None:
        if n > self.per_request - self.spent:
            earlier = f"; {self.spent:,} used by earlier topics of the request" if self.spent else ""
            raise SparkraftError(Errors.INVALID_PARTITIONS, f"{n:,} partitions would take this request past "
                                 f"max.partitions.per.request ({self.per_request:,}){earlier}: split it into "
                                 f"smaller requests")
        if n > self.cluster_left - self.spent:
            raise SparkraftError(Errors.POLICY_VIOLATION, f"{n:,} more partitions would take the cluster past "
                                 f"max.partitions ({self.cluster_left - self.spent:,} left of the limit)")

    def spend(self, n: int) -> None:
        self.spent += n


def create_topics(ctx: "ControllerContext", req: api.CreateTopicsRequest
                  ) -> tuple[list, tuple[api.CreateTopicResult, ...]]:
    records: list = []
    results = []
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    names = ctx.spec.topics.ids_by_name
    created_keys: dict[str, str] = {}  # collision key -> name, of topics this request creates
    budget = PartitionBudget(ctx)
    for t in req.topics:
        try:
            if counts[t.name] > 1:
                raise SparkraftError(Errors.INVALID_REQUEST, "Found multiple entries for this topic.")
            validate_topic_name(t.name)
            if t.name in names:
                raise SparkraftError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            other = ctx.spec.topics.colliding_name(t.name) or created_keys.get(collision_key(t.name))
            if other is not None:
                raise SparkraftError(Errors.INVALID_TOPIC_EXCEPTION,
                                     f"Topic '{t.name}' collides with existing topic: {other}")
            topic_id = ctx.new_uuid()
            if t.assignments:
                if t.num_partitions != -1:
                    raise SparkraftError(Errors.INVALID_REQUEST, "A manual partition assignment was "
                                         "specified, but numPartitions was not set to -1.")
                if t.replication_factor != -1:
                    raise SparkraftError(Errors.INVALID_REQUEST, "A manual partition assignment was "
                                         "specified, but replicationFactor was not set to -1.")
                budget.check(len(t.assignments))
                assignment = _manual(ctx, t.assignments, None, 0)
            else:
                n = ctx.settings.default_num_partitions if t.num_partitions == -1 else t.num_partitions
                rf = (ctx.settings.default_replication_factor if t.replication_factor == -1
                      else t.replication_factor)
                if n <= 0:
                    raise SparkraftError(Errors.INVALID_PARTITIONS, "Number of partitions was set to an "
                                                                    "invalid non-positive value.")
                if rf <= 0:
                    raise SparkraftError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be "
                                         "larger than 0, or -1 to use the default value.")
                budget.check(n)
                assignment = _placement(ctx, n, rf)
            configs_control.validate_topic_configs(t.configs)
        except SparkraftError as e:
            results.append(api.CreateTopicResult(t.name, e.error, e.message))
            continue
        budget.spend(len(assignment))
        results.append(api.CreateTopicResult(t.name, topic_id=topic_id, num_partitions=len(assignment),
                                             replication_factor=len(assignment[0])))
        if "." in t.name or "_" in t.name:
            created_keys[collision_key(t.name)] = t.name
        if req.validate_only:
            continue
        records.append(pb.TopicRecord(name=t.name, topic_id=topic_id))
        for name, value in t.configs:
            records.append(pb.ConfigRecord(resource_type=TOPIC, resource_name=t.name, name=name,
                                           value=value))
        default_dir = default_dir_of(ctx)
        records.extend(_partition_record(ctx, topic_id, pid, replicas, default_dir)
                       for pid, replicas in enumerate(assignment))
    return records, tuple(results)


def delete_topics(ctx: "ControllerContext", req: api.DeleteTopicsRequest
                  ) -> tuple[list, tuple[api.TopicResult, ...]]:
    topics = ctx.spec.topics
    records, results, removed = [], [], set()
    wanted: list[tuple[str, Optional[str]]] = [(n, None) for n in req.names]
    wanted += [("", i) for i in req.topic_ids]
    for name, topic_id in wanted:
        if topic_id is None:
            topic_id = topics.ids_by_name.get(name)
            if topic_id is None:
                results.append(api.TopicResult(name, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                               "This server does not host this topic-partition."))
                continue
        else:
            topic = topics.topic(topic_id)
            if topic is None:
                results.append(api.TopicResult(name, Errors.UNKNOWN_TOPIC_ID,
                                               "This server does not host this topic ID.", topic_id))
                continue
            name = topic.name
        if topic_id not in removed:
            removed.add(topic_id)
            records.append(pb.RemoveTopicRecord(topic_id=topic_id))
        results.append(api.TopicResult(name, topic_id=topic_id))
    return records, tuple(results)


def create_partitions(ctx: "ControllerContext", req: api.CreatePartitionsRequest
                      ) -> tuple[list, tuple[api.TopicResult, ...]]:
    records, results, seen = [], [], set()
    budget = PartitionBudget(ctx)
    for u in req.updates:
        try:
            if u.name in seen:
                raise SparkraftError(Errors.INVALID_REQUEST, "Duplicate topic in the request")
            seen.add(u.name)
            topic = ctx.spec.topics.topic_by_name(u.name)
            if topic is None:
                raise SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                     "This server does not host this topic-partition.")
            current = len(topic.partitions)
            if u.count < current:
                raise SparkraftError(Errors.INVALID_PARTITIONS, f"The topic {u.name} currently has "
                                     f"{current} partition(s); {u.count} would not be an increase.")
            if u.count == current:
                raise SparkraftError(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            added = u.count - current
            budget.check(added)
            existing = [topic.partitions[pid].replicas for pid in sorted(topic.partitions)]
            rf = len(existing[0]) if existing else 1
            if u.assignments:
                if len(u.assignments) != added:
                    raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {added} "
                                         f"additional partition(s), but only {len(u.assignments)} "
                                         f"assignment(s) were specified.")
                assignment = _manual(ctx, u.assignments, rf, current)
            else:
                assignment = _placement(ctx, added, rf, existing)
        except SparkraftError as e:
            results.append(api.TopicResult(u.name, e.error, e.message))
            continue
        results.append(api.TopicResult(u.name, topic_id=topic.topic_id))
        budget.spend(len(assignment))
        if not req.validate_only:
            default_dir = default_dir_of(ctx)
            records.extend(_partition_record(ctx, topic.topic_id, current + i, replicas, default_dir)
                           for i, replicas in enumerate(assignment))
    return records, tuple(results)


# ---------------------------------------------------------------- elections and ISR changes
def elect_leaders(ctx: "ControllerContext", req: api.ElectLeadersRequest
                  ) -> tuple[list, api.PartitionResults]:
    kind = req.election_type.upper()
    if kind not in ("PREFERRED", "UNCLEAN"):
        raise SparkraftError(Errors.INVALID_REQUEST, f"Unknown election type {req.election_type}")
    election = Election.PREFERRED if kind == "PREFERRED" else Election.UNCLEAN
    topics = ctx.spec.topics
    policies = TopicPolicies(ctx)
    if req.partitions is None:
        return _elect_every(ctx, election, policies)
    records, results = [], api.PartitionResults()
    for tp in dict.fromkeys(req.partitions):
        topic = topics.topic_by_name(tp.topic)
        p = topic.partition(tp.partition) if topic is not None else None
        if p is None:
            results.add(api.ElectLeadersResult(tp, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                               "This server does not host this topic-partition."))
            continue
        error, message, record = _elect_one(ctx, topic.topic_id, tp.partition, p, election,
                                            policies.elr(topic.topic_id))
        if record is not None:
            records.append(record)
        results.add(api.ElectLeadersResult(tp, error, message))
    return records, results


def _elect_every(ctx: "ControllerContext", election: Election, policies: "TopicPolicies"
                 ) -> tuple[list, api.PartitionResults]:
    """An election of every partition: only those an election could change (the index knows
    them), in (topic name, partition) order; the others would be ELECTION_NOT_NEEDED, which Kafka
    leaves out of such an answer. After a rolling restart at 2M that is a million partitions: they
    are walked a topic at a time (its candidates a mask, ascending), and a preferred election that
    only moves the leader (nearly all of them) is written without the general path's work."""
    by_id = ctx.spec.topics.by_id
    masks = (ctx.index.imbalanced_by_topic() if election is Election.PREFERRED
             else ctx.index.leaderless_by_topic())
    able = ctx.acceptable
    records, results, moves = [], api.PartitionResults(), change_block.ChangeColumns()
    for name, tid in sorted((by_id[tid].name, tid) for tid in masks):
        partition_of, elr = by_id[tid].partitions.getter(), policies.elr(tid)
        elected = None  # the run of this topic's successes being answered (None: start one)
        moved_pids = leaders = isrs = None  # this topic's columns in ``moves`` (None: not asked for yet)
        for pid in bits(masks[tid]):
            p = partition_of(pid)
            preferred = p.replicas[0]
            if (election is Election.PREFERRED and p.leader != preferred and preferred in p.isr and able(preferred)
                    and preferred_leader_only(p, elr)):
                if elected is None:
                    elected = results.run(name)
                if moved_pids is None:
                    moved_pids, leaders, isrs = moves.topic(tid)
                moved_pids.append(pid)
                leaders.append(preferred)
                isrs.append(None)
                elected.append(pid)
                continue
            error, message, record = _elect_one(ctx, tid, pid, p, election, elr)
            if error is Errors.ELECTION_NOT_NEEDED:
                continue
            if record is not None:
                records.append(record)
            results.add(api.ElectLeadersResult(api.TopicPartition(name, pid), error, message))
            elected = None
    if len(moves):
        records.append(moves)  # after the few general ones: every change is to its own partition
    return records, results


def _elect_one(ctx: "ControllerContext", topic_id: str, pid: int, p: PartitionRegistration,
               election: Election, elr: Optional[Elr]) -> tuple[Errors, str, Optional[pb.PartitionChangeRecord]]:
    if election is Election.PREFERRED:
        preferred = p.replicas[0]
        if p.leader == preferred:
            return Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", None
        in_isr = preferred in p.isr
        eligible = in_isr or (elr is not None and not p.isr and preferred in p.elr)
        if not (eligible and ctx.acceptable(preferred)):
            return Errors.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available.", None
        if in_isr and preferred_leader_only(p, elr):
            return Errors.NONE, "", pb.PartitionChangeRecord(partition_id=pid, topic_id=topic_id, leader=preferred)
    elif p.leader != NO_LEADER:
        return Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", None
    record = change(topic_id, pid, p, ctx.acceptable, election=election, elr=elr)
    if record is None or not record.HasField("leader") or record.leader == NO_LEADER:
        return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Unable to find any eligible leader.", None
    return Errors.NONE, "", record


def alter_partition(ctx: "ControllerContext", req: api.AlterPartitionRequest
                    ) -> tuple[list, tuple[api.AlterPartitionResult, ...]]:
    """ISR changes from the leader of each partition (Kafka's AlterPartition, batched as Kafka
    batches it): each partition is checked and answered on its own; a change that makes every
    kept replica of a reassignment in-sync completes the reassignment."""
    broker = ctx.spec.cluster.broker(req.broker_id)
    if broker is None:
        raise SparkraftError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker {req.broker_id} is not registered.")
    if broker.broker_epoch != req.broker_epoch:
        raise SparkraftError(Errors.STALE_BROKER_EPOCH, f"Expected broker epoch {broker.broker_epoch}, "
                                                        f"but got broker epoch {req.broker_epoch}")
    limit = ctx.settings.max_partitions_per_request
    if len(req.partitions) > limit:
        raise SparkraftError(Errors.INVALID_REQUEST, f"AlterPartition names {len(req.partitions):,} partitions, "
                                                     f"more than max.partitions.per.request ({limit:,})")
    keys = [(c.topic_id, c.partition) for c in req.partitions]
    if len(set(keys)) != len(keys):
        raise SparkraftError(Errors.INVALID_REQUEST, "AlterPartition names a partition more than once")
    records: list = []
    results = []
    policies = TopicPolicies(ctx)
    for c in req.partitions:
        record, result = _alter_one(ctx, req.broker_id, c, policies)
        if record is not None:
            records.append(record)
        results.append(result)
    return records, tuple(results)


def _alter_one(ctx: "ControllerContext", broker_id: int, c: api.PartitionIsr, policies: "TopicPolicies"
               ) -> tuple[Optional[pb.PartitionChangeRecord], api.AlterPartitionResult]:
    topic = ctx.spec.topics.topic(c.topic_id)
    if topic is None:
        return None, api.AlterPartitionResult(c.topic_id, c.partition, Errors.UNKNOWN_TOPIC_ID,
                                              "This server does not host this topic ID.")
    p = topic.partition(c.partition)
    if p is None:
        return None, api.AlterPartitionResult(c.topic_id, c.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                              "This server does not host this topic-partition.")

    def result(q: PartitionRegistration, error: Errors = Errors.NONE, message: str = ""):
        return api.AlterPartitionResult(c.topic_id, c.partition, error, message, q.leader, q.leader_epoch,
                                        q.partition_epoch, q.isr)

    where = f"{topic.name}-{c.partition}"
    if c.leader_epoch != p.leader_epoch:
        return None, result(p, Errors.FENCED_LEADER_EPOCH, f"The leader epoch {c.leader_epoch} of {where} does "
                                                           f"not match the current leader epoch {p.leader_epoch}.")
    if broker_id != p.leader:
        return None, result(p, Errors.INVALID_REQUEST, f"Broker {broker_id} is not the leader of {where} "
                                                       f"(the leader is {p.leader}).")
    if c.partition_epoch != p.partition_epoch:
        return None, result(p, Errors.INVALID_UPDATE_VERSION, f"The partition epoch {c.partition_epoch} of "
                                                              f"{where} does not match the current partition "
                                                              f"epoch {p.partition_epoch}.")
    new_isr = tuple(c.new_isr)
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(p.replicas):
        return None, result(p, Errors.INVALID_REQUEST, f"The new ISR {list(new_isr)} of {where} has duplicates "
                                                       f"or brokers that are not replicas {list(p.replicas)}.")
    if p.leader not in new_isr:
        return None, result(p, Errors.INVALID_REQUEST, f"The new ISR {list(new_isr)} of {where} does not "
                                                       f"include the leader {p.leader}.")
    ineligible = [b for b in new_isr if b != p.leader and (not ctx.acceptable(b) or directory_offline(ctx, p, b))]
    if ineligible:
        return None, result(p, Errors.INELIGIBLE_REPLICA, f"The new ISR {list(new_isr)} of {where} contains "
                                                          f"ineligible replica(s) {ineligible} (fenced, in "
                                                          f"controlled shutdown or not registered).")
    record = change(c.topic_id, c.partition, p, ctx.acceptable, target_isr=new_isr, elr=policies.elr(c.topic_id))
    if record is None:
        return None, result(p)
    return record, result(p.merge(record))


def balance_leaders(ctx: "ControllerContext", limit: int) -> tuple[list[pb.PartitionChangeRecord], bool]:
    """Preferred-replica elections for the brokers whose leader imbalance is past
    ``leader.imbalance.per.broker.percentage`` (the share of the partitions a broker is the preferred
    replica of that another broker leads): at most ``limit`` of them, and whether more remain (Kafka
    elects in rounds too, so that one check does not hold the controller for long)."""
    percentage = ctx.settings.leader_imbalance_percentage
    records: list[pb.PartitionChangeRecord] = []
    by_id = ctx.spec.topics.by_id
    policies = TopicPolicies(ctx)
    for broker in sorted(ctx.index.imbalanced):
        if not ctx.acceptable(broker):
            continue
        behind, prefers = ctx.index.imbalance(broker)
        if behind * 100 <= percentage * prefers:
            continue
        topic_id = None
        for tid, pid in ctx.index.imbalanced_partitions(broker):  # a topic's partitions in a row
            if tid != topic_id:
                topic_id, partition_of, elr = tid, by_id[tid].partitions.getter(), policies.elr(tid)
            p = partition_of(pid)
            if broker not in p.isr:
                continue
            if preferred_leader_only(p, elr):  # (broker, its first replica, may lead: checked above)
                records.append(pb.PartitionChangeRecord(partition_id=pid, topic_id=tid, leader=broker))
                if len(records) >= limit:
                    return records, True
                continue
            record = change(tid, pid, p, ctx.acceptable, election=Election.PREFERRED, elr=elr)
            if record is not None:
                records.append(record)
                if len(records) >= limit:
                    return records, True
    return records, False


def move_off(ctx: "ControllerContext", broker: int, partitions: Optional[dict[str, int]] = None) -> list[Message]:
    """Take ``broker`` out of every ISR it is in (unless it is the last member) and move its
    leaderships to the next valid replica (or -1): fencing, controlled shutdown, unregistration;
    or out of ``partitions`` only (topic id -> mask: those in a failed log directory)."""
    def acceptable(b: int) -> bool:
        return b != broker and ctx.acceptable(b)

    return bulk_changes.changes(ctx, ctx.index.isr_masks(broker) if partitions is None else partitions, acceptable,
                                IsrShrinks(broker, acceptable))


def restarted(ctx: "ControllerContext", broker: int) -> list[Message]:
    """A new incarnation of ``broker`` registers (its process restarted): out of every ISR and ELR it
    is in, its leaderships moved (Kafka's handleBrokerUncleanShutdown, once metadata.version has
    ELR): whatever it held before the restart is not vouched for."""
    def acceptable(b: int) -> bool:
        return b != broker and ctx.acceptable(b)

    partitions = masks_of((), ctx.index.isr_masks(broker), ctx.index.elr_masks(broker))
    return bulk_changes.changes(ctx, partitions, acceptable, IsrShrinks(broker, acceptable),
                    TopicPolicies(ctx, unclean_shutdown=(broker,)))


def elect_leaderless(ctx: "ControllerContext", broker: int) -> list[Message]:
    """Leaderless partitions that ``broker``, which just became available, may lead: those whose ISR
    (or, with the ISR empty, ELR) holds it, and where ``unclean.leader.election.enable`` is on, those
    it is only a replica of."""
    def acceptable(b: int) -> bool:
        return b == broker or ctx.acceptable(b)

    partitions = ctx.index.leaderless_partitions(broker) + ctx.index.leaderless_partitions(elr_member=broker)
    by_id = ctx.spec.topics.by_id
    policies = TopicPolicies(ctx)
    for tid, pid in ctx.index.leaderless_partitions(topic_ok=policies):
        if broker in by_id[tid].partitions[pid].replicas:
            partitions.append((tid, pid))
    return bulk_changes.changes(ctx, masks_of(partitions), acceptable, None, policies)
