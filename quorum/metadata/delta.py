"""MetadataDelta: records replayed onto an image, applied as a new image.

Each record goes to the sub-delta of its domain, created on first use; ``apply()`` asks only the
sub-deltas that exist for their new sub-image and reuses the others as they are (and each
sub-delta in turn returns its base when nothing in it changed). Replay trusts the log (the active
controller validated each record before writing it) and checks only what it must look up: an
unknown topic, partition, registered broker or ACL raises ReplayError and changes nothing.

Transaction markers (Begin/End/AbortTransaction) are not the delta's business: a delta already is
"changes not yet visible", so MetadataLoader implements transactions by choosing when to apply a
delta and when to drop it. An UnknownRecord (a newer writer's type) and NoOpRecord change nothing.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Optional

from google.protobuf.message import Message

from quorum.metadata import change_block
from quorum.metadata.acls import AclsDelta
from quorum.metadata.audit import AuditDelta
from quorum.metadata.cluster import ClusterDelta
from quorum.metadata.configs import ConfigsDelta
from quorum.metadata.errors import ReplayError
from quorum.metadata.features import FeaturesDelta
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.producer_ids import ProducerIdsDelta
from quorum.metadata.quotas import ClientQuotasDelta
from quorum.metadata.records import AnyRecord, MetadataRecord, RecordType, as_record
from quorum.metadata.scram import ScramDelta
from quorum.metadata.topics import TopicsDelta

TRANSACTION_MARKERS = frozenset({RecordType.BEGIN_TRANSACTION_RECORD,
                                 RecordType.END_TRANSACTION_RECORD,
                                 RecordType.ABORT_TRANSACTION_RECORD})


class MetadataDelta:
    """Changes on top of ``image``. A sub-delta is None until a record touches its domain."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.last_offset = image.provenance.offset  # highest offset replayed (or the image's)
        self.features: Optional[FeaturesDelta] = None
        self.cluster: Optional[ClusterDelta] = None
        self.topics: Optional[TopicsDelta] = None
        self.configs: Optional[ConfigsDelta] = None
        self.client_quotas: Optional[ClientQuotasDelta] = None
        self.producer_ids: Optional[ProducerIdsDelta] = None
        self.acls: Optional[AclsDelta] = None
        self.scram: Optional[ScramDelta] = None
        self.audit: Optional[AuditDelta] = None

    def replay(self, record: Message | AnyRecord, offset: Optional[int] = None) -> None:
        """Replay one record at ``offset``, which must be past every offset replayed before
        (None for a record without one, such as a snapshot's)."""
        self._check_offset(offset)
        record = as_record(record)
        if type(record) is MetadataRecord:
            handler = _HANDLERS.get(record.type)
            if handler is None:
                raise ReplayError(f"{record.type_name} must go through MetadataLoader, which "
                                  f"implements transactions on top of deltas")
            handler(self, record.message)
        if offset is not None:
            self.last_offset = offset

    def replay_block(self, block: Message, offset: Optional[int],
                     moves: change_block.Moves, revisited: set) -> None:
        """``replay`` of a partition change block that also says what its rows did (see
        ``change_block.replay``), for an index that follows this delta's images."""
        self._check_offset(offset)
        change_block.replay(self.sub("topics"), block, moves, revisited)
        if offset is not None:
            self.last_offset = offset

    def _check_offset(self, offset: Optional[int]) -> None:
        if offset is not None and offset <= self.last_offset:
            raise ReplayError(f"offset {offset} is not after the last replayed offset "
                              f"{self.last_offset}")

    def sub(self, domain: str) -> Any:
        """The sub-delta of ``domain`` (a MetadataImage field name), created on first use."""
        delta = getattr(self, domain)
        if delta is None:
            delta = _DELTA_CLASS[domain](getattr(self.image, domain))
            setattr(self, domain, delta)
        return delta

    def _remove_topic(self, record: Message) -> None:
        name = self.sub("topics").replay_remove_topic(record)
        self.sub("configs").remove_topic(name)

    def apply(self, provenance: Optional[Provenance] = None) -> MetadataImage:
        """The new image. ``provenance`` defaults to the last replayed offset with the base
        image's epoch (callers that know the batch's epoch pass it)."""
        if provenance is None:
            provenance = Provenance(self.last_offset, self.image.provenance.epoch)
        changed = {domain: delta.apply() for domain in _DELTA_CLASS
                   if (delta := getattr(self, domain)) is not None}
        return replace(self.image, provenance=provenance, **changed)


