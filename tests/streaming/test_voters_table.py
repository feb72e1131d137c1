"""The ``voters`` table (DESIGN §11): the quorum's voter set at every cut, from the log's control
records (a static quorum's LeaderChange voters, a dynamic quorum's KRAFT_VOTERS, a snapshot's first
batch), through restarts, and added to a warehouse an older sparkraft wrote. Without Spark: the
materialiser is fed the streaming source's rows; the tables are read back with pyarrow and DataFusion."""
from __future__ import annotations

import pyarrow as pa
from test_materializer import as_batch, busy_controller, log_rows, table_rows

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import IMAGE_TABLES, SCHEMAS, SNAPSHOTS, VOTERS
from delta_tables.sql import query_datafusion
from delta_tables.writer import DeltaRsWriter
from quorum.log import control_records
from quorum.log.api import OffsetAndEpoch
from quorum.log.voter_set import ZERO_UUID, Endpoint, ReplicaKey, Voter, VoterSet, raft_state_records
from quorum.snapshot.checkpoint import write_checkpoint
from streaming.materializer import Materializer
from streaming.source import record_row, snapshot_row

D1, D2, D3 = "kx3ZaHNxQ1-7s2m9dE5PFw", "Vb0oTq7cRXOxEnQ0dcbCdA", "3nJH7Fq9Sga2WdTj9mW8hQ"


def voter(i: int, directory: str) -> Voter:
    return Voter(ReplicaKey(i, directory), (Endpoint("CONTROLLER", "127.0.0.1", 9092 + i),))


def control_row(offset: int, raw: bytes) -> tuple:
    return record_row(offset, 1, 0, raw, True)


def voters_at(warehouse, cut=None) -> list[dict]:
    """The voters table (last_offset kept) through pyarrow, by node id."""
    rows = read_table(tables_at(str(warehouse), cut)[VOTERS]).to_pylist()
    return sorted(rows, key=lambda r: r["node_id"])


def row_of(v: Voter, last_offset: int) -> dict:
    return {"node_id": v.key.id, "directory_id": v.key.directory_id,
            "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in v.endpoints],
            "last_offset": last_offset}


def test_static_voters_then_voter_records_each_cut_holds_the_set_of_its_offset(tmp_path):
    c = busy_controller()  # one static voter, node 1: its LeaderChange names it
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    m.process(as_batch(rows))
    static_cut = latest_cut(str(tmp_path))
    leader_change = next(r[0] for r in rows if r[3] == "LEADER_CHANGE")
    assert voters_at(tmp_path) == [{"node_id": 1, "directory_id": ZERO_UUID, "endpoints": [],
                                    "last_offset": leader_change}]

    # the quorum turns dynamic: KRAFT_VERSION 1 and the set {1, 2}; then 1 leaves and 3 joins
    n = len(rows)
    first = VoterSet([voter(1, D1), voter(2, D2)])
    m.process(as_batch([control_row(n, control_records.kraft_version(1)), control_row(n + 1, first.encode())]))
    grown_cut = latest_cut(str(tmp_path))
    second = first.without_voter(ReplicaKey(1, D1)).with_voter(voter(3, D3))
    m.process(as_batch([control_row(n + 2, first.without_voter(ReplicaKey(1, D1)).encode()),
                        control_row(n + 3, second.encode())]))
    # a new epoch's LeaderChange no longer speaks for the voters once the log holds a voter set
    m.process(as_batch([control_row(n + 4, control_records.leader_change(2, [2, 3, 7], [2, 3]))]))

    assert voters_at(tmp_path) == [row_of(second[2], n + 1), row_of(second[3], n + 3)]  # 2 untouched since n+1
    assert voters_at(tmp_path, grown_cut) == [row_of(first[1], n + 1), row_of(first[2], n + 1)]
    assert [r["node_id"] for r in voters_at(tmp_path, static_cut)] == [1]  # time travel by cut
    sql = 'SELECT node_id, directory_id FROM voters ORDER BY node_id'
    assert query_datafusion(str(tmp_path), sql, as_of_offset=n + 1).to_pylist() == [
        {"node_id": 1, "directory_id": D1}, {"node_id": 2, "directory_id": D2}]

    # a restarted materialiser rebuilds the set from `records` and carries on from it
    again = Materializer(DeltaRsWriter(tmp_path))
    again.process(as_batch([control_row(n + 4, control_records.leader_change(2, [2, 3], [2, 3]))]))  # replayed
    third = second.without_voter(ReplicaKey(3, D3))
    again.process(as_batch([control_row(n + 5, third.encode())]))
    assert voters_at(tmp_path) == [row_of(third[2], n + 1)]
    assert latest_cut(str(tmp_path)).offset == n + 5


