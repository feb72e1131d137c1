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

from functools import partial
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.cut import Cut, CutError, latest_cut, read_table, tables_at
from delta_tables.schemas import CONFIGS, PARTITIONS, RECORDS, STATE_TABLES, TOPICS
from delta_tables.writer import APP_ID
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.log.control_records import NAMES as CONTROL_NAMES
from quorum.metadata.configs import BROKER, TOPIC
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.records import REDACTED, RecordType, decode_record
from quorum.metadata.topics import PartitionRegistration, broker_list

# Record types replayed from `records` (no state table holds them).
REPLAYED = tuple(t.name for t in (
    RecordType.REGISTER_BROKER_RECORD, RecordType.UNREGISTER_BROKER_RECORD,
    RecordType.BROKER_REGISTRATION_CHANGE_RECORD, RecordType.FEATURE_LEVEL_RECORD,
    RecordType.CLIENT_QUOTA_RECORD, RecordType.PRODUCER_IDS_RECORD,
    RecordType.ACCESS_CONTROL_ENTRY_RECORD, RecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    RecordType.ZK_MIGRATION_STATE_RECORD, RecordType.REGISTER_CONTROLLER_RECORD,
    RecordType.UNREGISTER_CONTROLLER_RECORD))


def _broker_lists(column) -> list[tuple[int, ...]]:
    """Each row's broker id list as a shared tuple. A cluster has few distinct lists, so each row's
    list becomes a fixed-width key (its length, then its ids, padded) that Arrow dictionary-encodes
    in C; Python builds each distinct tuple once instead of a list and a tuple for each of millions
    of rows."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(column)
    if n == 0:
        return []
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy().astype(np.int64)
    width = int(lengths.max())
    if width == 0:  # usually so for the lists of replicas being moved
        return [()] * n
    ids = pc.list_flatten(column).to_numpy().astype(np.int32)  # a null list contributes nothing
    keys = np.zeros((n, width + 1), dtype=np.int32)
    keys[:, 0] = lengths
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)  # where each id's own list starts
    keys[np.repeat(np.arange(n), lengths), 1 + np.arange(len(ids)) - first] = ids
    encoded = pc.dictionary_encode(pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(4 * (width + 1)), n, [None, pa.py_buffer(keys.tobytes())]))
    distinct = np.frombuffer(b"".join(encoded.dictionary.to_pylist()), dtype=np.int32).reshape(-1, width + 1)
    shared = [broker_list(tuple(int(i) for i in row[1:1 + row[0]])) for row in distinct]
    return list(map(shared.__getitem__, encoded.indices.to_pylist()))


def _topic_runs(partitions: pa.Table) -> tuple[list[int], list[str], list[int]]:
    """(row order that groups rows by topic, each topic's id, where each topic's rows end in that
    order). Grouping needs no sort of the 36-character ids: Arrow dictionary-encodes them (hashing,
    in C) and a stable sort of the small integer codes does the rest."""
    encoded = pc.dictionary_encode(partitions.column("topic_id").combine_chunks())
    order = pc.sort_indices(encoded.indices)
    runs = pc.run_end_encode(encoded.indices.take(order))
    return order.to_pylist(), encoded.dictionary.take(runs.values).to_pylist(), runs.run_ends.to_pylist()


def _directories(partitions: pa.Table) -> list[tuple[str, ...]]:
    """Each row's log directories (none in a warehouse of a sparkraft from before them)."""
    if "directories" not in partitions.column_names:
        return [()] * partitions.num_rows
    return [tuple(d) if d else () for d in partitions.column("directories").to_pylist()]


def _registrations(partitions: pa.Table) -> list[PartitionRegistration]:
    """Every row as a PartitionRegistration, built column-wise in C (map and zip, no Python loop)."""
    fields = [*(_broker_lists(partitions.column(c)) for c in ("replicas", "isr", "removing_replicas",
                                                             "adding_replicas")),
              *(partitions.column(c).to_pylist() for c in ("leader", "leader_epoch", "partition_epoch")),
              # a warehouse of an older sparkraft has no ELR columns: its rows read as null there
              *(_broker_lists(partitions.column(c)) if c in partitions.column_names else [()] * partitions.num_rows
                for c in ("elr", "last_known_elr")),
              _directories(partitions)]
    # PartitionRegistration is a NamedTuple: tuple.__new__ skips its Python-level __new__.
    return list(map(partial(tuple.__new__, PartitionRegistration), zip(*fields)))


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
    partitions = read_table(tables[PARTITIONS])
    order, topic_ids, ends = _topic_runs(partitions)
    counts = {tid: end - start for tid, start, end in zip(topic_ids, [0, *ends], ends)}
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
    # Partitions, the bulk, go topic by topic straight into their topic's delta (no protobuf).
    topics_delta = delta.sub("topics")
    registrations = _registrations(partitions)
    pids = partitions.column("partition").to_pylist()
    registrations, pids = list(map(registrations.__getitem__, order)), list(map(pids.__getitem__, order))
    for tid, start, end in zip(topic_ids, [0, *ends], ends):
        into = topics_delta.topic_delta(tid).partitions
        into.update(zip(pids[start:end], registrations[start:end]))
        if len(into) != end - start:
            raise CutError(f"refused: topic {tid} has a partition id twice in partitions at the cut")
    for c in read_table(tables[CONFIGS]).to_pylist():
        if c["value"] == REDACTED:  # a password-type config, never materialised: not in the image
            continue
        kind = c["resource_type"]
        delta.replay(pb.ConfigRecord(resource_type=TOPIC if kind == "TOPIC" else BROKER,
                                     resource_name=c["resource_name"], name=c["name"], value=c["value"]))
    for raw in replayed.sort_by("offset").column("raw").to_pylist():
        delta.replay(decode_record(raw))
    audit = (pc.field("type") == RecordType.AUDIT_RECORD.name) & (pc.field("offset") <= cut.offset)
    audits = dataset.to_table(columns=["offset", "raw"], use_threads=False, filter=audit)  # the chain's head
    if audits.num_rows:
        delta.replay(decode_record(audits.sort_by([("offset", "descending")]).column("raw")[0].as_py()))
    return delta.apply(Provenance(last["offset"], last["epoch"])), cut.offset + 1
