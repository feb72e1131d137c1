"""A metadata image from a consistent cut of the Delta tables: how a broker bootstraps (DESIGN §7).

The bulk of a large image (topics, partitions, configs) is read from the state tables at the cut's
versions; the rest (brokers, features, client quotas, producer ids, ACLs: a few records each) is
replayed from ``records`` up to the cut, in offset order. The result equals the controller's image
at the cut's offset, provenance included, and the broker then fetches from the next offset.

A cut whose tables disagree with its ``snapshots`` row (a table past the cut, ``records`` not ending
at it, a topic whose partition count does not match its partitions) is refused with CutError:
never a silently wrong image.
"""
from __future__ import annotations

from collections import Counter
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.cut import Cut, CutError, latest_cut, read_table, tables_at
from delta_tables.schemas import CONFIGS, PARTITIONS, RECORDS, STATE_TABLES, TOPICS
from delta_tables.writer import APP_ID
from quorum.metadata.configs import BROKER, TOPIC
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.topics import PartitionRegistration, broker_list
from quorum.metadata.records import RecordType, decode_record
from quorum.raft.control_records import NAMES as CONTROL_NAMES
from quorum.rpc.gen.sparkraft.v1 import metadata_pb2 as pb

# Record types replayed from `records` (no state table holds them).
REPLAYED = tuple(t.name for t in (
    RecordType.REGISTER_BROKER_RECORD, RecordType.UNREGISTER_BROKER_RECORD,
    RecordType.BROKER_REGISTRATION_CHANGE_RECORD, RecordType.FEATURE_LEVEL_RECORD,
    RecordType.CLIENT_QUOTA_RECORD, RecordType.PRODUCER_IDS_RECORD,
    RecordType.ACCESS_CONTROL_ENTRY_RECORD, RecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD))


def _broker_lists(column) -> list[tuple[int, ...]]:
    """Each row's broker id list as a shared tuple. A cluster has few distinct lists, so Arrow
    dictionary-encodes them (as text, in C) and Python builds each distinct tuple once, instead of
    a list and a tuple for each of millions of rows."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(column) == 0:
        return []
    if pc.sum(pc.list_value_length(column)).as_py() in (0, None):  # usually: nothing is moving
        return [()] * len(column)
    encoded = pc.dictionary_encode(pc.binary_join(pc.cast(column, pa.list_(pa.string())), ","))
    shared = [broker_list(tuple(map(int, text.split(","))) if text else ())
              for text in encoded.dictionary.to_pylist()]
    return [() if i is None else shared[i] for i in encoded.indices.to_pylist()]


def image_from_cut(warehouse: str, cut: Optional[Cut] = None) -> tuple[MetadataImage, int]:
    """(image at the cut, next log offset to fetch) for the newest cut, or ``cut``."""
    cut = cut or latest_cut(warehouse)
    tables = tables_at(warehouse, cut)
    for name in (*STATE_TABLES, RECORDS):
        applied = tables[name].transaction_version(APP_ID)
        if applied is not None and applied > cut.offset:
            raise CutError(f"refused: table {name} at version {cut.versions[name]} holds offset {applied}, "
                           f"past its cut at {cut.offset}")
    # `records` must hold offsets 0..cut once each: its transaction says it ends at the cut, and the
    # row counts in its file statistics (no data read) say how many it holds.
    if tables[RECORDS].transaction_version(APP_ID) != cut.offset:
        raise CutError(f"refused: records at version {cut.versions[RECORDS]} does not end at the cut's offset "
                       f"{cut.offset}")
    rows = sum(pa.table(tables[RECORDS].get_add_actions(flatten=True)).column("num_records").to_pylist())
    if rows != cut.offset + 1:
        raise CutError(f"refused: records at version {cut.versions[RECORDS]} holds {rows} rows, not offsets "
                       f"0..{cut.offset} once each")
    dataset = tables[RECORDS].to_pyarrow_dataset()
    controls = pa.array(list(CONTROL_NAMES.values()))
    replayed = dataset.to_table(columns=["offset", "epoch", "raw"], use_threads=False,
                                filter=pc.field("type").isin(pa.array(REPLAYED)))
    last = None  # the last metadata (non-control) record: the image's provenance
    window = 64
    while True:  # look back from the cut in growing windows (file statistics skip the rest)
        tail = dataset.to_table(columns=["offset", "epoch", "type"], use_threads=False,
                                filter=(pc.field("offset") > cut.offset - window) & ~pc.field("type").isin(controls))
        if tail.num_rows:
            last = tail.sort_by([("offset", "descending")]).slice(0, 1).to_pylist()[0]
            break
        if window > cut.offset:
            break
        window *= 8
    if last is None:
        return MetadataImage.EMPTY, cut.offset + 1

    topics = read_table(tables[TOPICS]).to_pylist()
    partitions = read_table(tables[PARTITIONS]).sort_by([("topic_id", "ascending"), ("partition", "ascending")])
    counts = Counter(partitions.column("topic_id").to_pylist())
    for t in topics:
        if counts.get(t["topic_id"], 0) != t["partition_count"]:
            raise CutError(f"refused: topic {t['name']} has partition_count {t['partition_count']} but "
                           f"{counts.get(t['topic_id'], 0)} rows in partitions at the cut")
    known = {t["topic_id"] for t in topics}
    if set(counts) - known:
        raise CutError(f"refused: partitions of unknown topics at the cut: {sorted(set(counts) - known)[:3]}")

    delta = MetadataDelta(MetadataImage.EMPTY)
    for t in topics:
        delta.replay(pb.TopicRecord(name=t["name"], topic_id=t["topic_id"]))
    # Partitions, the bulk, go column by column straight into their topic's delta (no protobuf).
    topics_delta = delta.sub("topics")
    columns = [partitions.column("topic_id").to_pylist(), partitions.column("partition").to_pylist(),
               *(_broker_lists(partitions.column(c)) for c in ("replicas", "isr", "removing_replicas",
                                                              "adding_replicas")),
               *(partitions.column(c).to_pylist() for c in ("leader", "leader_epoch", "partition_epoch"))]
    topic_id, into = None, None
    new = tuple.__new__  # PartitionRegistration is a NamedTuple: skip its Python-level __new__
    for tid, pid, replicas, isr, removing, adding, leader, leader_epoch, partition_epoch in zip(*columns):
        if tid != topic_id:
            topic_id, into = tid, topics_delta.topic_delta(tid).partitions
        into[pid] = new(PartitionRegistration, (replicas, isr, removing, adding, leader, leader_epoch,
                                                partition_epoch))
    for c in read_table(tables[CONFIGS]).to_pylist():
        kind = c["resource_type"]
        delta.replay(pb.ConfigRecord(resource_type=TOPIC if kind == "TOPIC" else BROKER,
                                     resource_name=c["resource_name"], name=c["name"], value=c["value"]))
    for raw in replayed.sort_by("offset").column("raw").to_pylist():
        delta.replay(decode_record(raw))
    return delta.apply(Provenance(last["offset"], last["epoch"])), cut.offset + 1
