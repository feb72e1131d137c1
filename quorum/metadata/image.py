"""MetadataImage: the whole cluster metadata at one log offset, immutable, in per-domain parts."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import ClassVar

from google.protobuf.message import Message

from quorum.metadata.acls import AclsImage
from quorum.metadata.audit import AuditImage
from quorum.metadata.cluster import ClusterImage
from quorum.metadata.configs import ConfigsImage
from quorum.metadata.features import FeaturesImage
from quorum.metadata.producer_ids import ProducerIdsImage
from quorum.metadata.quotas import ClientQuotasImage
from quorum.metadata.scram import ScramImage
from quorum.metadata.topics import TopicsImage


@dataclass(frozen=True, slots=True)
class Provenance:
    """The last log record an image contains: its offset and the leader epoch it was written in."""

    offset: int = -1
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """Immutable; a MetadataDelta derives the next one, sharing every part it did not change.

    Equality compares the provenance too: two images are equal if they hold the same metadata
    *and* end at the same record.
    """

    provenance: Provenance = field(default_factory=Provenance)
    features: FeaturesImage = field(default_factory=FeaturesImage)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: ConfigsImage = field(default_factory=ConfigsImage)
    client_quotas: ClientQuotasImage = field(default_factory=ClientQuotasImage)
    producer_ids: ProducerIdsImage = field(default_factory=ProducerIdsImage)
    acls: AclsImage = field(default_factory=AclsImage)
    scram: ScramImage = field(default_factory=ScramImage)
    audit: AuditImage = field(default_factory=AuditImage)

    EMPTY: ClassVar[MetadataImage]

    @property
    def offset(self) -> int:
        return self.provenance.offset

    def same_metadata(self, other: "MetadataImage") -> bool:
        """Whether ``other`` holds the same metadata, wherever each ends: the audit trail's head is
        not metadata (a refused request writes an audit entry and changes nothing else)."""
        return replace(self, provenance=Provenance(), audit=AuditImage()) == replace(
            other, provenance=Provenance(), audit=AuditImage())

    def records(self) -> Iterator[Message]:
        """Records that rebuild this image when replayed onto an empty one (a snapshot's body).

        Features come first (metadata.version says how to read the rest), then the order Kafka
        writes its snapshots in; within a domain, sorted by key, so equal images give equal
        snapshots.
        """
        return chain(self.features.records(), self.cluster.records(), self.topics.records(),
                     self.configs.records(), self.client_quotas.records(),
                     self.producer_ids.records(), self.acls.records(), self.scram.records(),
                     self.audit.records())


MetadataImage.EMPTY = MetadataImage()
