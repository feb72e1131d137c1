"""Consistent cuts: the tables as they were at a metadata offset, for SQL and bootstrapping brokers.

A ``snapshots`` row is written only after the state tables and ``records`` hold every record
through its offset, and it names the version of each table at that moment. Reading every table at
the versions of one row gives a consistent view of the cluster's metadata at that offset, however
far the tables have moved on since.
"""
from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import TableNotFoundError

from delta_tables import storage
from delta_tables.schemas import ALL_TABLES, AUDIT, RECORDS, SCHEMAS, SNAPSHOTS, STATE_TABLES

# delta-rs's refusal of a table whose protocol names a feature it lacks
_UNSUPPORTED_FEATURE = re.compile(r"Feature '([^']+)' is not supported")


class CutError(ValueError):
    """No cut can be read (no warehouse, no cut at or below the offset asked for)."""


@dataclass(frozen=True)
class Cut:
    offset: int
    epoch: int
    versions: dict[str, int]  # table -> Delta version holding the cut


def _open(warehouse: str, table: str, version: Optional[int] = None) -> DeltaTable:
    """``table`` at ``version`` (the newest if None). The newest version is opened first: it is
    usually the one asked for, and delta-rs opens it several times faster than an older one
    (~2 against ~10 µs per entry of the table's log, which a day of micro-batches makes long)."""
    path = f"{warehouse.rstrip('/')}/{table}"
    try:
        newest = DeltaTable(path, storage_options=storage.options())
        if version is None or newest.version() == version:
            return newest
        return DeltaTable(path, version=version, storage_options=storage.options())
    except TableNotFoundError:
        raise CutError(f"{path} is not a Delta table (is {warehouse} a sparkraft warehouse? "
                       f"`sparkraft materialize` creates it)") from None
    except Exception as e:
        feature = _UNSUPPORTED_FEATURE.search(str(e))
        if feature:
            from importlib.metadata import version as installed

            raise CutError(f"{path} needs the Delta table feature {feature[1]!r}, which this deltalake "
                           f"({installed('deltalake')}) cannot read: upgrade it (pip install -U deltalake), "
                           f"or undo the change that enabled the feature on that table") from None
        if not storage.is_object_store(warehouse):
            raise
        raise CutError(f"cannot open {path}: {e} (an object store is configured by the AWS_* environment variables "
                       f"and --storage-option KEY=VALUE)") from None


def scan(dt: DeltaTable, columns: Optional[Sequence[str]] = None) -> pa.Table:
    """A whole table (or ``columns`` of it) in one chunk, read by delta-rs's own engine (DataFusion,
    on every core), in the table's own Arrow types. Against pyarrow's dataset over the same files:
    0.55 s against 1.15 s for 100,000 partitions in 700 files, whose fragments pyarrow sets up one by
    one (docs/bench/console.md). The engine gives strings as Arrow's view types, cast back here."""
    schema = pa.schema(dt.schema().to_arrow())
    if columns:
        schema = pa.schema([schema.field(c) for c in columns])
    names = ", ".join('"' + n.replace('"', '""') + '"' for n in schema.names)
    batches = QueryBuilder().register("t", dt).execute(f"SELECT {names} FROM t").read_all()
    return pa.table(batches).cast(schema).combine_chunks()


def read_table(dt: DeltaTable) -> pa.Table:
    """A whole table as Arrow (single-threaded: see DESIGN §9 on delta-rs reads at exit)."""
    return dt.to_pyarrow_dataset().to_table(use_threads=False)


def _newest_rows(dt: DeltaTable, at_or_below: Optional[int]) -> pa.Table:
    """The ``snapshots`` rows that can hold the newest cut (at or below ``at_or_below``). The table
    gains a row per micro-batch, so after a year it has tens of millions: the files' statistics
    name the lowest offset the answer can have (the greatest least offset of a file that has one
    low enough), and the scan is filtered from it, which skips the other files."""
    bound = pc.field("offset") <= at_or_below if at_or_below is not None else None
    actions = pa.table(dt.get_add_actions(flatten=True))
    lows = actions.column("min.offset").to_pylist() if "min.offset" in actions.column_names else []
    candidates = [m for m in lows if m is not None and (at_or_below is None or m <= at_or_below)]
    if candidates and None not in lows:  # a file without statistics could hold anything
        floor = pc.field("offset") >= max(candidates)
        bound = floor if bound is None else bound & floor
    return dt.to_pyarrow_dataset().to_table(filter=bound, use_threads=False)


def latest_cut(warehouse: str, at_or_below: Optional[int] = None) -> Cut:
    """The newest cut (at or below ``at_or_below`` if given)."""
    return _newest_cut(_open(warehouse, SNAPSHOTS), warehouse, at_or_below)


