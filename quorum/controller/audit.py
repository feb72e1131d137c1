"""The audit trail: one AuditRecord per request the active controller handles that an operator
would ask about (who created, altered, deleted, granted; who was refused), written in the batch of
the records it explains (docs/use/audit.md).

Which requests: every admin request (a row whose ``needs`` is not a broker's or a controller's own),
allowed or refused; a broker's or a controller's own requests (registration, heartbeats that fence
or shut down, ISR changes, producer ids) and the controller's own decisions (fencing a silent
broker, leader balance) only when they change metadata, attributed to that broker or controller.
Reads are never audited.

What an entry holds of a request is what it named and asked to set, never a secret: SCRAM
credentials as the user and mechanism only, a password-type config's value as ``(sensitive)``.
Its hash chains on the image's audit head (quorum/metadata/audit.py), so the entries, read back in
offset order, verify as one chain (``verify``)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Optional

from quorum.controller.operation import Operation
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.configs import is_sensitive
from quorum.metadata.records import HEADER, RecordType

if TYPE_CHECKING:
    from quorum.controller.settings import ControllerSettings

SENSITIVE = "(sensitive)"
_AUDIT_TYPE = int(RecordType.AUDIT_RECORD).to_bytes(2, "big")


@dataclass(frozen=True, slots=True)
class AuditContext:
    """Who sent a request and how: the principal (``User:alice``; a forwarded request's client's),
    the client's address, Kafka's client software name and version where the protocol gave them,
    the listener, and the broker that forwarded it."""

    principal: str
    host: str = ""
    listener: str = ""
    software: tuple[str, str] = ("", "")
    forwarded_by: str = ""


MAX_NAME = 128  # a client's software name or version, a listener's name: what an entry keeps of each


def software_of(text: str) -> tuple[str, str]:
    """A forwarded client's software as the forwarding node names it ("name/version"), bounded."""
    name, _, version = text.partition("/")
    return name[:MAX_NAME], version[:MAX_NAME]


def audited(row, request, records: list, error: bool) -> bool:
    """Whether a request of registry row ``row`` gets an entry: admin requests always; a broker's or
    a controller's own only when it changed metadata (not every heartbeat); bookkeeping its row calls
    quiet (a reader's hold on the log, renewed as it reads) only when refused."""
    if row.audit is not None and row.audit.quiet(request):
        return error
    if row.needs.kind in ("broker", "controller"):
        return bool(records) and not error
    return True


class Of(NamedTuple):
    """What an entry says of a request (its registry row's ``audit``): the resources it named, as
    TYPE:NAME, and what it asked to set."""

    resources: Callable[[Any], list[str]]
    changes: Callable[[Any], list[str]] = lambda r: []
    quiet: Callable[[Any], bool] = lambda r: False  # bookkeeping, asked again and again: audited only when refused


def resources(row, request) -> list[str]:
    """What ``request`` named: its row's ``audit``, else the broker or controller it is about, else the cluster."""
    if row.audit is not None:
        return row.audit.resources(request)
    for field, kind in (("broker_id", "BROKER"), ("controller_id", "CONTROLLER")):
        if getattr(request, field, None) is not None:
            return [f"{kind}:{getattr(request, field)}"]
    return ["CLUSTER:"]


def changes(row, request) -> list[str]:
    return row.audit.changes(request) if row.audit is not None else []


def topics_created(r) -> list[str]:
    return [f"TOPIC:{t.name}" for t in r.topics]


def topics_deleted(r) -> list[str]:
    return [f"TOPIC:{n}" for n in r.names] + [f"TOPIC_ID:{i}" for i in r.topic_ids]


def topics_extended(r) -> list[str]:
    return [f"TOPIC:{u.name}" for u in r.updates]


def config_resources(r) -> list[str]:
    return [f"{key.type}:{key.name}" for key, _ in r.resources]


def acl_resources(bindings: Callable[[Any], Iterable]) -> Callable[[Any], list[str]]:
    return lambda r: [f"{b.resource_type}:{b.resource_name}" for b in bindings(r)]


def quota_entities(r) -> list[str]:
    return ["QUOTA:" + ",".join(f"{t}={n if n is not None else '<default>'}" for t, n in a.entity)
            for a in r.alterations]


def scram_users(r) -> list[str]:
    return sorted({f"USER:{c.name}" for c in (*r.deletions, *r.upsertions)})


def features(r) -> list[str]:
    return [f"FEATURE:{name}" for name, _ in r.updates]


def partitions(r) -> list[str]:
    chosen = getattr(r, "partitions", None)
    if chosen is None:
        return ["CLUSTER:"]
    return [f"PARTITION:{p.topic}-{p.partition}" if hasattr(p, "topic") else
            f"PARTITION:{p.partition.topic}-{p.partition.partition}" for p in chosen]


