"""What the console's pages show, read from a warehouse at a consistent cut.

Every page is a function of one cut (delta_tables/cut.py): the tables at the versions its
``snapshots`` row names. A table at a version never changes, so each one read is kept (a few, least
recently used first out) and the per-partition health derived from it too: at 200,000 partitions a
page is then a filter and a slice of Arrow arrays in memory, not a read of the table. The newest cut
is found through a :class:`~delta_tables.cut.CutFollower`, which reads only the log entries added
since it last looked.

Bad input (an offset before the first cut or past the newest, a time with no cut, an unknown topic
or broker) raises :class:`ConsoleError`, whose message the page shows; nothing is changed by it.
"""
from __future__ import annotations

import datetime
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional

import pyarrow as pa
import pyarrow.compute as pc

from console import derived
from console.derived import CLUSTER, GrowingTable, bisect_right
from console.marks import with_marks
from console.versions import FEED_COLUMNS, derive, key_column
from delta_tables import audit, revert
from delta_tables.bootstrap import image_from_cut
from delta_tables.cut import Cut, CutError, CutFollower, cut_of_row, plain_types, scan
from delta_tables.cut import parse_time as cut_time
from delta_tables.schemas import AUDIT, BROKERS, CONFIGS, KEYS, PARTITIONS, RECORDS, SCHEMAS, SNAPSHOTS, TOPICS

log = logging.getLogger(__name__)

PAGE_SIZE = 50  # rows of a paged table (topics, a topic's partitions, a broker's leaderships)
TABLES_KEPT = 48  # tables at a version and what is derived from them, kept; the newest cut's tables stay
NEWEST_MAX_AGE_S = 0.1  # a page's several looks at the newest cut share one
HEALTH = ("offline", "under_replicated", "under_min_isr")  # the health columns, and the filters by them
SORTED_WHOLE_MAX = 200_000  # more matching partitions than this: only those up to the page are ordered


class ConsoleError(ValueError):
    """Input the console cannot answer (shown on the page; the server is unaffected)."""


class NotFound(ConsoleError):
    """A topic, broker or record the cut does not hold (a 404 page)."""


@dataclass(frozen=True)
class Page:
    """One page of a table: its rows, where they start, and how many matched in all."""
    rows: list[dict]
    start: int
    total: int

    @property
    def next_start(self) -> Optional[int]:
        return self.start + len(self.rows) if self.start + len(self.rows) < self.total else None

    @property
    def previous_start(self) -> Optional[int]:
        return max(0, self.start - PAGE_SIZE) if self.start > 0 else None


def page_of(table: pa.Table, start: int, size: int = PAGE_SIZE) -> Page:
    if start < 0:
        raise ConsoleError(f"a page cannot start at {start}")
    return Page(table.slice(start, size).to_pylist(), start, table.num_rows)


def parse_offset(text: str, what: str = "offset", most: int = 2**63 - 1) -> int:
    """A non-negative number up to ``most`` (an offset's int64; an id's int32), else ConsoleError."""
    try:
        value = int(text)
    except ValueError:
        raise ConsoleError(f"{what} {text[:40]!r} is not a number") from None
    if value < 0:
        raise ConsoleError(f"{what} {value} is negative" + (": offsets start at 0" if what == "offset" else ""))
    if value > most:
        raise ConsoleError(f"{what} {text[:40]} is past {most:,}, the largest there is")
    return value


def parse_time(text: str) -> datetime.datetime:
    """An ISO 8601 time (delta_tables/cut.py), refused as the console refuses bad input."""
    try:
        return cut_time(text)
    except CutError as e:
        raise ConsoleError(str(e)) from None


