"""The ``audit`` table: its rows from the log's AuditRecords (quorum/controller/audit.py), what the
CLI asks of it (who did what, filtered), and the check of its hash chain.

An entry's ``outcome``: ``done`` (error 0: its items may still have failed one by one, said by
``error_code`` of the first), ``denied`` (an authorization error) or ``refused`` (any other)."""
from __future__ import annotations

import datetime
from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.schemas import AUDIT, SCHEMAS
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
        if not e.request:  # a snapshot's carried chain head, not an entry
            continue
        when = datetime.datetime.fromtimestamp(e.time_ms / 1000, datetime.timezone.utc)
        out.append({"offset": offset, "epoch": epoch, "time": when, "day": when.strftime("%Y-%m-%d"),
                    "principal": e.principal, "client_host": e.client_host,
                    "client_software_name": e.client_software_name or None,
                    "client_software_version": e.client_software_version or None, "listener": e.listener or None,
                    "request": e.request, "resources": list(e.resources), "changes": list(e.changes),
                    "outcome": outcome(e.error_code), "error_code": e.error_code,
                    "error_message": e.error_message or None, "first_offset": offset - e.record_count,
                    "record_count": e.record_count, "forwarded_by": e.forwarded_by or None,
                    "occurrences": e.occurrences or 1, "hash": e.hash})
    return pa.Table.from_pylist(out, schema=SCHEMAS[AUDIT])


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
        keep = pc.and_(keep, pa.array([resource in (r or ()) for r in table.column("resources").to_pylist()]))
    return table.filter(keep).sort_by("offset")
