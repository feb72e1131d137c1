"""A ZooKeeper-mode cluster's metadata, as read from ZooKeeper, and the records that rebuild it.

``ZkCluster`` is what quorum/migration/zk_client.py reads (already decoded by znodes.py);
``import_records`` turns it into metadata records, in the order a snapshot lists them. Pure: the
same cluster gives the same records (new topic ids come from the ``new_uuid`` the caller passes).
Kafka's semantics where the two modes differ:

- a topic keeps the id ZooKeeper holds; one from before topic ids (Kafka < 2.8) gets a new one;
- a partition's epoch is its state znode's version (Kafka's partition epoch in ZooKeeper mode);
- the brokers of ``/brokers/ids`` are registered fenced: they are ZooKeeper-mode processes, and a
  sparkraft broker with the same id registers (and is unfenced) as any broker does;
- ``/latest_producer_id_block`` becomes the next producer id after its block.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from google.protobuf.message import Message

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.configs import BROKER, TOPIC
from quorum.migration import znodes as z


@dataclass
class ZkCluster:
    cluster_id: Optional[str] = None
    brokers: list[z.ZkBroker] = field(default_factory=list)
    topics: list[z.ZkTopic] = field(default_factory=list)
    states: dict[tuple[str, int], z.ZkPartitionState] = field(default_factory=dict)
    # (entity type, sanitized path under /config/<type>) -> config; users' clients as "u/clients/c"
    configs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    # (pattern type code, resource type name, resource name) -> ACLs
    acls: dict[tuple[int, str, str], list[z.ZkAcl]] = field(default_factory=dict)
    producer_id_block_end: Optional[int] = None

    @property
    def partition_count(self) -> int:
        return sum(len(t.replicas) for t in self.topics)


@dataclass(frozen=True)
class Imported:
    records: list[Message]
    topics_without_id: tuple[str, ...]  # ZooKeeper gets their new ids from the first mirror round


def import_records(cluster: ZkCluster, new_uuid: Callable[[], str],
                   known_ids: Optional[Any] = None) -> Imported:
    """The records of everything ``cluster`` holds; MalformedZnode where ZooKeeper's data is
    inconsistent (a partition without its state, a quota that is not a number). ``known_ids``: the
    ids the log already gave topics ZooKeeper holds without one (name -> id, a dict or the image's map;
    after a failover, so that the next controller's image of ZooKeeper names them as the log does)."""
    known_ids = known_ids or {}
    records: list[Message] = []
    for b in sorted(cluster.brokers, key=lambda b: b.broker_id):
        records.append(pb.RegisterBrokerRecord(
            broker_id=b.broker_id, incarnation_id=new_uuid(), broker_epoch=0, fenced=True, rack=b.rack,
            endpoints=[pb.RegisterBrokerRecord.BrokerEndpoint(name=n, host=h, port=p, security_protocol=sp)
                       for n, h, p, sp in b.endpoints]))
    without_id = []
    for t in sorted(cluster.topics, key=lambda t: t.name):
        topic_id = t.topic_id
        if topic_id is None:
            topic_id = known_ids.get(t.name) or new_uuid()
            without_id.append(t.name)
        records.append(pb.TopicRecord(name=t.name, topic_id=topic_id))
        for p in sorted(t.replicas):
            state = cluster.states.get((t.name, p))
            if state is None:
                raise z.MalformedZnode(z.partition_state_path(t.name, p), "missing (the topic lists the partition)")
            records.append(pb.PartitionRecord(
                partition_id=p, topic_id=topic_id, replicas=t.replicas[p], isr=state.isr,
                adding_replicas=t.adding.get(p, ()), removing_replicas=t.removing.get(p, ()),
                leader=state.leader, leader_epoch=state.leader_epoch, partition_epoch=state.zk_version))
    records += _config_records(cluster)
    for (pattern, rtype, name), acls in sorted(cluster.acls.items()):
        for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission)):
            records.append(pb.AccessControlEntryRecord(
                id=new_uuid(), resource_type=z.RESOURCE_TYPES[rtype], resource_name=name, pattern_type=pattern,
                principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission))
    if cluster.producer_id_block_end is not None:
        records.append(pb.ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                            next_producer_id=cluster.producer_id_block_end + 1))
    return Imported(records, tuple(without_id))


def _config_records(cluster: ZkCluster) -> list[Message]:
    topics = {t.name for t in cluster.topics}
    out: list[Message] = []
    for (kind, segment), config in sorted(cluster.configs.items()):
        path = f"{z.CONFIG}/{kind}/{segment}"
        if kind == "topics":
            name = z.desanitize(segment)
            if name in topics:  # a deleted topic's leftover config is not imported
                out += [pb.ConfigRecord(resource_type=TOPIC, resource_name=name, name=k, value=v)
                        for k, v in sorted(config.items())]
        elif kind == "brokers":
            name = z.desanitize(segment) or ""
            if name and not name.isdigit():
                raise z.MalformedZnode(path, "a broker config is named by a broker id or <default>")
            out += [pb.ConfigRecord(resource_type=BROKER, resource_name=name, name=k, value=v)
                    for k, v in sorted(config.items())]
        else:
            out += _client_records(path, kind, segment, config)
    return out


def _client_records(path: str, kind: str, segment: str, config: dict[str, str]) -> list[Message]:
    user, _, client = segment.partition("/clients/")
    if client:
        entity = [("user", z.desanitize(user)), ("client-id", z.desanitize(client))]
    else:
        entity = [(z.QUOTA_ENTITY_TYPES[kind], z.desanitize(segment))]
    out: list[Message] = []
    for key, value in sorted(config.items()):
        if key in z.SCRAM_KEYS:
            if kind != "users" or client or entity[0][1] is None:
                raise z.MalformedZnode(path, f"{key} belongs in a user's config")
            salt, stored, server, iterations = z.decode_scram(path, key, value)
            out.append(pb.UserScramCredentialRecord(name=entity[0][1], mechanism=z.SCRAM_KEYS[key], salt=salt,
                                                    stored_key=stored, server_key=server, iterations=iterations))
            continue
        try:
            number = float(value)
        except ValueError:
            raise z.MalformedZnode(path, f"quota {key}={value!r} is not a number") from None
        out.append(pb.ClientQuotaRecord(entity=[pb.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n)
                                                for t, n in entity], key=key, value=number))
    return out