_DELTA_CLASS: dict[str, type] = {
    "features": FeaturesDelta, "cluster": ClusterDelta, "topics": TopicsDelta,
    "configs": ConfigsDelta, "client_quotas": ClientQuotasDelta,
    "producer_ids": ProducerIdsDelta, "acls": AclsDelta, "scram": ScramDelta, "audit": AuditDelta,
}


def _to(domain: str, method: str) -> Callable[[MetadataDelta, Message], None]:
    replay = getattr(_DELTA_CLASS[domain], method)  # looked up once, not once per record

    def handler(delta: MetadataDelta, message: Message) -> None:
        sub = getattr(delta, domain)
        replay(sub if sub is not None else delta.sub(domain), message)
    return handler


_HANDLERS: dict[RecordType, Callable[[MetadataDelta, Message], None]] = {
    RecordType.REGISTER_BROKER_RECORD: _to("cluster", "replay_register_broker"),
    RecordType.UNREGISTER_BROKER_RECORD: _to("cluster", "replay_unregister_broker"),
    RecordType.REGISTER_CONTROLLER_RECORD: _to("cluster", "replay_register_controller"),
    RecordType.UNREGISTER_CONTROLLER_RECORD: _to("cluster", "replay_unregister_controller"),
    RecordType.BROKER_REGISTRATION_CHANGE_RECORD: _to("cluster", "replay_broker_registration_change"),
    RecordType.TOPIC_RECORD: _to("topics", "replay_topic"),
    RecordType.PARTITION_RECORD: _to("topics", "replay_partition"),
    RecordType.PARTITION_CHANGE_RECORD: _to("topics", "replay_partition_change"),
    RecordType.PARTITION_CHANGE_BLOCK_RECORD: lambda delta, message: change_block.replay(delta.sub("topics"), message),
    RecordType.PARTITION_CHANGE_BLOCK_CONTINUATION_RECORD: lambda delta, message: None,  # its block changed it
    RecordType.REMOVE_TOPIC_RECORD: MetadataDelta._remove_topic,  # its topic configs go too
    RecordType.CONFIG_RECORD: _to("configs", "replay_config"),
    RecordType.FEATURE_LEVEL_RECORD: _to("features", "replay_feature_level"),
    RecordType.CLIENT_QUOTA_RECORD: _to("client_quotas", "replay_client_quota"),
    RecordType.PRODUCER_IDS_RECORD: _to("producer_ids", "replay_producer_ids"),
    RecordType.ACCESS_CONTROL_ENTRY_RECORD: _to("acls", "replay_access_control_entry"),
    RecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD: _to("acls", "replay_remove_access_control_entry"),
    RecordType.USER_SCRAM_CREDENTIAL_RECORD: _to("scram", "replay_user_scram_credential"),
    RecordType.REMOVE_USER_SCRAM_CREDENTIAL_RECORD: _to("scram", "replay_remove_user_scram_credential"),
    RecordType.NO_OP_RECORD: lambda delta, message: None,
    RecordType.AUDIT_RECORD: _to("audit", "replay_audit"),
    RecordType.LOG_HOLD_RECORD: _to("audit", "replay_log_hold"),
    RecordType.ZK_MIGRATION_STATE_RECORD: _to("features", "replay_zk_migration_state"),
}