class Warehouse:
    """One warehouse as the console reads it: the newest cut, any older one, and each table at a cut.

    Thread-safe: the web server asks from its thread pool, and delta-rs's table objects are not
    safe to move (to a version, or forward) from two threads at once."""

    def __init__(self, uri: str):
        self.uri = uri.rstrip("/")
        self._follower = CutFollower(self.uri)
        self._lock = threading.RLock()
        self._kept: OrderedDict[tuple, object] = OrderedDict()
        self._records = GrowingTable(("offset", "append_time", "type", "data"), with_marks)
        self._snapshots = GrowingTable(tuple(SCHEMAS[SNAPSHOTS].names), lambda t: t)
        self._newest: Optional[tuple[float, Cut]] = None
        self.derived = 0  # tables derived through the change feed rather than read (tests, the bench)

    # cuts ---------------------------------------------------------------------------------------

    def newest(self, max_age_s: float = NEWEST_MAX_AGE_S) -> Cut:
        """The newest cut, as looked up at most ``max_age_s`` ago (a page asks several times)."""
        with self._lock:
            now = time.monotonic()
            if self._newest is not None and now - self._newest[0] <= max_age_s:
                return self._newest[1]
            cuts = self.cuts(fresh=True)
            if cuts.num_rows == 0:
                raise ConsoleError(f"no consistent cut in {self.uri}: the materialiser has not written one yet")
            cut = cut_of_row(cuts.slice(cuts.num_rows - 1).to_pylist()[0])
            self._newest = (now, cut)
            return cut

    def cuts(self, fresh: bool = False) -> pa.Table:
        """Every cut's ``snapshots`` row, by offset (the slider's stops; each names its tables' versions).
        The table only grows: a look reads what was added since the last (``fresh``), or nothing."""
        with self._lock:
            if fresh or self._snapshots.table is None:
                try:
                    self._snapshots.through(self._follower.open(SNAPSHOTS))
                except CutError as e:
                    raise ConsoleError(str(e)) from None
            return self._snapshots.table

    def resolve(self, at: Optional[str] = None, time: Optional[str] = None) -> Cut:
        """The cut a page shows: the newest, or the newest at or below offset ``at``, or the newest
        holding what was committed by ``time``."""
        if at not in (None, "") and time not in (None, ""):
            raise ConsoleError("give an offset or a time, not both")
        newest = self.newest()
        if time not in (None, ""):
            return self.cut_at_time(parse_time(time))
        if at in (None, ""):
            return newest
        offset = parse_offset(at)
        if offset > newest.offset:
            raise ConsoleError(f"offset {offset} is past the newest cut (offset {newest.offset}): the log's "
                               f"records after it are not in the tables yet")
        return self._cut_at_or_below(offset)

    def _cut_at_or_below(self, offset: int) -> Cut:
        cuts = self.cuts()
        below = bisect_right(cuts.column("offset"), offset)
        if below == 0:
            raise ConsoleError(f"no consistent cut at or below offset {offset} in {self.uri}; the oldest is at "
                               f"offset {cuts.column('offset')[0].as_py()}")
        return cut_of_row(cuts.slice(below - 1, 1).to_pylist()[0])

    def cut_at_time(self, t: datetime.datetime) -> Cut:
        """The cut holding every record appended at or before ``t`` (and nothing after)."""
        records = self.records_index()
        before = records.filter(pc.less_equal(records.column("append_time"), pa.scalar(t, pa.timestamp("ms", "UTC"))))
        if before.num_rows == 0:
            first = pc.min(records.column("append_time")).as_py()
            raise ConsoleError(f"no cut at {t.isoformat()}: the log's first record is from "
                               f"{first.isoformat() if first else 'no time (the log is empty)'}")
        return self._cut_at_or_below(pc.max(before.column("offset")).as_py())

    # tables -------------------------------------------------------------------------------------

    def _kept_or(self, key: tuple, make: Callable[[], object]):
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
            value = make()
            self._kept[key] = value
            if len(self._kept) > TABLES_KEPT:
                pinned = self._newest[1].versions if self._newest is not None else {}
                for old in [k for k in self._kept if not (k[0] == "table" and pinned.get(k[1]) == k[2])
                            and k != key][:len(self._kept) - TABLES_KEPT]:
                    del self._kept[old]  # the least recently used first; the newest cut's tables stay
            return value

    def _at(self, name: str, version: Optional[int]):
        return self._follower.open(name, version)

    def table(self, cut: Cut, name: str, columns: Optional[tuple[str, ...]] = None) -> pa.Table:
        """State table ``name`` as of ``cut``."""
        if name == RECORDS:
            raise ValueError("the records table is read through records_index() and records_at()")
        version = cut.versions[name]
        return self._kept_or(("table", name, version, columns), lambda: self._derive_or_read(name, version, columns))[0]

    def _derive_or_read(self, name: str, version: int, columns: Optional[tuple[str, ...]]) -> list:
        """``[table, its key column or None]``."""
        """The table at ``version`` from the nearest version kept, through the change feed between
        (console/versions.py); read whole when none is kept or the feed cannot be read."""
        kept = [(abs(k[2] - version), k[2]) for k in list(self._kept)
                if k[0] == "table" and k[1] == name and k[3] == columns]
        if kept and name in KEYS:
            _, base_version = min(kept)
            base = self._kept[("table", name, base_version, columns)]
            low, high = sorted((base_version, version))
            try:
                with self._lock:
                    dt = self._at(name, None)
                    wanted = list(columns) + list(FEED_COLUMNS) if columns else None
                    feed = plain_types(pa.table(dt.load_cdf(starting_version=low + 1, ending_version=high,
                                                            columns=wanted).read_all()))
                if base[1] is None:  # kept for the next derivation from this base too
                    base[1] = key_column(base[0], KEYS[name])
                table, key = derive(base[0], feed, KEYS[name], version > base_version, base[1])
                self.derived += 1
                return [table, key]
            except Exception as e:  # a vacuumed or feed-less version: read it instead
                log.info("reading %s at version %d whole (its change feed from %d: %s)", name, version, base_version, e)
        return [self._read(name, version, columns), None]

    def _read(self, name: str, version: int, columns: Optional[tuple[str, ...]]) -> pa.Table:
        with self._lock:
            dt = self._at(name, version)
            try:
                return scan(dt, columns)  # one chunk: every later filter pays for each chunk
            except Exception as e:  # a type the cast back cannot take: pyarrow's reader, as before
                log.info("reading %s at version %d with pyarrow (%s)", name, version, e)
                table = dt.to_pyarrow_dataset().to_table(columns=list(columns) if columns else None, use_threads=False)
        return table.combine_chunks()

    def audit_through(self, cut: Cut) -> pa.Table:
        """The audit entries at offsets through ``cut`` (none in a warehouse older than the audit trail)."""
        with self._lock:
            try:
                table = self._at(AUDIT, None).to_pyarrow_dataset().to_table(
                    filter=pc.field("offset") <= cut.offset, use_threads=False)
            except CutError:
                return SCHEMAS[AUDIT].empty_table()
        return table

    def records_index(self, cut: Optional[Cut] = None) -> pa.Table:
        """``offset``, ``append_time``, ``type`` and the marks (console/marks.py) of every record through ``cut`` (the newest
        cut's if None), by offset. The table only grows (a compaction rewrites files, which is
        read again in full), so each look reads the files added since the last one."""
        with self._lock:
            newest = self.newest()
            index = self._records.through(self._at(RECORDS, newest.versions[RECORDS]))
        if cut is None or cut.offset >= newest.offset:
            return index
        return index.slice(0, bisect_right(index.column("offset"), cut.offset))

    def records_at(self, offsets: list[int], columns=("offset", "epoch", "append_time", "type", "data")) -> pa.Table:
        """The records at ``offsets`` (their files found by offset statistics, not scanned whole)."""
        if not offsets:
            return pa.schema([SCHEMAS[RECORDS].field(c) for c in columns]).empty_table()
        with self._lock:
            dt = self._at(RECORDS, self.newest().versions[RECORDS])
            wanted = pc.field("offset").isin(offsets) & (pc.field("offset") >= min(offsets)) & (
                pc.field("offset") <= max(offsets))
            return dt.to_pyarrow_dataset().to_table(columns=list(columns), filter=wanted,
                                                    use_threads=False).sort_by("offset")

    def created_at(self, cut: Cut) -> Optional[datetime.datetime]:
        cuts = self.cuts()
        hit = cuts.filter(pc.equal(cuts.column("offset"), cut.offset))
        return hit.column("created_at")[0].as_py() if hit.num_rows else None

    # derived, per cut ---------------------------------------------------------------------------

    def health(self, cut: Cut) -> pa.Table:
        """The partitions table with ``offline``, ``under_replicated`` and ``under_min_isr`` columns
        (min.insync.replicas: the topic's, else the cluster-wide default, else 1), in no order."""
        key = ("health", cut.versions[PARTITIONS], cut.versions[CONFIGS])
        return self._kept_or(key, lambda: derived.health(self.table(cut, PARTITIONS), self.table(cut, CONFIGS)))

    def topic_summary(self, cut: Cut) -> pa.Table:
        """One row per topic: name, id, partitions, and how many are offline, under-replicated,
        under min ISR; by name."""
        key = ("topic_summary", cut.versions[PARTITIONS], cut.versions[CONFIGS], cut.versions[TOPICS])
        return self._kept_or(key, lambda: derived.topic_summary(self.table(cut, TOPICS), self.health(cut)))

    def per_broker(self, cut: Cut) -> dict[int, tuple[int, int]]:
        """Broker id -> (partitions it leads, replicas it holds)."""
        def count() -> dict[int, tuple[int, int]]:
            parts = self.table(cut, PARTITIONS)
            leads = derived.counts(parts.column("leader"))
            holds = derived.counts(pc.list_flatten(parts.column("replicas")))
            return {b: (leads.get(b, 0), holds.get(b, 0)) for b in set(leads) | set(holds) if b >= 0}
        return self._kept_or(("per_broker", cut.versions[PARTITIONS]), count)


