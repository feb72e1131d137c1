"""The controller core's settings, and the metadata.version levels it supports: what a node's
configuration (quorum/config.py) maps onto, kept apart from the core so that reading a
configuration does not load the controller."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from quorum.metadata import versions

# metadata.version in Kafka's numbering (quorum/metadata/versions.py)
MV_MIN = 14  # 3.6-IV2: SCRAM credentials and metadata transactions, which sparkraft writes
MV_REASSIGNMENT = MV_MIN  # partition records may carry adding and removing replicas (Kafka: always)
MV_DIRECTORIES = versions.DIRECTORY_ASSIGNMENT  # 3.7-IV2: log directories (KIP-858)
MV_ELR = versions.ELR  # 4.0-IV1: eligible leader replicas (KIP-966)
MV_MAX = 33  # 4.4-IV2, Kafka 4.4's newest: cordoned log dirs, CIDR ACL hosts, controller unregistration
MV_BOOTSTRAP = MV_MAX  # what an empty log starts at (storage format --release-version picks another)
ELR_VERSION = "eligible.leader.replicas.version"
SPARKRAFT_VERSION = versions.SPARKRAFT_VERSION  # sparkraft's own: 1, partition change blocks
# what a broker of this code supports besides metadata.version (RegisterBroker's features)
BROKER_FEATURES: tuple[tuple[str, int, int], ...] = ((ELR_VERSION, 0, 1), (SPARKRAFT_VERSION, 0, 1))
# features only the controllers read (Kafka's brokers never see them): registrations are not checked against them
CONTROLLER_ONLY: frozenset[str] = frozenset({SPARKRAFT_VERSION})


@dataclass(frozen=True)
class ControllerSettings:
    session_timeout_ms: int = 9000  # broker.session.timeout.ms
    heartbeat_interval_ms: int = 2000  # broker.heartbeat.interval.ms
    idle_interval_ms: int = 500  # a NoOpRecord after this long without a write
    log_hold_max_ms: int = 7 * 24 * 3600 * 1000  # metadata.log.hold.max.ms (quorum/controller/log_holds.py)
    audit: bool = True  # metadata.audit.enable: an audit entry per request (quorum/controller/audit.py)
    max_records_per_batch: int = 10000  # larger operations become transactions over several batches
    # ...and so do operations whose records take more bytes than this: a batch must stay well below
    # what a follower fetches at once (8 MiB) and what gRPC sends in one message.
    max_batch_bytes: int = 4 * 1024 * 1024
    # at sparkraft.version 1, a run of at least this many partition changes in one operation is written
    # as PartitionChangeBlockRecords (quorum/metadata/change_block.py); the simulation lowers it
    change_block_min_rows: int = 32
    max_partitions_per_request: int = 100_000  # max.partitions.per.request
    max_partitions: int = 5_000_000  # max.partitions: all topics together
    auto_leader_rebalance: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_percentage: int = 10  # leader.imbalance.per.broker.percentage
    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds
    default_num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    bootstrap_metadata_version: int = MV_BOOTSTRAP
    # records the first active controller of an empty log writes after metadata.version: the SCRAM
    # credentials of 'storage format --add-scram' (read from the log directory's bootstrap.checkpoint)
    bootstrap_records: tuple = field(default=(), repr=False)
    zk_migration: bool = False  # zookeeper.metadata.migration.enable: an empty log starts in PRE_MIGRATION
    seed: Optional[int] = None  # topic/ACL ids and placement; None: derived from cluster and node id
