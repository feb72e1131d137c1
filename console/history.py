"""The console's time travel: the metadata log over time, and what changed between two cuts.

The timeline counts the log's records by type in time buckets, with elections, fencings and
reassignments marked: what each record is comes from its ``records`` row, read once per file of
that table (console/model.py), and the marks from its JSON, matched as text in Arrow (vectorised),
not parsed record by record.

A diff is the state tables' change feed between the two cuts (delta_tables/changes.py), named the
way an operator says it: topics created and deleted, leaders moved, ISRs shrunk and expanded,
replicas reassigned, brokers registered, fenced and unfenced, configs set, changed and deleted.
Updates are paired (before, after) by joining the feed's pre- and post-images, so a diff of a
million elections is a few Arrow joins and only the rows shown become Python objects. Each change
links to its record: an insert's or update's by the row's ``last_offset`` (the record that last
wrote it), a delete's to the records of its commit.
"""
from __future__ import annotations

import json
from bisect import bisect_left
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

from console.marks import MARKS
from console.model import ConsoleError, Warehouse
from delta_tables.audit import Trail
from delta_tables.changes import changes
from delta_tables.cut import Cut, CutError
from delta_tables.schemas import BROKERS, CONFIGS, KEYS, PARTITIONS, TOPICS

BUCKETS = 120
SHOWN = 500  # changes listed per diff (the counts cover all of them)

