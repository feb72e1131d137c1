"""What changed between two offsets, as rows: the state tables' Change Data Feed, cut by offsets.

The state tables are written with Delta's Change Data Feed on (``delta.enableChangeDataFeed``), so
each MERGE also records its inserts, deletes and the before and after of each update. The
materialiser commits each touched table once per micro-batch and then a ``snapshots`` row naming
the version of every table at that offset. So the changes after offset A through offset B are, in
each table, the commits after its version at the newest cut at or below A through its version at
the newest cut at or below B: the same two cuts for every table, hence consistent across them.

Each change row is the table's columns, ``_change_type`` (``insert``, ``update_preimage``,
``update_postimage``, ``delete``) and ``_commit_offset``: the offset of the cut the change became
visible at (a micro-batch's last offset; several records of one batch that change one row show as
one change). Table versions the maintenance job commits (compaction) carry no changes.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.audit import Trail
from delta_tables.cut import Cut, CutError, latest_cut, plain_types, read_table, tables_at
from delta_tables.schemas import AUDIT, SCHEMAS, SNAPSHOTS, STATE_TABLES
from delta_tables.writer import CDF_PROPERTY

CHANGE_COLUMNS = ("_change_type", "_commit_offset")
INTERNAL_COLUMNS = ("bucket",)  # layout, not metadata
# within one commit: a row's before, then its after; then what left, then what came
CHANGE_ORDER = ("update_preimage", "update_postimage", "delete", "insert")


def _cuts_between(warehouse: str, low: Cut, high: Cut) -> list[dict]:
    """The ``snapshots`` rows after ``low`` through ``high``, by offset."""
    rows = read_table(tables_at(warehouse, None)[SNAPSHOTS]).filter(
        (pc.field("offset") > low.offset) & (pc.field("offset") <= high.offset))
    return rows.sort_by("offset").to_pylist()


def table_changes(warehouse: str, table: str, from_offset: int, to_offset: int) -> pa.Table:
    """The changes to ``table`` after ``from_offset`` through ``to_offset`` (see the module docstring)."""
    return changes(warehouse, from_offset, to_offset, (table,))[table]


@dataclass(frozen=True)
class ChangeRange:
    """Where one table's changes between two cuts are: its commits ``first`` through ``last``
    (none when last < first), and the cut offset each of those commits became visible at."""
    table: str
    first: int
    last: int
    commit_offsets: dict[int, int]  # table version -> _commit_offset

    @property
    def columns(self) -> list[str]:
        """The change rows' columns: the table's own, then CHANGE_COLUMNS."""
        return [f.name for f in SCHEMAS[self.table] if f.name not in INTERNAL_COLUMNS] + list(CHANGE_COLUMNS)


def change_ranges(warehouse: str, from_offset: int, to_offset: int,
                  tables: Optional[tuple[str, ...]] = None) -> dict[str, ChangeRange]:
    """Each state table's (or each of ``tables``') ChangeRange after ``from_offset`` through
    ``to_offset``: the versions to read from its change feed, by whichever engine reads it."""
    tables = tables or STATE_TABLES
    unknown = [t for t in tables if t not in STATE_TABLES]
    if unknown:
        raise CutError(f"no change feed for {unknown[0]!r}: the state tables have one ({', '.join(STATE_TABLES)})")
    if from_offset > to_offset:
        raise CutError(f"--from-offset {from_offset} is past --to-offset {to_offset}")
    high = latest_cut(warehouse, to_offset)
    try:
        low = latest_cut(warehouse, from_offset)
    except CutError:  # before the first cut: from the tables' start
        low = Cut(-1, 0, {t: -1 for t in high.versions})
    cuts = _cuts_between(warehouse, low, high)
    out = {}
    for table in tables:
        first, last = low.versions[table] + 1, high.versions[table]
        versions = [c[f"{table}_version"] or 0 for c in cuts]  # non-decreasing, as cuts are
        offsets = [c["offset"] for c in cuts]
        out[table] = ChangeRange(table, first, last,
                                 {v: offsets[bisect.bisect_left(versions, v)] for v in range(first, last + 1)})
    return out


def feed_error(table: str, first: int, last: int, error: object) -> CutError:
    """A change feed without those versions: from before the feed was turned on (an older
    warehouse), or vacuumed."""
    return CutError(f"the change feed of {table} has no versions {first}..{last} (it starts where "
                    f"{CDF_PROPERTY} was turned on, and vacuumed versions are gone): {error}")


def changes(warehouse: str, from_offset: int, to_offset: int,
            tables: Optional[tuple[str, ...]] = None, who: bool = False) -> dict[str, pa.Table]:
    """Each state table's (or each of ``tables``') changes after ``from_offset`` through ``to_offset``,
    read with delta-rs. ``who``: with ``_changed_by``, the principal who made each change, from
    the ``audit`` table (delta_tables/audit.py, Trail)."""
    current = tables_at(warehouse, None)
    out = _changes(current, from_offset, to_offset, tables, warehouse)
    if not who:
        return out
    trail = Trail(current[AUDIT].to_pyarrow_dataset().to_table(filter=pc.field("offset") <= to_offset,
                                                                 use_threads=False)
                  if AUDIT in current else SCHEMAS[AUDIT].empty_table())
    for table, feed in out.items():
        by = [trail.changed_by(table, row["_change_type"], row) for row in feed.to_pylist()]
        out[table] = feed.append_column("_changed_by", pa.array(by, pa.string()))
    return out


def _changes(current: dict, from_offset: int, to_offset: int, tables: Optional[tuple[str, ...]],
             warehouse: str) -> dict[str, pa.Table]:
    out = {}
    for table, r in change_ranges(warehouse, from_offset, to_offset, tables).items():
        if r.last < r.first:
            out[table] = empty_changes(table, r.columns)
            continue
        try:
            feed = pa.table(current[table].load_cdf(starting_version=r.first, ending_version=r.last).read_all())
        except Exception as e:
            raise feed_error(table, r.first, r.last, e) from None
        feed = plain_types(feed)
        commit_offsets = pa.array([r.commit_offsets[v] for v in feed.column("_commit_version").to_pylist()],
                                  pa.int64())
        feed = feed.append_column("_commit_offset", commit_offsets)
        rank = pc.index_in(feed.column("_change_type"), pa.array(CHANGE_ORDER))
        order = pc.sort_indices(feed.append_column("_rank", rank),
                                [("_commit_offset", "ascending"), ("_rank", "ascending")])
        out[table] = feed.take(order).select(r.columns)
    return out


def empty_changes(table: str, columns: list[str]) -> pa.Table:
    own = [c for c in columns if c not in CHANGE_COLUMNS]
    schema = pa.schema([*(SCHEMAS[table].field(c) for c in own), pa.field("_change_type", pa.string()),
                        pa.field("_commit_offset", pa.int64())])
    return schema.empty_table()