def endpoints_text(endpoints) -> str:
    return ", ".join(f"{e['name']}://{e['host']}:{e['port']}" for e in endpoints or ())


def broker_state(row: dict) -> str:
    if row["fenced"]:
        return "fenced"
    return "controlled shutdown" if row["in_controlled_shutdown"] else "active"


def features(wh: Warehouse, cut: Cut) -> dict[str, int]:
    """Each feature's finalized level as of the cut (its newest FeatureLevelRecord); read again only
    when the cut holds a FeatureLevelRecord not read before."""
    index = wh.records_index(cut)
    offsets = tuple(index.filter(pc.equal(index.column("type"), "FEATURE_LEVEL_RECORD")).column("offset").to_pylist())
    return wh._kept_or(("features", offsets), lambda: _features(wh, offsets))


def _features(wh: Warehouse, offsets: tuple[int, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for data in wh.records_at(list(offsets), ("offset", "data")).column("data").to_pylist():
        d = json.loads(data)
        if d.get("feature_level", 0):
            out[d["name"]] = d["feature_level"]
        else:
            out.pop(d["name"], None)  # level 0: the feature is turned off
    return out


def overview(wh: Warehouse, cut: Cut) -> dict:
    health = wh.health(cut)
    brokers = sorted(wh.table(cut, BROKERS).to_pylist(), key=lambda r: r["broker_id"])
    per_broker = wh.per_broker(cut)
    newest = wh.newest()
    created = wh.created_at(newest)
    age = (datetime.datetime.now(datetime.timezone.utc) - created).total_seconds() if created else None
    return {
        "topics": wh.table(cut, TOPICS).num_rows,
        "partitions": health.num_rows,
        "offline": pc.sum(health.column("offline")).as_py() or 0,
        "under_replicated": pc.sum(health.column("under_replicated")).as_py() or 0,
        "under_min_isr": pc.sum(health.column("under_min_isr")).as_py() or 0,
        "brokers": [{**b, "state": broker_state(b), "endpoints_text": endpoints_text(b["endpoints"]),
                     "leaders": per_broker.get(b["broker_id"], (0, 0))[0],
                     "replicas": per_broker.get(b["broker_id"], (0, 0))[1]} for b in brokers],
        "states": {s: sum(1 for b in brokers if broker_state(b) == s)
                   for s in ("active", "fenced", "controlled shutdown")},
        "features": features(wh, cut),
        "newest_offset": newest.offset,
        "newest_age_s": age,
    }


def topics_page(wh: Warehouse, cut: Cut, search: str = "", start: int = 0, only: str = "") -> Page:
    """Topics whose name contains ``search`` (any case); ``only``: those with offline,
    under_replicated or under_min_isr partitions."""
    summary = wh.topic_summary(cut)
    if search:
        summary = summary.filter(pc.match_substring(summary.column("name"), search, ignore_case=True))
    if only:
        if only not in HEALTH:
            raise ConsoleError(f"no such filter {only!r}: {', '.join(HEALTH)}")
        summary = summary.filter(pc.greater(summary.column(only), 0))
    return page_of(summary, start)


def partitions_page(wh: Warehouse, cut: Cut, search: str = "", leader: str = "", only: str = "",
                    start: int = 0) -> Page:
    """Partitions of the topics whose name contains ``search`` (any case), led by broker ``leader``,
    and only the offline, under-replicated or under-min-ISR ones if ``only`` says so; by topic
    and partition. At millions of rows only the rows up to the page are ordered (a top-k), not all."""
    rows = wh.health(cut)
    if search:
        rows = rows.filter(pc.match_substring(rows.column("topic_name"), search, ignore_case=True))
    if leader not in (None, ""):
        led_by = parse_offset(leader, "leader", 2**31 - 1) if leader != "-1" else -1
        rows = rows.filter(pc.equal(rows.column("leader"), led_by))
    if only:
        if only not in HEALTH:
            raise ConsoleError(f"no such filter {only!r}: {', '.join(HEALTH)}")
        rows = rows.filter(rows.column(only))
    if start < 0:
        raise ConsoleError(f"a page cannot start at {start}")
    order = [("topic_name", "ascending"), ("partition", "ascending")]
    if rows.num_rows > SORTED_WHOLE_MAX:
        first = rows.take(pc.select_k_unstable(rows, k=min(start + PAGE_SIZE, rows.num_rows), sort_keys=order))
        shown = first.sort_by(order).slice(start, PAGE_SIZE)
    else:
        shown = rows.sort_by(order).slice(start, PAGE_SIZE)
    return Page(shown.drop_columns(["bucket"]).to_pylist(), start, rows.num_rows)


def _the_row(table: pa.Table, column: str, value, what: str, cut: Cut) -> dict:
    """The row of ``table`` whose ``column`` is ``value``; ConsoleError ("no ...") if there is none."""
    hit = table.filter(pc.equal(table.column(column), value)).slice(0, 1).to_pylist()
    if not hit:
        raise NotFound(f"no {what} at offset {cut.offset}")
    return hit[0]


HISTORY_SHOWN = 50  # a topic page's newest audit entries


def topic(wh: Warehouse, cut: Cut, name: str, start: int = 0) -> dict:
    """A topic at the cut: its partitions, configs, and who changed it (its audit entries, newest first)."""
    row = _the_row(wh.table(cut, TOPICS), "name", name, f"topic {name!r}", cut)
    health = wh.health(cut)
    parts = health.filter(pc.equal(health.column("topic_id"), row["topic_id"])).sort_by("partition")
    configs = wh.table(cut, CONFIGS)
    own = configs.filter(pc.and_(pc.equal(configs.column("resource_type"), "TOPIC"),
                                 pc.equal(configs.column("resource_name"), name))).sort_by("name").to_pylist()
    cluster = configs.filter(pc.and_(pc.equal(configs.column("resource_type"), "BROKER"),
                                     pc.equal(configs.column("resource_name"), CLUSTER))).sort_by("name").to_pylist()
    entries = wh.audit_through(cut)
    history = audit.naming(entries, (f"TOPIC:{name}", f"TOPIC_ID:{row['topic_id']}")).to_pylist()[::-1]
    return {
        "topic": row,
        "last_changed_by": audit.Trail(entries).wrote(row["last_offset"]),
        "history": history[:HISTORY_SHOWN],
        "history_total": len(history),
        "partitions": page_of(parts.drop_columns(["bucket"]), start),
        "configs": [{**c, "source": "topic"} for c in own] + [{**c, "source": "cluster default"} for c in cluster],
        "offline": pc.sum(parts.column("offline")).as_py() or 0,
        "under_replicated": pc.sum(parts.column("under_replicated")).as_py() or 0,
    }


def brokers(wh: Warehouse, cut: Cut) -> dict:
    """Every broker with its leaderships and replicas, and the same by rack (the picture's data)."""
    view = overview(wh, cut)
    racks: dict[str, list[int]] = {}
    for b in view["brokers"]:
        rack = b["rack"] or "(no rack)"
        totals = racks.setdefault(rack, [0, 0, 0])
        totals[0] += 1
        totals[1] += b["leaders"]
        totals[2] += b["replicas"]
    return {"brokers": view["brokers"],
            "racks": [{"rack": r, "brokers": t[0], "leaders": t[1], "replicas": t[2]} for r, t in sorted(racks.items())]}


def broker(wh: Warehouse, cut: Cut, broker_id: str, start: int = 0) -> dict:
    bid = parse_offset(broker_id, "broker id", 2**31 - 1)
    b = _the_row(wh.table(cut, BROKERS), "broker_id", bid, f"broker {bid}", cut)
    health = wh.health(cut)
    led = health.filter(pc.equal(health.column("leader"), bid)).sort_by([("topic_name", "ascending"),
                                                                          ("partition", "ascending")])
    leads, holds = wh.per_broker(cut).get(bid, (0, 0))
    return {"broker": {**b, "state": broker_state(b), "endpoints_text": endpoints_text(b["endpoints"])},
            "leaders": leads, "replicas": holds, "led": page_of(led.drop_columns(["bucket"]), start)}


def records_page(wh: Warehouse, cut: Cut, first: Optional[str], last: Optional[str], start: int = 0,
                 record_type: str = "") -> dict:
    """The log's records with offsets ``first`` through ``last`` (both optional), as of the cut."""
    index = wh.records_index(cut)
    if first not in (None, ""):
        index = index.filter(pc.greater_equal(index.column("offset"), parse_offset(first)))
    if last not in (None, ""):
        index = index.filter(pc.less_equal(index.column("offset"), parse_offset(last)))
    if record_type:
        index = index.filter(pc.equal(index.column("type"), record_type))
    shown = page_of(index.select(["offset"]), start)
    rows = wh.records_at([r["offset"] for r in shown.rows]).to_pylist()
    return {"records": Page(rows, shown.start, shown.total)}


def audit_page(wh: Warehouse, cut: Cut, principal: str = "", resource: str = "", outcome: str = "",
               since: str = "", start: int = 0) -> dict:
    """Who changed what through the cut (delta_tables/audit.py), oldest first, filtered."""
    when = parse_time(since) if since else None
    if outcome not in ("", "done", "denied", "refused"):
        raise ConsoleError(f"not an outcome: {outcome!r} (done, denied or refused)")
    found = audit.filtered(wh.audit_through(cut), when, principal or None, resource or None, outcome or None)
    return {"entries": page_of(found.drop_columns(["hash"]), start)}


def record(wh: Warehouse, offset: str) -> dict:
    o = parse_offset(offset)
    newest = wh.newest()
    hit = wh.records_at([o]).to_pylist()
    if not hit:
        raise NotFound(f"no record at offset {o}: the tables hold offsets through {newest.offset}")
    r = hit[0]
    return {**r, "pretty": json.dumps(json.loads(r["data"]), indent=2, sort_keys=True)}


def revert_plan(wh: Warehouse, cut: Cut) -> dict:
    """What ``sparkraft revert --to-offset`` would do to bring the cluster from the newest cut back
    to ``cut`` (delta_tables/revert.py): the console shows the plan, it applies nothing."""
    newest = wh.newest()
    target_image, _ = image_from_cut(wh.uri, cut)
    newest_image = target_image if newest.offset == cut.offset else image_from_cut(wh.uri, newest)[0]
    return {"plan": revert.plan(newest_image, target_image, revert.DOMAINS, newest.offset, cut.offset),
            "warehouse": wh.uri}