def test_a_snapshot_row_brings_the_voter_set_its_first_batch_carries(tmp_path):
    c = busy_controller()
    end = c.end_offset
    voters = VoterSet([voter(1, D1), voter(2, D2), voter(3, D3)])
    path = tmp_path / "snapshot.checkpoint"
    write_checkpoint(path, c.core.image, {"end_offset": end, "epoch": 1},
                     raft_state_records(voters, kraft_version=1))
    wh = tmp_path / "wh"
    m = Materializer(DeltaRsWriter(wh))
    m.process(as_batch([snapshot_row(OffsetAndEpoch(end, 1), path.read_bytes()),
                        control_row(end, control_records.leader_change(1, [1, 2, 3], [1, 2]))]))
    assert voters_at(wh) == [row_of(voters[i], end - 1) for i in (1, 2, 3)]

    # a static quorum's snapshot carries no voters: the set stays as the LeaderChange records said
    static = tmp_path / "static.checkpoint"
    write_checkpoint(static, c.core.image, {"end_offset": end, "epoch": 1})
    wh2 = tmp_path / "wh2"
    m2 = Materializer(DeltaRsWriter(wh2))
    m2.process(as_batch([snapshot_row(OffsetAndEpoch(end, 1), static.read_bytes()),
                         control_row(end, control_records.leader_change(1, [1, 2, 3], [1, 2]))]))
    assert [(r["node_id"], r["directory_id"]) for r in voters_at(wh2)] == [(i, ZERO_UUID) for i in (1, 2, 3)]


def test_a_warehouse_from_before_the_voters_table_gains_it_without_rewriting_the_others(tmp_path, monkeypatch):
    import delta_tables.writer as writer_module
    import streaming.materializer as materializer_module

    c = busy_controller()
    rows = log_rows(c)
    # the warehouse as the version before wrote it: no voters table, no snapshots.voters_version
    old_schemas = {t: s for t, s in SCHEMAS.items() if t != VOTERS}
    old_schemas[SNAPSHOTS] = SCHEMAS[SNAPSHOTS].remove(SCHEMAS[SNAPSHOTS].get_field_index("voters_version"))
    with monkeypatch.context() as old:
        old.setattr(writer_module, "SCHEMAS", old_schemas)
        old.setattr(writer_module, "STATE_TABLES", IMAGE_TABLES)
        old.setattr(materializer_module, "STATE_TABLES", IMAGE_TABLES)
        Materializer(DeltaRsWriter(tmp_path)).process(as_batch(rows[:-3]))
    assert not (tmp_path / VOTERS).exists()
    old_cut = latest_cut(str(tmp_path))
    before = {t: DeltaRsWriter(tmp_path).table(t).version() for t in IMAGE_TABLES}

    m = Materializer(DeltaRsWriter(tmp_path))  # the new version starts on it
    assert m.touched.keys.get(VOTERS) and not any(m.touched.keys.get(t) for t in IMAGE_TABLES)
    m.process(as_batch(rows[-3:]))
    writer = DeltaRsWriter(tmp_path)
    assert all(writer.table(t).version() <= before[t] + 1 for t in IMAGE_TABLES)  # at most the new records
    assert [r["node_id"] for r in voters_at(tmp_path)] == [1]
    snapshots = read_table(writer.table(SNAPSHOTS))
    assert "voters_version" in snapshots.schema.names
    # the old cuts still read, their voters table empty (it did not exist), the tables as they were
    assert latest_cut(str(tmp_path), old_cut.offset).versions[VOTERS] == 0
    assert voters_at(tmp_path, old_cut) == []
    assert table_rows(tmp_path, "topics", old_cut) == table_rows(tmp_path, "topics", latest_cut(str(tmp_path)))


def test_the_voters_schema_is_the_contracts():
    schema = SCHEMAS[VOTERS]
    assert schema.names[:4] == ["node_id", "directory_id", "endpoints", "last_offset"]
    assert schema.field("node_id").type == pa.int32() and schema.field("last_offset").type == pa.int64()
    assert schema.field("endpoints").type.value_type.names == ["name", "host", "port"]
    assert "voters_version" in SCHEMAS[SNAPSHOTS].names
