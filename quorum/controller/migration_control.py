"""The controller's side of a migration from ZooKeeper mode (KIP-866): the states in the log.

An empty log of a quorum formed with ``zookeeper.metadata.migration.enable=true`` starts in
PRE_MIGRATION (written with the bootstrap metadata). Until ZooKeeper's metadata is imported, the
controller takes no other write: nothing may be created that the import could collide with. The
import (quorum/migration/driver.py reads ZooKeeper and sends ImportZkMetadataRequest) is written
with the move to MIGRATION as one transaction, so a controller that dies half way leaves nothing
(the next one aborts the open transaction and imports again). ``finalize`` moves MIGRATION to
POST_MIGRATION, after which ZooKeeper is not written any more.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.features import ZkMigrationState

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext

PRE_MIGRATION = ZkMigrationState.PRE_MIGRATION
MIGRATION = ZkMigrationState.MIGRATION
POST_MIGRATION = ZkMigrationState.POST_MIGRATION


def state_name(code: int) -> str:
    return ZkMigrationState.Code.Name(code)


def bootstrap_records() -> list[pb.ZkMigrationStateRecord]:
    """What a migrating quorum's first active controller writes into an empty log."""
    return [pb.ZkMigrationStateRecord(zk_migration_state=PRE_MIGRATION)]


def refusal(core: "ControllerContext", migrates: bool) -> SparkraftError | None:
    """The error that refuses a write while ZooKeeper's metadata is not imported yet, or None
    (NOT_CONTROLLER: clients retry it; the migration's own requests, ``migrates`` in their registry
    rows, answer for themselves)."""
    if core.spec.features.zk_migration_state != PRE_MIGRATION or migrates:
        return None
    return SparkraftError(Errors.NOT_CONTROLLER, "the active controller is importing the ZooKeeper-mode "
                          "cluster's metadata (migration state PRE_MIGRATION): try again shortly",
                          leader_id=core.node_id)


def import_zk(core: "ControllerContext", req: api.ImportZkMetadataRequest):
    """(records, reply): ZooKeeper's metadata and the move to MIGRATION. The core writes them as one
    transaction (Begin at the next offset), so each imported broker's epoch, the offset of its
    registration, is known here. Records that do not apply (a partition of an unknown topic) are
    refused by the core as they are applied to its speculative image, before anything is written."""
    state = core.spec.features.zk_migration_state
    if state != PRE_MIGRATION:
        raise SparkraftError(Errors.INVALID_REQUEST, f"the migration state is {state_name(state)}: ZooKeeper's "
                             f"metadata is imported only in PRE_MIGRATION")
    records = list(req.records)
    first = core.next_write_offset + 1  # after the BeginTransactionRecord
    for i, record in enumerate(records):
        if isinstance(record, pb.RegisterBrokerRecord):
            record.broker_epoch = first + i
        elif isinstance(record, (pb.BeginTransactionRecord, pb.EndTransactionRecord, pb.AbortTransactionRecord,
                                 pb.ZkMigrationStateRecord)):
            raise SparkraftError(Errors.INVALID_RECORD, f"an import may not hold a {type(record).__name__}")
    records.append(pb.ZkMigrationStateRecord(zk_migration_state=MIGRATION))
    return records, len(records)


def finalize(core: "ControllerContext", req: api.FinalizeMigrationRequest):
    state = core.spec.features.zk_migration_state
    if state != MIGRATION:
        raise SparkraftError(Errors.INVALID_REQUEST, f"there is no migration to finalize: the migration state is "
                             f"{state_name(state)} (finalize ends MIGRATION)")
    return [pb.ZkMigrationStateRecord(zk_migration_state=POST_MIGRATION)], None
