"""Topics and their partitions: TOPIC, PARTITION, PARTITION_CHANGE and REMOVE_TOPIC records.

Sized for millions of partitions. Topics live in PMaps (by id, and name -> id), each topic's
partitions in its own PMap, so changing one partition copies a few trie nodes of one topic and of
the topic map, never the other topics or partitions. A partition is a tuple (``NamedTuple``: about
100 bytes); replica lists are tuples of ints interned in a bounded table, because a cluster has few
distinct replica sets and millions of partitions share them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.errors import ReplayError
from quorum.metadata.pmap import EMPTY, PMap

NO_LEADER = -1

_INTERNED: dict[tuple[int, ...], tuple[int, ...]] = {}
_INTERN_MAX = 1 << 16  # beyond this many distinct lists, new ones are kept but not shared


def broker_list(ids: Iterable[int]) -> tuple[int, ...]:
    """``ids`` as a tuple, shared with every equal list seen before (while the table has room)."""
    if not ids:
        return ()
    t = tuple(ids)
    shared = _INTERNED.get(t)
    if shared is not None:
        return shared
    if len(_INTERNED) < _INTERN_MAX:
        _INTERNED[t] = t
    return t


class PartitionRegistration(NamedTuple):
    """One partition's state (Kafka's PartitionRegistration)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    # KIP-966: replicas out of the ISR that still hold everything committed (eligible to lead when
    # the ISR is empty), and the last ELR members known before they too were lost
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    # KIP-858: each replica's log directory (Kafka's Uuid text), in replica order; () = not known
    # (Kafka's MIGRATING: a partition from before metadata.version 3.7-IV2, or a sparkraft broker's)
    directories: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, r: pb.PartitionRecord) -> PartitionRegistration:
        # The hot path of loading an image (2M calls at 2M partitions): the lists being moved are
        # usually empty, so skip the interning call for them.
        removing, adding = r.removing_replicas, r.adding_replicas
        elr, last_known = r.eligible_leader_replicas, r.last_known_elr
        return cls(broker_list(r.replicas), broker_list(r.isr), broker_list(removing) if removing else (),
                   broker_list(adding) if adding else (), r.leader, r.leader_epoch, r.partition_epoch,
                   broker_list(elr) if elr else (), broker_list(last_known) if last_known else (),
                   known_directories(r.directories) if r.directories else ())

    def to_record(self, topic_id: str, partition_id: int) -> pb.PartitionRecord:
        return pb.PartitionRecord(
            partition_id=partition_id, topic_id=topic_id, replicas=self.replicas, isr=self.isr,
            removing_replicas=self.removing_replicas, adding_replicas=self.adding_replicas,
            leader=self.leader, leader_epoch=self.leader_epoch, partition_epoch=self.partition_epoch,
            eligible_leader_replicas=self.elr, last_known_elr=self.last_known_elr, directories=self.directories)

    def directory_of(self, broker: int) -> str:
        """The log directory of ``broker``'s replica (MIGRATING where not known)."""
        if self.directories and broker in self.replicas:
            return self.directories[self.replicas.index(broker)]
        return MIGRATING

    def merge(self, c: pb.PartitionChangeRecord) -> PartitionRegistration:
        """This partition after ``c`` (Kafka's PartitionRegistration.merge): absent fields are
        unchanged; a present leader, even the same one, bumps the leader epoch; every change
        bumps the partition epoch."""
        has_leader = c.HasField("leader")
        return PartitionRegistration(
            _changed_list(c, "replicas", self.replicas),
            _changed_list(c, "isr", self.isr),
            _changed_list(c, "removing_replicas", self.removing_replicas),
            _changed_list(c, "adding_replicas", self.adding_replicas),
            c.leader if has_leader else self.leader,
            self.leader_epoch + 1 if has_leader else self.leader_epoch,
            self.partition_epoch + 1,
            _changed_list(c, "eligible_leader_replicas", self.elr),
            _changed_list(c, "last_known_elr", self.last_known_elr),
            self._directories_after(c),
        )

    def _directories_after(self, c: pb.PartitionChangeRecord) -> tuple[str, ...]:
        """Given, or kept; not known once the replicas change without them (a record of a writer
        that did not assign directories: Kafka's controller always gives them with new replicas)."""
        if c.HasField("directories"):
            return known_directories(c.directories.ids)
        if self.directories and c.HasField("replicas") and tuple(c.replicas.ids) != self.replicas:
            return ()
        return self.directories