def timeline(wh: Warehouse, buckets: int = BUCKETS) -> dict:
    """Counts of records by type per time bucket, the marks per bucket, and each bucket's last offset."""
    index = wh.records_index()
    if index.num_rows == 0:
        return {"starts_ms": [], "by_type": {}, "marks": {}, "last_offsets": [], "width_ms": 0}
    ms = pc.cast(pc.cast(index.column("append_time"), pa.timestamp("ms")), pa.int64())
    low, high = pc.min(ms).as_py(), pc.max(ms).as_py()
    width = max(1, -(-(high - low + 1) // buckets))
    bucket = pc.divide(pc.subtract(ms, low), width)
    grouped = pa.table({"bucket": bucket, "type": index.column("type"), "offset": index.column("offset"),
                        **{m: pc.cast(index.column(m), pa.int64()) for m in MARKS}})
    used = sorted(set(grouped.column("bucket").to_pylist()))
    position = {b: i for i, b in enumerate(used)}
    by_type: dict[str, list[int]] = {}
    for row in grouped.group_by(["bucket", "type"]).aggregate([("offset", "count")]).to_pylist():
        by_type.setdefault(row["type"], [0] * len(used))[position[row["bucket"]]] = row["offset_count"]
    per_bucket = grouped.group_by("bucket").aggregate([("offset", "max"), *((m, "sum") for m in MARKS)]).sort_by("bucket")
    last_offsets = per_bucket.column("offset_max").to_pylist()
    return {
        "starts_ms": [low + b * width for b in used],
        "width_ms": width,
        "by_type": dict(sorted(by_type.items())),
        "marks": {m: per_bucket.column(f"{m}_sum").to_pylist() for m in MARKS},
        "last_offsets": last_offsets,
        "who": _who_per_bucket(wh, last_offsets),
    }


def _who_per_bucket(wh: Warehouse, last_offsets: list[int]) -> list[str]:
    """Who made the changes of each bucket (its offsets up to its last): the principals of the
    audit entries that wrote records there, the busiest first ("User:alice ×3, Broker:1")."""
    entries = wh.audit_through(wh.newest())
    if not entries.num_rows or not last_offsets:
        return [""] * len(last_offsets)
    done = entries.filter(pc.greater(entries.column("record_count"), 0))
    counts: list[dict[str, int]] = [{} for _ in last_offsets]
    for offset, principal in zip(done.column("offset").to_pylist(), done.column("principal").to_pylist()):
        i = bisect_left(last_offsets, offset)
        if i < len(counts):
            counts[i][principal] = counts[i].get(principal, 0) + 1
    return [", ".join(f"{p} ×{n}" if n > 1 else p for p, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
            for c in counts]


def _pairs(feed: pa.Table, table: str) -> pa.Table:
    """A state table's updates as one row each: its key, ``_commit_offset``, and each column before
    (``<column>_before``) and after."""
    keys = [*KEYS[table], "_commit_offset"]
    before = feed.filter(pc.equal(feed.column("_change_type"), "update_preimage")).drop_columns(["_change_type"])
    after = feed.filter(pc.equal(feed.column("_change_type"), "update_postimage")).drop_columns(["_change_type"])
    # joined by row numbers: Arrow's join carries no list columns (replicas, isr)
    rows = pa.table({**{k: after.column(k) for k in keys}, "_after": pa.array(range(after.num_rows), pa.int64())}).join(
        pa.table({**{k: before.column(k) for k in keys}, "_before": pa.array(range(before.num_rows), pa.int64())}),
        keys, join_type="inner")
    paired, was = after.take(rows.column("_after")), before.take(rows.column("_before"))
    for name in was.column_names:
        if name not in keys:
            paired = paired.append_column(f"{name}_before", was.column(name))
    return paired


def _kind(rows: pa.Table, kind: str, mask) -> pa.Table:
    chosen = rows.filter(mask)
    return chosen.append_column("kind", pa.array([kind] * chosen.num_rows, pa.string()))


def _as_text(ids: pa.ChunkedArray) -> pa.ChunkedArray:
    """A list of broker ids as comparable text ("1,2,3"): Arrow compares no lists."""
    return pc.binary_join(pc.cast(ids, pa.list_(pa.string())), ",")


def _partition_changes(feed: pa.Table, created_topics: set[str]) -> list[pa.Table]:
    out = []
    pairs = _pairs(feed, PARTITIONS)
    if pairs.num_rows:
        isr, isr_before = pc.list_value_length(pairs.column("isr")), pc.list_value_length(pairs.column("isr_before"))
        leader_moved = pc.not_equal(pairs.column("leader"), pairs.column("leader_before"))
        out.append(_kind(pairs, "leader moved", leader_moved))
        out.append(_kind(pairs, "ISR shrunk", pc.less(isr, isr_before)))
        out.append(_kind(pairs, "ISR expanded", pc.greater(isr, isr_before)))
        out.append(_kind(pairs, "replicas reassigned", pc.not_equal(_as_text(pairs.column("replicas")),
                                                                     _as_text(pairs.column("replicas_before")))))
    inserts = feed.filter(pc.equal(feed.column("_change_type"), "insert"))
    if inserts.num_rows and created_topics:
        inserts = inserts.filter(pc.invert(pc.is_in(inserts.column("topic_id"), pa.array(sorted(created_topics)))))
    out.append(_kind(inserts, "partition added", pc.is_valid(inserts.column("partition"))))
    return out


def _simple(feed: pa.Table, names: dict[str, str]) -> list[pa.Table]:
    """Inserts, deletes and updates of a table named by ``names`` (change type -> what to call it)."""
    return [_kind(feed, what, pc.equal(feed.column("_change_type"), change)) for change, what in names.items()]


def _broker_changes(feed: pa.Table) -> list[pa.Table]:
    out = _simple(feed, {"insert": "broker registered", "delete": "broker unregistered"})
    pairs = _pairs(feed, BROKERS)
    if pairs.num_rows:
        fenced, was = pairs.column("fenced"), pairs.column("fenced_before")
        out.append(_kind(pairs, "broker fenced", pc.and_(fenced, pc.invert(was))))
        out.append(_kind(pairs, "broker unfenced", pc.and_(pc.invert(fenced), was)))
        shutdown, was = pairs.column("in_controlled_shutdown"), pairs.column("in_controlled_shutdown_before")
        out.append(_kind(pairs, "broker in controlled shutdown", pc.and_(shutdown, pc.invert(was))))
        out.append(_kind(pairs, "broker re-registered", pc.not_equal(pairs.column("broker_epoch"),
                                                                      pairs.column("broker_epoch_before"))))
    return out


def _describe(table: str, kind: str, r: dict) -> str:
    if table == TOPICS:
        return r["name"]
    if table == PARTITIONS:
        where = f"{r['topic_name']}-{r['partition']}"
        if kind == "leader moved":
            return f"{where}: leader {r['leader_before']} → {r['leader']}"
        if kind.startswith("ISR"):
            return f"{where}: ISR {r['isr_before']} → {r['isr']}"
        if kind == "replicas reassigned":
            return f"{where}: replicas {r['replicas_before']} → {r['replicas']}"
        return f"{where}: replicas {r['replicas']}"
    if table == BROKERS:
        return f"broker {r['broker_id']}" + (f" (epoch {r['broker_epoch']})" if r.get("broker_epoch") is not None else "")
    if table == CONFIGS:
        resource = f"{r['resource_type'].lower()} {r['resource_name'] or '(cluster)'}"
        if kind == "config changed":
            return f"{resource}: {r['name']} {r['value_before']!r} → {r['value']!r}"
        if kind == "config deleted":
            return f"{resource}: {r['name']}"
        return f"{resource}: {r['name']} = {r['value']!r}"
    keys = ", ".join(f"{k}={r[k]}" for k in KEYS[table])
    return f"{table}: {keys}"


def diff(wh: Warehouse, a: Cut, b: Cut) -> dict:
    """What changed after cut ``a`` through cut ``b``: counts per kind, and the first SHOWN
    changes in log order, each with the offsets of the records it links to."""
    if a.offset > b.offset:
        a, b = b, a
    try:
        found = changes(wh.uri, a.offset, b.offset)
    except CutError as e:
        raise ConsoleError(str(e)) from None
    created = set(found[TOPICS].filter(pc.equal(found[TOPICS].column("_change_type"), "insert"))
                  .column("topic_id").to_pylist())
    groups: list[tuple[str, pa.Table]] = []
    for table, feed in found.items():
        if feed.num_rows == 0:
            continue
        if table == TOPICS:
            parts = _simple(feed, {"insert": "topic created", "delete": "topic deleted"})
        elif table == PARTITIONS:
            parts = _partition_changes(feed, created)
        elif table == BROKERS:
            parts = _broker_changes(feed)
        elif table == CONFIGS:
            parts = _simple(feed, {"insert": "config set", "delete": "config deleted"})
            pairs = _pairs(feed, CONFIGS)
            parts.append(_kind(pairs, "config changed", pc.not_equal(pairs.column("value"), pairs.column("value_before"))))
        else:
            parts = _simple(feed, {"insert": f"{table} added", "delete": f"{table} removed"})
            pairs = _pairs(feed, table)
            parts.append(_kind(pairs, f"{table} changed", pc.is_valid(pairs.column("_commit_offset"))))
        groups += [(table, p) for p in parts if p.num_rows]
    counts: dict[str, int] = {}
    for _, t in groups:
        counts[t.column("kind")[0].as_py()] = counts.get(t.column("kind")[0].as_py(), 0) + t.num_rows
    listed = []
    trail = Trail(wh.audit_through(b))
    for table, t in groups:
        for r in t.slice(0, SHOWN).to_pylist():
            kind = r["kind"]
            deleted = kind.endswith(("deleted", "unregistered", "removed"))
            by = trail.deleted(table, r, r["_commit_offset"]) if deleted else trail.wrote(r.get("last_offset"))
            listed.append({"kind": kind, "table": table, "what": _describe(table, kind, r), "by": by,
                           "commit_offset": r["_commit_offset"],
                           "record": None if deleted else r.get("last_offset"),
                           "topic": r.get("name") if table == TOPICS and not deleted else r.get("topic_name"),
                           "topic_id": r.get("topic_id")})
    _link_creations(wh, a, b, listed)
    listed.sort(key=lambda c: (c["commit_offset"], c["record"] if c["record"] is not None else -1))
    total = sum(counts.values())
    return {"from": a, "to": b, "counts": dict(sorted(counts.items())), "total": total, "changes": listed[:SHOWN],
            "previous_cut": _previous_cuts(wh, a, b)}


def _link_creations(wh: Warehouse, a: Cut, b: Cut, listed: list[dict]) -> None:
    """Link each created topic to its TopicRecord (a topic row's last writer is its last partition)."""
    created = {c["topic_id"]: c for c in listed if c["kind"] == "topic created"}
    if not created:
        return
    index = wh.records_index(b)
    offsets = index.filter(pc.and_(pc.equal(index.column("type"), "TOPIC_RECORD"),
                                   pc.greater(index.column("offset"), a.offset))).column("offset").to_pylist()
    for r in wh.records_at(offsets, ("offset", "data")).to_pylist():
        topic_id = json.loads(r["data"]).get("topic_id")
        if topic_id in created:
            created[topic_id]["record"] = r["offset"]


def _previous_cuts(wh: Warehouse, a: Cut, b: Cut) -> dict[int, int]:
    """Each cut after ``a`` through ``b`` -> the cut before it (a deleted row's records lie between)."""
    offsets = [o for o in wh.cuts().column("offset").to_pylist() if a.offset <= o <= b.offset]
    return {hi: lo for lo, hi in zip(offsets, offsets[1:])}


def resolve_pair(wh: Warehouse, first: Optional[str], second: Optional[str]) -> tuple[Cut, Cut]:
    if first in (None, "") or second in (None, ""):
        raise ConsoleError("a diff needs two offsets: from and to")
    return wh.resolve(first), wh.resolve(second)
