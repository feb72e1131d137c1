"""The ``audit`` table: its rows from the log's AuditRecords (quorum/controller/audit.py), what the
CLI asks of it (who did what, filtered), and the check of its hash chain.

An entry's ``outcome``: ``done`` (error 0: its items may still have failed one by one, said by
``error_code`` of the first), ``denied`` (an authorization error) or ``refused`` (any other)."""
from __future__ import annotations

import datetime
from bisect import bisect_right
from typing import Callable, Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.schemas import ACLS, AUDIT, BROKERS, CONFIGS, PARTITIONS, SCHEMAS, TOPICS, USERS, VOTERS
from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.records import RecordType

TYPE = RecordType.AUDIT_RECORD.name
_DENIED = {e.value for e in Errors if e.name.endswith("AUTHORIZATION_FAILED")}


def outcome(error_code: int) -> str:
    return "done" if error_code == 0 else "denied" if error_code in _DENIED else "refused"


def rows(fresh: pa.Table) -> pa.Table:
    """The ``audit`` rows of the source's rows ``fresh`` (offset, epoch, type and the frame ``data``)."""
    chosen = fresh.filter(pc.equal(fresh.column("type"), TYPE)) if fresh.num_rows else fresh
    out = []
    for offset, epoch, frame in zip(*(chosen.column(c).to_pylist() for c in ("offset", "epoch", "data"))):
        e = pb.AuditRecord.FromString(frame[4:])
        if e.request:  # not a snapshot's carried chain head
            out.append(_row(offset, epoch, e))
    return pa.Table.from_pylist(out, schema=SCHEMAS[AUDIT])


def entries_table(entries) -> pa.Table:
    """The ``audit`` rows of (offset, AuditRecord bytes) pairs, as a controller's DescribeAudit
    gives them (no epoch: the log's batches are not sent)."""
    return pa.Table.from_pylist([_row(offset, None, pb.AuditRecord.FromString(body)) for offset, body in entries],
                                schema=SCHEMAS[AUDIT])


def _row(offset: int, epoch: Optional[int], e: pb.AuditRecord) -> dict:
    when = datetime.datetime.fromtimestamp(e.time_ms / 1000, datetime.timezone.utc)
    return {"offset": offset, "epoch": epoch, "time": when, "day": when.strftime("%Y-%m-%d"),
            "principal": e.principal, "client_host": e.client_host,
            "client_software_name": e.client_software_name or None,
            "client_software_version": e.client_software_version or None, "listener": e.listener or None,
            "request": e.request, "resources": list(e.resources), "changes": list(e.changes),
            "outcome": outcome(e.error_code), "error_code": e.error_code,
            "error_message": e.error_message or None, "first_offset": offset - e.record_count,
            "record_count": e.record_count, "forwarded_by": e.forwarded_by or None,
            "occurrences": e.occurrences or 1, "hash": e.hash}


def entry_of(row: dict) -> pb.AuditRecord:
    """The AuditRecord a row stands for (what its hash was computed over)."""
    return pb.AuditRecord(
        time_ms=int(row["time"].timestamp() * 1000), principal=row["principal"], client_host=row["client_host"],
        client_software_name=row["client_software_name"] or "", client_software_version=row["client_software_version"]
        or "", listener=row["listener"] or "", request=row["request"], resources=row["resources"] or [],
        changes=row["changes"] or [], error_code=row["error_code"], error_message=row["error_message"] or "",
        record_count=row["record_count"], forwarded_by=row["forwarded_by"] or "", occurrences=row["occurrences"],
        hash=row["hash"])


def in_order(table: pa.Table) -> Iterator[tuple[int, pb.AuditRecord]]:
    for row in table.sort_by("offset").to_pylist():
        yield row["offset"], entry_of(row)