# Kafka's DirectoryId: MIGRATING (not known: from before log directories were assigned), UNASSIGNED
# (the broker has several and has not said which)
MIGRATING, UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"


def known_directories(ids) -> tuple[str, ...]:
    """A replica order's directories as the image keeps them: () where none is known (all MIGRATING)."""
    dirs = tuple(ids)
    return () if all(d == MIGRATING for d in dirs) else dirs


def _changed_list(c: pb.PartitionChangeRecord, field: str, current: tuple[int, ...]) -> tuple[int, ...]:
    return broker_list(getattr(c, field).ids) if c.HasField(field) else current


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: PMap[int, PartitionRegistration] = EMPTY

    def partition(self, partition_id: int) -> Optional[PartitionRegistration]:
        return self.partitions.get(partition_id)

    def records(self) -> Iterator[pb.TopicRecord | pb.PartitionRecord]:
        yield pb.TopicRecord(name=self.name, topic_id=self.topic_id)
        for partition_id in sorted(self.partitions):
            yield self.partitions[partition_id].to_record(self.topic_id, partition_id)


def collision_key(name: str) -> str:
    """Kafka's Topic.unifyCollisionChars: '.' and '_' are one character in metric names."""
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_id: PMap[str, TopicImage] = EMPTY
    ids_by_name: PMap[str, str] = EMPTY  # name -> topic id; changes only on create and delete
    # collision_key(name) -> name, for names holding '.' or '_' (Kafka refuses a topic whose name
    # differs from a live one's only there: their metric names would be the same)
    names_by_collision_key: PMap[str, str] = EMPTY
    partition_total: int = 0  # partitions of all topics, kept as deltas apply (limits check it)

    def topic(self, topic_id: str) -> Optional[TopicImage]:
        return self.by_id.get(topic_id)

    def topic_by_name(self, name: str) -> Optional[TopicImage]:
        topic_id = self.ids_by_name.get(name)
        return None if topic_id is None else self.by_id[topic_id]

    def topic_names(self) -> list[str]:
        return sorted(self.ids_by_name)

    def colliding_name(self, name: str) -> Optional[str]:
        """The live topic whose name collides with ``name`` (equal once '.' is read as '_'), if any."""
        if "." not in name and "_" not in name:
            return None
        other = self.names_by_collision_key.get(collision_key(name))
        return other if other != name else None

    def partition_count(self) -> int:
        """All partitions of all topics."""
        return self.partition_total

    def records(self) -> Iterator[pb.TopicRecord | pb.PartitionRecord]:
        for name in self.topic_names():
            yield from self.by_id[self.ids_by_name[name]].records()


class TopicDelta:
    """Changes to one topic: its new or changed partitions (a created topic has no base)."""

    __slots__ = ("base", "name", "topic_id", "partitions")

    def __init__(self, base: Optional[TopicImage], name: str, topic_id: str) -> None:
        self.base = base
        self.name = name
        self.topic_id = topic_id
        self.partitions: dict[int, PartitionRegistration] = {}

    def partition(self, partition_id: int) -> Optional[PartitionRegistration]:
        p = self.partitions.get(partition_id)
        if p is None and self.base is not None:
            p = self.base.partitions.get(partition_id)
        return p

    def apply(self) -> TopicImage:
        if self.base is not None and not self.partitions:
            return self.base
        if self.base is None:  # a new topic: build its map in one go
            return TopicImage(self.name, self.topic_id, PMap.from_dict(self.partitions))
        return TopicImage(self.name, self.topic_id, self.base.partitions.updated(self.partitions))