def config_changes(r) -> list[str]:
    return [_config(key.type, key.name, c.name, c.op, c.value) for key, ops in r.resources for c in ops]


def topic_settings(r) -> list[str]:
    return [_config("TOPIC", t.name, k, "SET", v) for t in r.topics for k, v in t.configs] + [
        f"{t.name}: partitions={t.num_partitions}, replication.factor={t.replication_factor}" for t in r.topics]


def acls_created(r) -> list[str]:
    return [_acl(b) for b in r.bindings]


def acls_deleted(r) -> list[str]:
    return ["delete " + _acl(b) for b in r.filters]


def scram_changes(r) -> list[str]:  # never the salt or the salted password
    return [f"set {c.name} {c.mechanism} iterations={c.iterations}" for c in r.upsertions] + [
        f"delete {c.name} {c.mechanism}" for c in r.deletions]


def quota_changes(r) -> list[str]:
    return [f"{k}={'(removed)' if v is None else v}" for a in r.alterations for k, v in a.ops]


def feature_changes(r) -> list[str]:
    return [f"{name}={level} ({r.upgrade_type})" for name, level in r.updates]


def partition_counts(r) -> list[str]:
    return [f"{u.name}: partitions={u.count}" for u in r.updates]


def _config(kind: str, resource: str, name: str, op: str, value: Optional[str]) -> str:
    shown = SENSITIVE if is_sensitive(name) and value is not None else value
    prefix = f"{kind}:{resource} " if kind != "TOPIC" or op != "SET" else ""
    return f"{prefix}{name}" + (f"={shown}" if op == "SET" else f" {op}" + (f" {shown}" if shown else ""))


def _acl(b) -> str:
    return (f"{b.permission_type} {b.principal} {b.operation} on {b.resource_type}:{b.resource_name} "
            f"({b.pattern_type}) from {b.host}")


def outcome(reply) -> tuple[int, str]:
    """The error code and message of a reply's refused items (the first; how many of how many)."""
    items = reply if isinstance(reply, (tuple, list)) else ()
    failed = [i for i in items if int(getattr(getattr(i, "error", None), "value", 0) or 0)]
    if not failed:
        return 0, ""
    first = failed[0]
    message = getattr(first, "message", "") or first.error.name
    return int(first.error.value), message if len(items) == 1 else f"{message} ({len(failed)} of {len(items)} refused)"


def request_name(row, request) -> str:
    """What an entry calls a request: Kafka's API name where it has one, else sparkraft's."""
    return row.kafka.name if row.kafka is not None else row.method or type(request).__name__


def entry(head: bytes, now_ms: int, request_name: str, context: AuditContext, names: Iterable[str],
          asked: Iterable[str], record_count: int, error_code: int = 0, error_message: str = "",
          occurrences: int = 1) -> pb.AuditRecord:
    """The entry, its hash chained on ``head`` (the previous entry's)."""
    record = pb.AuditRecord(time_ms=now_ms, principal=context.principal, client_host=context.host,
                            client_software_name=context.software[0], client_software_version=context.software[1],
                            listener=context.listener, request=request_name, resources=names,
                            changes=asked, error_code=error_code, error_message=error_message,
                            record_count=record_count, forwarded_by=context.forwarded_by, occurrences=occurrences)
    record.hash = chain(head, record)
    return record


def chain(head: bytes, record: pb.AuditRecord) -> bytes:
    """SHA-256 of the previous hash and the entry without its own hash (deterministic protobuf); an
    entry not hashed yet (``entry``'s) is serialized as it is, without a copy."""
    if not record.hash:
        return hashlib.sha256(head + record.SerializeToString(deterministic=True)).digest()
    body = pb.AuditRecord()
    body.CopyFrom(record)
    body.ClearField("hash")
    return hashlib.sha256(head + body.SerializeToString(deterministic=True)).digest()


def verify(entries: Iterable[tuple[int, pb.AuditRecord]], head: bytes = b"") -> Optional[str]:
    """None if ``entries`` ((offset, record) in offset order) form one chain from ``head``; else
    the first offset where it breaks, in a sentence."""
    for offset, record in entries:
        if not record.request:  # a snapshot's carried head: the chain goes on from it
            head = record.hash
            continue
        expected = chain(head, record)
        if expected != record.hash:
            return (f"the entry at offset {offset} does not chain on the one before it: it was changed, "
                    f"or an entry before it was removed")
        head = record.hash
    return None


def entries_in(batches, offset: int, end: int, limit: int) -> tuple[list[tuple[int, bytes]], int]:
    """The entries (offset, the AuditRecord's bytes) of ``batches`` (decoded log batches) from
    ``offset`` up to ``end``, at most ``limit``; and the offset after the last record looked at."""
    entries: list[tuple[int, bytes]] = []
    for batch in batches:
        for i, raw in enumerate(batch.records):
            at = batch.base_offset + i
            if at < offset or at >= end:
                continue
            if not batch.control and raw[:2] == _AUDIT_TYPE:
                body = bytes(raw[HEADER.size:])
                if pb.AuditRecord.FromString(body).request:  # not a snapshot's carried chain head
                    entries.append((at, body))
            offset = at + 1
            if len(entries) >= limit:
                return entries, offset
    return entries, offset