def filtered(table: pa.Table, since: Optional[datetime.datetime] = None, principal: Optional[str] = None,
             resource: Optional[str] = None, outcome_is: Optional[str] = None) -> pa.Table:
    """The entries matching every filter given, oldest first."""
    if not table.num_rows:
        return table
    keep = pa.array([True] * table.num_rows)
    if since is not None:
        keep = pc.and_(keep, pc.greater_equal(table.column("time"), pa.scalar(since, pa.timestamp("ms", "UTC"))))
    if principal is not None:
        keep = pc.and_(keep, pc.equal(table.column("principal"), principal))
    if outcome_is is not None:
        keep = pc.and_(keep, pc.equal(table.column("outcome"), outcome_is))
    if resource is not None:
        keep = pc.and_(keep, _naming(table, (resource,)))
    return table.filter(keep).sort_by("offset")


def naming(table: pa.Table, resources: tuple[str, ...]) -> pa.Table:
    """The entries that name any of ``resources`` (``TOPIC:orders``...), oldest first."""
    return table.filter(_naming(table, resources)).sort_by("offset") if table.num_rows else table


def _naming(table: pa.Table, resources: tuple[str, ...]) -> pa.Array:
    wanted = set(resources)
    return pa.array([bool(wanted.intersection(r or ())) for r in table.column("resources").to_pylist()], pa.bool_())


# What an entry names of a state table's row (quorum/controller/audit.py's resources): how the entry
# that deleted a row is found, the row being gone from the tables.
_NAMED: dict[str, Callable[[dict], tuple[str, ...]]] = {
    TOPICS: lambda r: (f"TOPIC:{r['name']}", f"TOPIC_ID:{r['topic_id']}"),
    PARTITIONS: lambda r: (f"TOPIC:{r['topic_name']}", f"TOPIC_ID:{r['topic_id']}"),
    BROKERS: lambda r: (f"BROKER:{r['broker_id']}",),
    CONFIGS: lambda r: (f"{r['resource_type']}:{r['resource_name'] or ''}",),
    ACLS: lambda r: (f"{r['resource_type']}:{r['resource_name']}",),
    USERS: lambda r: (f"USER:{r['name']}",),
    VOTERS: lambda r: (f"CONTROLLER:{r['node_id']}",),
}


class Trail:
    """Who made each change of the state tables, from the ``audit`` table's entries: a row written
    (inserted or updated) by the principal of the entry whose records hold its ``last_offset`` (an
    entry's records are the offsets from its ``first_offset`` up to its own); a row deleted by that
    of the last entry before the change became visible (``_commit_offset``) that wrote records
    after the row's last writer and names its resource. None where no entry says (a change from
    before the audit trail, an Apache Kafka source's)."""

    def __init__(self, entries: pa.Table):
        done = entries.filter(pc.greater(entries.column("record_count"), 0)) if entries.num_rows else entries
        rows = done.select(["offset", "first_offset", "principal", "resources"]).sort_by("offset").to_pylist()
        self._ends = [e["offset"] for e in rows]
        self._rows = rows

    def wrote(self, offset: Optional[int]) -> Optional[str]:
        """The principal of the entry whose records hold ``offset``."""
        if offset is None:
            return None
        i = bisect_right(self._ends, offset)
        return self._rows[i]["principal"] if i < len(self._rows) and self._rows[i]["first_offset"] <= offset else None

    def deleted(self, table: str, row: dict, commit_offset: int) -> Optional[str]:
        """The principal who deleted ``row`` of ``table`` (its values before, as the change feed
        gives them) by the cut at ``commit_offset``."""
        named = set(_NAMED[table](row)) if table in _NAMED else set()
        after = row.get("last_offset")
        for e in reversed(self._rows[:bisect_right(self._ends, commit_offset)]):
            if after is not None and e["first_offset"] <= after:
                break
            if named.intersection(e["resources"] or ()):
                return e["principal"]
        return None

    def changed_by(self, table: str, change_type: str, row: dict) -> Optional[str]:
        """Who made one change of the change feed (None for an update's before-image: its
        after-image says)."""
        if change_type == "delete":
            return self.deleted(table, row, row["_commit_offset"])
        return None if change_type == "update_preimage" else self.wrote(row.get("last_offset"))