class TopicsDelta:
    def __init__(self, image: TopicsImage) -> None:
        self.image = image
        self.changed: dict[str, TopicDelta] = {}  # topic id -> changes (created or changed topics)
        self.deleted: set[str] = set()  # ids of topics of the image that were removed
        self.created_names: dict[str, str] = {}  # name -> id of topics created in this delta

    def topic_id_of(self, name: str) -> Optional[str]:
        """The id of the live topic called ``name`` as of this delta."""
        topic_id = self.created_names.get(name)
        if topic_id is None:
            topic_id = self.image.ids_by_name.get(name)
            if topic_id in self.deleted:
                return None
        return topic_id

    def _live(self, topic_id: str) -> bool:
        return topic_id in self.changed or (topic_id in self.image.by_id and topic_id not in self.deleted)

    def _topic(self, topic_id: str, what: Callable[[], str]) -> TopicDelta:
        """The delta of live topic ``topic_id``; ``what()`` (called only on error) says what failed."""
        delta = self.changed.get(topic_id)
        if delta is None:
            base = self.image.by_id.get(topic_id)
            if base is None or topic_id in self.deleted:
                raise ReplayError(f"{what()}: no topic with id {topic_id}")
            delta = self.changed[topic_id] = TopicDelta(base, base.name, topic_id)
        return delta

    def replay_topic(self, record: pb.TopicRecord) -> None:
        if self._live(record.topic_id):
            raise ReplayError(f"cannot create topic {record.name!r}: id {record.topic_id} exists")
        if self.topic_id_of(record.name) is not None:
            raise ReplayError(f"cannot create topic {record.name!r} ({record.topic_id}): "
                              f"the name is taken by {self.topic_id_of(record.name)}")
        self.changed[record.topic_id] = TopicDelta(None, record.name, record.topic_id)
        self.created_names[record.name] = record.topic_id

    def topic_delta(self, topic_id: str) -> TopicDelta:
        """The delta of live topic ``topic_id`` (ReplayError if there is none)."""
        return self._topic(topic_id, lambda: "cannot add partitions")

    def replay_partition(self, record: pb.PartitionRecord) -> None:
        delta = self._topic(record.topic_id, lambda: f"cannot add partition {record.partition_id}")
        delta.partitions[record.partition_id] = PartitionRegistration.from_record(record)

    def replay_partition_change(self, record: pb.PartitionChangeRecord) -> None:
        delta = self._topic(record.topic_id, lambda: f"cannot change partition {record.partition_id}")
        current = delta.partition(record.partition_id)
        if current is None:
            raise ReplayError(f"cannot change partition {record.partition_id} of topic {delta.name!r}: "
                              f"no such partition")
        delta.partitions[record.partition_id] = current.merge(record)

    def replay_remove_topic(self, record: pb.RemoveTopicRecord) -> str:
        """Remove the topic; return its name (its configs go too, see MetadataDelta)."""
        delta = self.changed.get(record.topic_id)
        if delta is None:
            delta = self._topic(record.topic_id, lambda: "cannot remove topic")
        del self.changed[record.topic_id]
        if delta.base is None:  # created in this delta: leaves no trace
            del self.created_names[delta.name]
        else:
            self.deleted.add(record.topic_id)
        return delta.name

    def apply(self) -> TopicsImage:
        if not self.changed and not self.deleted:
            return self.image
        by_id = self.image.by_id.evolver()
        ids_by_name = self.image.ids_by_name.evolver()
        collisions = self.image.names_by_collision_key.evolver()
        total = self.image.partition_total
        for topic_id in self.deleted:
            total -= len(self.image.by_id[topic_id].partitions)
            name = self.image.by_id[topic_id].name
            ids_by_name.discard(name)
            if collisions.get(collision_key(name)) == name:
                collisions.discard(collision_key(name))
            by_id.discard(topic_id)
        for topic_id, delta in self.changed.items():
            topic = delta.apply()
            if topic is not delta.base:
                by_id[topic_id] = topic
                total += len(topic.partitions) - (len(delta.base.partitions) if delta.base is not None else 0)
        for name, topic_id in self.created_names.items():
            ids_by_name[name] = topic_id
            if ("." in name or "_" in name) and collision_key(name) not in collisions:
                collisions[collision_key(name)] = name
        if not (self.deleted or self.created_names):
            return TopicsImage(by_id.finish(), self.image.ids_by_name, self.image.names_by_collision_key, total)
        return TopicsImage(by_id.finish(), ids_by_name.finish(), collisions.finish(), total)
