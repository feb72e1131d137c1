"""DeltaRsWriter: the materialiser's writes, with delta-rs (``deltalake``; no JVM needed).

Exactly once. Every commit carries the application transaction ``sparkraft-materializer`` whose
version is the last log offset the commit covers; before committing to a table the writer checks
that version and skips what the table already holds. It reads it from the table once, then keeps it
from its own commits (it is the one writer of it), and reads it again after any write that failed,
since a store can take a commit and lose its answer. A micro-batch replayed after a crash
(between two table commits, say) therefore completes the tables it had not reached and changes
nothing in the others. One writer per table at a time (the materialiser), as delta-rs needs.

Layout. ``partitions`` is partitioned by ``bucket`` (a hash of the topic id; schemas.py): a merge
names the buckets its rows fall in, so delta-rs reads and rewrites only those files.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Iterable, Optional

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.schema import Field

from delta_tables import storage
from delta_tables.schemas import (
    AUDIT,
    KEYS,
    PARTITION_BY,
    PARTITIONS,
    RECORDS,
    SCHEMAS,
    SNAPSHOTS,
    STATE_TABLES,
    partition_bucket,
)

log = logging.getLogger(__name__)

APP_ID = "sparkraft-materializer"
CDF_PROPERTY = "delta.enableChangeDataFeed"  # on for the state tables: `sparkraft changes` reads it
COMMIT_ATTEMPTS = 5  # a MERGE refused for a concurrent commit is tried again this often
TARGET_FILE_SIZE = 32 << 20
# A MERGE names the keys it touches as literal IN lists (up to this many values per column), so
# delta-rs skips every file whose min/max statistics cannot hold them: without that it reads every
# file of an unpartitioned table, and between two compactions each micro-batch adds one (on object
# storage a merge into ``topics`` went from 0.05 s to 0.5 s within 80 micro-batches).
MAX_PRUNING_VALUES = 1000


class WarehouseError(ValueError):
    """The warehouse cannot be used (not a directory, or a table there is not a Delta table)."""


def _quote(column: str) -> str:
    return f'"{column}"'


def _literal(value: Any) -> str | None:
    """``value`` as a SQL literal, or None where it cannot be one (a null, a float, bytes)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return None


def _pruning(keys: tuple[str, ...], rows: list[dict[str, Any]]) -> list[str]:
    """``t.<key> IN (...)`` for each key column whose values in ``rows`` can all be literals."""
    out = []
    for k in keys:
        values = {r[k] for r in rows}
        literals = sorted(lit for v in values if (lit := _literal(v)) is not None)
        if len(literals) == len(values) and 0 < len(literals) <= MAX_PRUNING_VALUES:
            out.append(f"t.{_quote(k)} IN ({', '.join(literals)})")
    return out


# After a commit delta-rs checkpoints every delta.checkpointInterval versions, as it should; but by
# default it also lists the whole _delta_log to remove expired entries, after every commit: a cost
# that grows with the log (on an S3 API server a commit went from 26 to 85 ms within 300 versions,
# and a log keeps 30 days of them). The maintenance job removes them instead (jobs/maintenance.py).
HOOKS = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
# A table keeps a day of versions (cuts, `sparkraft changes`, time travel): the maintenance job removes
# older log entries and the data files only they need. Delta's defaults (30 days of log, 7 of files)
# are for tables committed to a few times an hour; these take a commit a micro-batch, and delta-rs
# lists a table's whole _delta_log to open it (~1 µs an entry on a local disk): a week of one
# change a second would be ~3 s a read, a day ~0.5 s (`python -m bench history`). The records
# table keeps every record whatever the retention; a table's properties, once there, are the
# operator's to change.
VERSIONS_REFRESH_S = 60.0  # a cut names a table's newest version at most this long after a compaction
RETENTION = {"delta.logRetentionDuration": "interval 1 days", "delta.deletedFileRetentionDuration": "interval 1 days"}


def _txn(version: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(APP_ID, version)])


def _with_columns(dt: DeltaTable, schema: pa.Schema) -> DeltaTable:
    """``dt`` with the columns of ``schema`` it lacks added (null in its existing rows): a warehouse
    written by an older sparkraft gains the columns added since."""
    have = set(pa.schema(dt.schema().to_arrow()).names)
    missing = [Field.from_arrow(f) for f in schema if f.name not in have]
    if missing:
        dt.alter.add_columns(missing)
    return dt


def protocol(name: str) -> tuple[int, int]:
    """The (reader, writer) protocol versions table ``name`` has, with no table features: the
    change data feed needs writer version 4, nothing else here needs more than Delta's first
    protocol, so every Delta reader (Delta's Spark connector, delta-rs, DataFusion, Trino) reads
    them. A test holds the written tables to it; docs/reference/tables.md lists it."""
    return (1, 4) if CDF_PROPERTY in table_properties(name) else (1, 2)


def table_properties(name: str) -> dict[str, str]:
    """What the writer sets on table ``name``: the Change Data Feed on the state tables
    (delta_tables/changes.py), and how long the table keeps its versions readable."""
    return {**({CDF_PROPERTY: "true"} if name in STATE_TABLES else {}), **RETENTION}