REFUSALS_SUMMARISED_S = 10.0  # refusals alike within this long after an entry are counted, not written


class Audits:
    """The active controller's audit trail, a role ControllerCore takes on. Needs ``_spec`` (the
    speculative image: the head to chain on), ``node_id`` and ``_emit``. Refusals alike (one
    principal and address, one request type, one error) within REFUSALS_SUMMARISED_S of an entry
    are counted and written as one entry with ``occurrences`` at the end of the interval (``tick``),
    so a client hammering the controllers with denied writes cannot fill the log."""

    _refusals: dict
    settings: "ControllerSettings"  # ``audit``: False writes no entry (metadata.audit.enable=false)

    def _head(self) -> bytes:
        return self._spec.audit.head

    def own_context(self, request=None) -> AuditContext:
        """Who a request without a sender is attributed to: the broker it is about for a broker's
        own (an in-process one), else this controller."""
        broker = getattr(request, "broker_id", None)
        return AuditContext(f"Broker:{broker}" if broker is not None else f"Controller:{self.node_id}")

    def with_audit(self, row, request, records: list, reply, now_ms: int, context: Optional[AuditContext]) -> list:
        """``records`` and, if the request is audited (``audited``), its entry after them; the
        outcome is the reply's (items refused, of a request that was not refused as a whole)."""
        if not self.settings.audit or getattr(request, "validate_only", False) or \
                not audited(row, request, records, False):
            return records
        return [*records, entry(self._head(), now_ms, request_name(row, request), context or self.own_context(request),
                                resources(row, request), changes(row, request), len(records), *outcome(reply))]

    def decided(self, records: list, now_ms: int, name: str, names: list[str]) -> list:
        """The controller's own decision (fencing a silent broker, a leader balance) with its entry."""
        return [*records, entry(self._head(), now_ms, name, self.own_context(), names, [], len(records))] \
            if records and self.settings.audit else records

    def refused(self, row, request, error, now_ms: int, context: Optional[AuditContext] = None) -> Operation:
        """A refusal of ``request`` (of registry row ``row``: the handler's, or the caller's
        authorization): its error, and its audit entry to propose, if it has one."""
        records = self.refusal_records(row, request, error, now_ms, context)
        op = self._emit(records, now_ms, None, type(request).__name__) if records else Operation()
        op.error, op.name = error, type(request).__name__
        return op

    def refusal_records(self, row, request, error, now_ms: int, context: Optional[AuditContext]) -> list:
        """The entry of a refused request, or none: not audited, or summarised (``refusal_summaries``)."""
        if row is None or getattr(request, "validate_only", False) or not audited(row, request, [], True):
            return []
        return self._refusal(context or self.own_context(request), request_name(row, request),
                             resources(row, request), changes(row, request), int(error.error.value),
                             error.message, now_ms)

    def reported_refusal(self, report, now_ms: int) -> list:
        """A refusal another controller answered itself (a RecordRefusalRequest): the same entry."""
        context = AuditContext(report.principal, report.host, report.listener[:MAX_NAME],
                               (report.software[0][:MAX_NAME], report.software[1][:MAX_NAME]), report.forwarded_by)
        return self._refusal(context, report.request, list(report.resources), list(report.changes),
                             report.error_code, report.error_message, now_ms)

    def _refusal(self, context: AuditContext, name: str, names: list[str], asked: list[str], code: int,
                 message: str, now_ms: int) -> list:
        if not self.settings.audit:
            return []
        key = (context.principal, context.host, name, code)
        seen = self._refusals.get(key)
        if seen is not None and now_ms - seen[0] < REFUSALS_SUMMARISED_S * 1000:
            seen[1] += 1
            seen[2] = (context, message)
            return []
        self._refusals[key] = [now_ms, 0, None]
        return [entry(self._head(), now_ms, name, context, names, asked, 0, code, message)]

    def refusal_summaries(self, now_ms: int) -> list:
        """Entries counting the refusals summarised over intervals now past."""
        out, head = [], self._head()
        for key, seen in list(self._refusals.items()):
            if now_ms - seen[0] < REFUSALS_SUMMARISED_S * 1000:
                continue
            del self._refusals[key]
            if seen[1]:
                context, message = seen[2]
                out.append(entry(head, now_ms, key[2], context, [], [], 0, key[3],
                                 f"{message} (and alike: {seen[1]} refusals since the last entry)", seen[1]))
                head = out[-1].hash
        return out
