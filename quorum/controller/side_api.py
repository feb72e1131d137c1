"""The controller's requests about what lies beside the metadata: a ZooKeeper-mode cluster's
migration, the holds readers put on the log, and refusals other controllers saw (re-exported by
api.py, where every request is)."""
from __future__ import annotations

from dataclasses import dataclass, field

from quorum.metadata.audit import LogHold


# ---------------------------------------------------------------- migration from ZooKeeper
@dataclass(frozen=True, slots=True)
class ImportZkMetadataRequest:
    """The migration driver's import of a ZooKeeper-mode cluster (quorum/migration): the records
    that rebuild what ZooKeeper holds. Written with the move to MIGRATION as one transaction; never
    on the wire (only the active controller's own driver makes it)."""

    records: tuple = field(repr=False)  # metadata record messages (RegisterBroker's epochs filled in by the core)
    zk_controller_epoch: int = -1  # the ZooKeeper controller epoch the driver claimed (for the log line)


@dataclass(frozen=True, slots=True)
class FinalizeMigrationRequest:
    pass


@dataclass(frozen=True, slots=True)
class DescribeMigrationRequest:
    pass


@dataclass(frozen=True, slots=True)
class MigrationDescription:
    state: str  # NONE, PRE_MIGRATION, MIGRATION or POST_MIGRATION (the log's)
    zk_controller_epoch: int = -1  # the active controller's claim on ZooKeeper; -1 none or not known here
    dual_write_lag_records: int = -1  # committed records ZooKeeper does not hold yet; -1 not known here
    mirrored_offset: int = -1  # the last metadata offset mirrored to ZooKeeper; -1 not known here
    error: str = ""  # why the migration cannot go on


# ---------------------------------------------------------------- log holds (quorum/controller/log_holds.py)
@dataclass(frozen=True, slots=True)
class HoldLogRequest:
    """``holder`` keeps what it read of the log elsewhere, up to ``offset``: keep the records from
    ``offset`` on; ``release``: let go of the hold."""

    holder: str
    offset: int = -1
    release: bool = False


@dataclass(frozen=True, slots=True)
class DescribeLogHoldsRequest:
    pass


@dataclass(frozen=True, slots=True)
class LogHolds:
    holds: tuple[LogHold, ...]
    max_age_ms: int  # a hold not renewed for this long no longer holds the log (-1: never lapses)


# ---------------------------------------------------------------- audit (quorum/controller/audit.py)
@dataclass(frozen=True, slots=True)
class RecordRefusalRequest:
    """A refusal controller ``controller_id`` answered itself (a request carrying secrets on a
    listener without TLS), for the active controller's audit trail: who asked, how, for what, and
    the error; already in an entry's words (``request``, ``resources``, ``changes``)."""

    controller_id: int
    principal: str
    host: str
    listener: str
    software: tuple[str, str]
    forwarded_by: str
    request: str
    resources: tuple[str, ...]
    changes: tuple[str, ...]
    error_code: int
    error_message: str


@dataclass(frozen=True, slots=True)
class DescribeAuditRequest:
    """The audit entries the controller's own log holds from ``from_offset`` (up to what is
    committed), at most ``max_entries`` of them: the trail without a warehouse, as far back as
    the log goes."""

    from_offset: int = 0
    max_entries: int = 1000


@dataclass(frozen=True, slots=True)
class AuditEntries:
    entries: tuple[tuple[int, bytes], ...]  # (offset, the AuditRecord serialized), in offset order
    next_offset: int  # where the next page starts; the committed end when there is no more
    log_start: int  # the oldest offset the log holds: entries before it are only in the lakehouse
