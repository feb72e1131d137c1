"""Record builders shared by the metadata tests (deterministic ids, short names)."""
from __future__ import annotations

import base64
from typing import Iterable, Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import MetadataDelta, MetadataImage, Provenance
from quorum.metadata.pmap import PMap


def uid(n: int) -> str:
    """A valid Kafka Uuid string derived from ``n`` (22 base64url characters)."""
    return base64.urlsafe_b64encode(n.to_bytes(16, "big")).rstrip(b"=").decode()


def broker(broker_id: int, epoch: int = 10, fenced: bool = True, rack: Optional[str] = None,
           port: int = 9092) -> pb.RegisterBrokerRecord:
    return pb.RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uid(1000 + broker_id), broker_epoch=epoch,
        endpoints=[pb.RegisterBrokerRecord.BrokerEndpoint(
            name="PLAINTEXT", host=f"b{broker_id}", port=port,
            security_protocol=pb.SecurityProtocol.PLAINTEXT)],
        features=[pb.RegisterBrokerRecord.BrokerFeature(
            name="metadata.version", min_supported_version=1, max_supported_version=7)],
        rack=rack, fenced=fenced)


def topic(name: str, n: int) -> pb.TopicRecord:
    return pb.TopicRecord(name=name, topic_id=uid(n))


def partition(topic_n: int, pid: int, replicas: Iterable[int], isr: Optional[Iterable[int]] = None,
              leader: Optional[int] = None, **kw) -> pb.PartitionRecord:
    replicas = list(replicas)
    isr = replicas if isr is None else list(isr)
    leader = (isr[0] if isr else -1) if leader is None else leader
    return pb.PartitionRecord(partition_id=pid, topic_id=uid(topic_n), replicas=replicas, isr=isr,
                              leader=leader, **kw)


def change(topic_n: int, pid: int, **fields) -> pb.PartitionChangeRecord:
    """A PartitionChangeRecord; list-valued fields become BrokerIds."""
    for name in ("isr", "replicas", "removing_replicas", "adding_replicas"):
        if name in fields:
            fields[name] = pb.BrokerIds(ids=fields[name])
    return pb.PartitionChangeRecord(topic_id=uid(topic_n), partition_id=pid, **fields)


def config(resource_type: int, resource_name: str, name: str, value: Optional[str]) -> pb.ConfigRecord:
    return pb.ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name,
                           value=value)


def replay(image: MetadataImage, records: Iterable, provenance: Optional[Provenance] = None) -> MetadataImage:
    """``image`` + a delta of ``records`` (offsets continue after the image's)."""
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.offset + 1):
        delta.replay(record, offset)
    return delta.apply(provenance)


def rebuild(image: MetadataImage) -> MetadataImage:
    """Replay ``image.records()`` onto the empty image, with the image's provenance."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    for record in image.records():
        delta.replay(record)
    return delta.apply(image.provenance)


DOMAINS = ("features", "cluster", "topics", "configs", "client_quotas", "producer_ids", "acls")


def same_except(before: MetadataImage, after: MetadataImage, *changed: str) -> None:
    """Every sub-image not in ``changed`` is the very same object: untouched domains are shared."""
    for domain in DOMAINS:
        if domain not in changed:
            assert getattr(after, domain) is getattr(before, domain), domain


def new_nodes(old: PMap, new: PMap) -> list:
    """The trie nodes of ``new`` that ``old`` does not share (by identity)."""
    shared = {id(node) for node in old.nodes()}
    return [node for node in new.nodes() if id(node) not in shared]


def depth(pmap: PMap) -> int:
    """The number of nodes on the longest root-to-leaf path of the trie."""
    def below(node) -> int:
        if type(node) is not list:
            return 1
        return 1 + max((below(child) for child in node if child is not None), default=0)
    return below(pmap._root)
