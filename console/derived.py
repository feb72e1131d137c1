"""What the console derives from a cut's tables: each partition's health (offline, under-replicated,
under its min ISR), each topic's summary, the counts behind the overview; and the tables that only
grow (records, snapshots), read once and then only their new files."""
from __future__ import annotations

import logging
from typing import Callable, Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.cut import plain_types

log = logging.getLogger("console.model")

CLUSTER = ""  # the configs table's resource name of a cluster-wide default


def bisect_right(sorted_ints: pa.ChunkedArray, value: int) -> int:
    """How many of ``sorted_ints`` are at most ``value``."""
    return int(pc.sum(pc.less_equal(sorted_ints, value)).as_py() or 0)


class GrowingTable:
    """Some columns of an append-only Delta table (``records``, ``snapshots``), by offset. Read whole
    once; then each new version's rows come from its change feed (an append-only table's feed is
    its added files' rows, read without listing the table's thousands of files again); a commit
    that only rewrote files (compaction) adds none. A feed that cannot be read: read whole again."""

    def __init__(self, columns: tuple[str, ...], derive: Callable[[pa.Table], pa.Table]):
        self.columns, self.derive = list(columns), derive
        self.version = -1
        self.table: Optional[pa.Table] = None
        self.table_schema: Optional[pa.Schema] = None
        self.whole_reads = self.fed = 0  # how each version was taken in (tests)

    def through(self, dt) -> pa.Table:
        if dt.version() == self.version and self.table is not None:
            return self.table
        if self.table is not None:
            try:
                feed = pa.table(dt.load_cdf(starting_version=self.version + 1, ending_version=dt.version(),
                                            columns=self.columns + ["_change_type"]).read_all())
                if set(feed.column("_change_type").to_pylist()) <= {"insert"}:
                    added = self.derive(plain_types(feed).select(self.columns).cast(
                        pa.schema([self.table_schema.field(c) for c in self.columns])))
                    self.table = pa.concat_tables([self.table, added]).sort_by("offset").combine_chunks()
                    self.version = dt.version()
                    self.fed += 1
                    return self.table
            except Exception as e:  # vacuumed, or no feed: read it whole
                log.info("reading %s whole again: %s", dt.table_uri, e)
        dataset = dt.to_pyarrow_dataset()
        self.table_schema = dataset.schema
        self.table = self.derive(dataset.to_table(columns=self.columns, use_threads=False)).sort_by("offset").combine_chunks()
        self.version = dt.version()
        self.whole_reads += 1
        return self.table


def counts(values: pa.ChunkedArray | pa.Array) -> dict[int, int]:
    counted = pc.value_counts(values)
    return dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist()))


def _min_isr(configs: pa.Table) -> tuple[int, dict[str, int]]:
    """The cluster-wide min.insync.replicas and each topic's own."""
    rows = configs.filter(pc.equal(configs.column("name"), "min.insync.replicas")).to_pylist()
    default, topics = 1, {}
    for r in rows:
        try:
            value = max(1, int(r["value"]))
        except (TypeError, ValueError):
            continue
        if r["resource_type"] == "BROKER" and r["resource_name"] == CLUSTER:
            default = value
        elif r["resource_type"] == "TOPIC":
            topics[r["resource_name"]] = value
    return default, topics


def health(partitions: pa.Table, configs: pa.Table) -> pa.Table:
    default, own = _min_isr(configs)
    isr_size = pc.list_value_length(partitions.column("isr"))
    if own:
        names = pa.array(list(own), pa.string())
        values = pa.array(list(own.values()), pa.int32())
        index = pc.index_in(partitions.column("topic_name"), value_set=names)
        min_isr = pc.fill_null(pc.take(values, index), default)
    else:
        min_isr = pa.scalar(default, pa.int32())
    return (partitions
            .append_column("offline", pc.equal(partitions.column("leader"), -1))
            .append_column("under_replicated", pc.less(isr_size, pc.list_value_length(partitions.column("replicas"))))
            .append_column("under_min_isr", pc.less(isr_size, min_isr)))


def topic_summary(topics: pa.Table, health: pa.Table) -> pa.Table:
    as_int = {c: pc.cast(health.column(c), pa.int64()) for c in ("offline", "under_replicated", "under_min_isr")}
    grouped = (pa.table({"topic_id": health.column("topic_id"), **as_int})
               .group_by("topic_id").aggregate([("offline", "sum"), ("under_replicated", "sum"),
                                                ("under_min_isr", "sum")]))
    joined = topics.select(["topic_id", "name", "partition_count"]).join(grouped, "topic_id", join_type="left outer")
    return pa.table({
        "name": joined.column("name"), "topic_id": joined.column("topic_id"),
        "partitions": joined.column("partition_count"),
        "offline": pc.fill_null(joined.column("offline_sum"), 0),
        "under_replicated": pc.fill_null(joined.column("under_replicated_sum"), 0),
        "under_min_isr": pc.fill_null(joined.column("under_min_isr_sum"), 0),
    }).sort_by("name")


# pages ------------------------------------------------------------------------------------------