def cut_at_time(warehouse: str, t: datetime.datetime) -> Cut:
    """The newest cut whose records were all appended at or before ``t`` (by their append time,
    stamped by the controller that committed them); CutError if there is none."""
    records = _open(warehouse, RECORDS).to_pyarrow_dataset().to_table(
        columns=["offset"], filter=pc.field("append_time") <= pa.scalar(t, pa.timestamp("ms", "UTC")),
        use_threads=False)
    if records.num_rows == 0:
        raise CutError(f"no cut at {t.isoformat()} in {warehouse}: no record was appended by then")
    newest = pc.max(records.column("offset")).as_py()
    try:
        return latest_cut(warehouse, newest)
    except CutError:
        raise CutError(f"no cut at {t.isoformat()} in {warehouse}: the oldest cut holds records appended after "
                       f"it") from None


def _newest_cut(snapshots: DeltaTable, warehouse: str, at_or_below: Optional[int] = None) -> Cut:
    rows = _newest_rows(snapshots, at_or_below)
    if rows.num_rows == 0:
        first = read_table(snapshots)
        where = "" if at_or_below is None else f" at or below offset {at_or_below}"
        oldest = (f"; the oldest is at offset {pc.min(first.column('offset')).as_py()}"
                  if first.num_rows else "; the materialiser has not written one yet")
        raise CutError(f"no consistent cut{where} in {warehouse}{oldest}")
    return cut_of_row(rows.sort_by([("offset", "descending")]).slice(0, 1).to_pylist()[0])


def cut_of_row(row: dict) -> Cut:
    """The Cut a ``snapshots`` row names."""
    # A cut written before the voters, acls or users table existed names no version of it: its version 0 (empty).
    return Cut(row["offset"], row["epoch"], {t: row.get(f"{t}_version") or 0 for t in (*STATE_TABLES, RECORDS)})


class CutFollower:
    """One reader's view of a warehouse it looks at again and again (a dashboard, a freshness
    probe): the tables it has opened stay open and are brought up to date incrementally, so a look
    reads the log entries added since the last one, not the whole log again. On an object store
    that is the difference between a few requests and dozens: a fresh ``latest_cut`` took 100 ms
    on moto's S3 server, and a probe polling it every 20 ms doubled the writer's micro-batch there."""

    def __init__(self, warehouse: str):
        self.warehouse = warehouse.rstrip("/")
        self._tables: dict[str, DeltaTable] = {}

    def _current(self, table: str) -> DeltaTable:
        dt = self._tables.get(table)
        if dt is None:
            dt = self._tables[table] = _open(self.warehouse, table)
        else:
            dt.update_incremental()
        return dt

    def latest(self) -> Cut:
        """The newest cut now (CutError if there is none yet)."""
        return _newest_cut(self._current(SNAPSHOTS), self.warehouse)

    def open(self, name: str, version: Optional[int] = None) -> DeltaTable:
        """Table ``name`` at ``version`` (the newest if None); the object is this follower's, moved
        by its next call."""
        dt = self._current(name)
        if version is not None and dt.version() != version:
            dt.load_as_version(version)
        return dt

    def table(self, name: str, cut: Cut) -> pa.Table:
        """Table ``name`` as of ``cut``, read whole."""
        return read_table(self.open(name, cut.versions[name]))

    def changes(self, name: str, since: Cut, cut: Cut) -> pa.Table:
        """What state table ``name`` gained and lost after ``since`` through ``cut``: its Change Data
        Feed over the versions between the two, as its columns and ``_change_type`` (insert, delete,
        or which side of an update), so a reader that follows reads only those commits' files."""
        first, last = since.versions[name] + 1, cut.versions[name]
        schema = SCHEMAS[name].append(pa.field("_change_type", pa.string()))
        if last < first:
            return schema.empty_table()
        feed = self._current(name).load_cdf(starting_version=first, ending_version=last).read_all()
        return plain_types(pa.table(feed)).select(schema.names)


def plain_types(t: pa.Table) -> pa.Table:
    """delta-rs's change feed comes in Arrow's view types, which pyarrow cannot sort: the plain ones."""
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return t.cast(pa.schema([f.with_type(plain.get(f.type, f.type)) for f in t.schema]))


def parse_time(text: str) -> datetime.datetime:
    """An ISO 8601 time (``2026-11-28T02:00:00Z``; without a zone: UTC), as a person names a point
    of the history; CutError in one line otherwise."""
    try:
        t = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CutError(f"time {text!r} is not an ISO 8601 time (e.g. 2026-11-28T02:00:00Z)") from None
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def tables_at(warehouse: str, cut: Optional[Cut]) -> dict[str, DeltaTable]:
    """Every table at the cut's versions (the newest versions without a cut). ``audit``, which a
    warehouse written before the audit trail lacks, is left out where it is not there."""
    out = {}
    for table in ALL_TABLES:
        version = None if cut is None or table not in cut.versions else cut.versions[table]
        try:
            out[table] = _open(warehouse, table, version)
        except CutError:
            if table != AUDIT:
                raise
    return out