def _with_properties(name: str, dt: DeltaTable) -> DeltaTable:
    """A table of a warehouse written before a property was set gains it here (from then on). A
    retention already there is kept: an operator may have chosen another."""
    have = dt.metadata().configuration
    missing = {k: v for k, v in table_properties(name).items()
               if have.get(k) != v and not (k in RETENTION and k in have)}
    if missing:
        dt.alter.set_table_properties(missing)
    return dt


class DeltaRsWriter:
    def __init__(self, warehouse: str | Path):
        self.warehouse = str(warehouse).rstrip("/")
        self._tables: dict[str, DeltaTable] = {}
        # what this writer knows without asking the store: each table's application transaction,
        # as of its own last commit; and the tables whose last write failed, read again before use
        self._applied: dict[str, int] = {}
        self._unsure: set[str] = set()
        self._refresh_versions_at = 0.0  # see versions()

    def path(self, table: str) -> str:
        return f"{self.warehouse}/{table}"

    # -- tables --------------------------------------------------------------------------------
    def ensure_tables(self) -> None:
        """Create the tables that do not exist yet and add the columns a table of an older warehouse
        lacks (``snapshots.voters_version``, ``acls_version``, ``users_version``); refuse a path that
        is not a warehouse."""
        root = Path(self.warehouse)
        storage.check_conditional_writes(self.warehouse)  # an object store: two writers must be safe
        if "://" not in self.warehouse:
            if root.exists() and not root.is_dir():
                raise WarehouseError(f"warehouse {self.warehouse} is not a directory")
            root.mkdir(parents=True, exist_ok=True)
        for name, schema in SCHEMAS.items():
            path = self.path(name)
            try:
                self._tables[name] = _with_properties(
                    name, _with_columns(DeltaTable(path, storage_options=storage.options()), schema))
                continue
            except TableNotFoundError:
                pass
            if "://" not in path and Path(path).exists() and any(Path(path).iterdir()):
                raise WarehouseError(f"{path} exists but is not a Delta table")
            self._tables[name] = DeltaTable.create(
                path, schema, partition_by=PARTITION_BY.get(name), name=name, mode="ignore",
                configuration=table_properties(name),
                storage_options=storage.options())

    def table(self, name: str) -> DeltaTable:
        """Table ``name`` as this writer last saw it: its own commits keep it current (delta-rs
        moves a table to the version it commits), and it is the one writer of the application
        transaction, so what it knows of that is never stale. Other commits (the maintenance job's
        compactions) change no row; a commit that meets one is refused, and like any write that
        failed, its table is read again before its next use. Not listing the log before every use
        is most of a micro-batch's cost on an object store (a LIST per look)."""
        dt = self._tables.get(name)
        if dt is None:
            dt = self._tables[name] = DeltaTable(self.path(name), storage_options=storage.options())
        elif name in self._unsure:
            dt.update_incremental()
            self._unsure.discard(name)
        return dt

    def applied(self, name: str) -> int:
        """The last log offset ``name`` holds (its application transaction), -1 for none: read once,
        then kept by this writer's own commits (delta-rs reads it from the log each time it is asked)."""
        known = self._applied.get(name)
        if known is None:
            version = self.table(name).transaction_version(APP_ID)
            known = self._applied[name] = -1 if version is None else version
        return known

    def _commit(self, name: str, last_offset: int, write) -> Any:
        """``write()``, a commit to ``name`` covering the log through ``last_offset``. A write that
        fails may have landed all the same (a store that timed out after it took the commit): then
        what this writer knows of the table is forgotten, and read again before it is used."""
        try:
            result = write()
        except BaseException:
            self._applied.pop(name, None)
            self._unsure.add(name)
            raise
        self._applied[name] = last_offset
        return result

    def versions(self) -> dict[str, int]:
        """The version of each table a cut names: this writer's last commit to it, or, at most
        ``VERSIONS_REFRESH_S`` old, the table's newest (the maintenance job's compactions change no
        row, so the cut is the same). A table the materialiser has not written for a while must
        not stay named at a version whose files the maintenance job vacuums after the retention."""
        if time.monotonic() >= self._refresh_versions_at:
            for name in (*STATE_TABLES, RECORDS):
                self.table(name).update_incremental()
            self._refresh_versions_at = time.monotonic() + VERSIONS_REFRESH_S
        return {name: self.table(name).version() for name in (*STATE_TABLES, RECORDS)}

    # -- writes --------------------------------------------------------------------------------
    def append_records(self, records: pa.Table, last_offset: int) -> bool:
        """Append log records (a table of the ``records`` schema) through ``last_offset``, those past
        what the table holds; False if the table already holds them all."""
        applied = self.applied(RECORDS)
        if applied >= last_offset:
            return False
        data = records.filter(pc.greater(records.column("offset"), applied))
        self._commit(RECORDS, last_offset, lambda: write_deltalake(
            self.table(RECORDS), data, mode="append", commit_properties=_txn(last_offset),
            post_commithook_properties=HOOKS, target_file_size=TARGET_FILE_SIZE))
        return True

    def append_audit(self, rows: pa.Table, last_offset: int) -> bool:
        """Append ``audit`` rows (delta_tables/audit.py) through ``last_offset``, those past what the
        table holds; False if it holds them all."""
        applied = self.applied(AUDIT)
        data = rows.filter(pc.greater(rows.column("offset"), applied))
        if applied >= last_offset or not data.num_rows:
            return False
        self._commit(AUDIT, last_offset, lambda: write_deltalake(
            self.table(AUDIT), data, mode="append", partition_by=PARTITION_BY[AUDIT],
            commit_properties=_txn(last_offset), post_commithook_properties=HOOKS))
        return True

    def merge_state(self, name: str, upserts: list[dict[str, Any]], deletes: Iterable[tuple],
                    last_offset: int, inserts: Optional[pa.Table] = None) -> dict:
        """Upsert and delete rows of state table ``name`` by key, and add ``inserts`` (rows whose
        keys the table is known not to hold, an Arrow table of its schema: delta_tables/rows.py
        builds the large ones a column at a time), as one commit covering the log through
        ``last_offset``; skipped (``{"skipped": True}``) if the table is already there. Inserts
        alone are appended, and in a MERGE they are not looked for in the table: only the files
        that can hold an upserted or deleted key are read (growing a table by new topics costs
        the same at any size).

        A MERGE read files that a concurrent commit (the maintenance job's compaction) may have
        replaced: delta-rs then refuses it (CommitFailedError). It is tried again on the table as it
        now is, which is safe: the application transaction check comes first every time."""
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                return self._merge_state(name, upserts, deletes, last_offset,
                                         SCHEMAS[name].empty_table() if inserts is None else inserts)
            except CommitFailedError as e:
                if attempt == COMMIT_ATTEMPTS - 1:
                    raise
                log.info("Merge into %s met a concurrent commit (%s); trying again", name, str(e).split(":")[0])
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _merge_state(self, name: str, upserts: list[dict[str, Any]], deletes: Iterable[tuple],
                     last_offset: int, inserts: pa.Table) -> dict:
        if self.applied(name) >= last_offset:
            return {"skipped": True}
        keys = KEYS[name]
        schema = SCHEMAS[name]
        delete_rows = [dict(zip(keys, key)) for key in deletes]
        if not upserts and not delete_rows:
            # Only new rows, or none (the table now covers last_offset all the same): an append.
            self._commit(name, last_offset, lambda: write_deltalake(
                self.table(name), inserts, mode="append", commit_properties=_txn(last_offset),
                post_commithook_properties=HOOKS, target_file_size=TARGET_FILE_SIZE))
            return {"rows": inserts.num_rows}
        # The keys named as literals (and the partitions' buckets), so only the files that can hold
        # them are read and rewritten; then the join itself.
        join = [f"t.{_quote(k)} = s.{_quote(k)}" for k in keys]
        if name == PARTITIONS:
            for r in delete_rows:
                r["bucket"] = partition_bucket(r["topic_id"])
            join.append("t.bucket = s.bucket")
        touched = upserts + delete_rows
        predicate = " AND ".join(_pruning(("bucket", *keys) if name == PARTITIONS else keys, touched) + join)
        with_delete = schema.append(pa.field("_delete", pa.bool_()))
        source = pa.concat_tables([
            pa.Table.from_pylist([{**r, "_delete": False} for r in upserts]
                                 + [{**r, "_delete": True} for r in delete_rows], schema=with_delete),
            inserts.append_column("_delete", pa.repeat(False, inserts.num_rows))])
        columns = {_quote(c): f"s.{_quote(c)}" for c in schema.names}
        return self._commit(name, last_offset, lambda: (
            self.table(name).merge(source, predicate, source_alias="s", target_alias="t",
                                   commit_properties=_txn(last_offset), post_commithook_properties=HOOKS)
            .when_matched_delete(predicate="s._delete = true")
            .when_matched_update(updates=columns, predicate="s._delete = false")
            .when_not_matched_insert(updates=columns, predicate="s._delete = false")
            .execute()))

    def add_snapshot(self, offset: int, epoch: int, versions: dict[str, int]) -> None:
        """Record the consistent cut at ``offset``: the version of each table that holds it."""
        if self.applied(SNAPSHOTS) >= offset:
            return
        row = {"offset": offset, "epoch": epoch, "created_at": int(time.time() * 1000),
               **{f"{name}_version": v for name, v in versions.items()}}
        self._commit(SNAPSHOTS, offset, lambda: write_deltalake(
            self.table(SNAPSHOTS), pa.Table.from_pylist([row], schema=SCHEMAS[SNAPSHOTS]), mode="append",
            commit_properties=_txn(offset), post_commithook_properties=HOOKS))


def latest_applied(writer: DeltaRsWriter) -> Optional[int]:
    """The offset of the newest cut (None: no cut yet)."""
    v = writer.applied(SNAPSHOTS)
    return None if v < 0 else v
