"""The fleet's source without Spark: how ranges of many clusters become tasks, and the plan the
driver and the source share (streaming/fleet_source.py, streaming/fleet_plan.py)."""
from __future__ import annotations

import pickle

from streaming.fleet_plan import PlanEntry, read_plan, read_reach, write_plan, write_reach
from streaming.fleet_source import FleetStreamReader, Piece, pack
from streaming.quorum_access import QuorumOptions
from streaming.source import LogRange

QUORUM = QuorumOptions("127.0.0.1:1", "", None)


def _piece(name: str, start: int, end: int, first: bool = False) -> Piece:
    return Piece(name, QUORUM, LogRange(start, end, first))


def test_small_ranges_of_many_clusters_share_a_task_and_a_large_one_gets_its_own():
    pieces = [_piece(f"c{i}", 100, 110) for i in range(40)]  # a steady fleet: ten records each
    tasks = pack(pieces, 100_000)
    assert len(tasks) == 1 and [p.cluster for p in tasks[0].pieces] == [f"c{i}" for i in range(40)]
    big = [_piece("a", 0, 60_000), _piece("b", 0, 60_000), _piece("c", 5, 6)]
    assert [[p.cluster for p in t.pieces] for t in pack(big, 100_000)] == [["a"], ["b", "c"]]
    # a first range that may load a snapshot (of a size not known) does not share
    loads = [_piece("a", 0, 10), _piece("b", 0, 100_000, first=True), _piece("c", 0, 10)]
    assert [[p.cluster for p in t.pieces] for t in pack(loads, 100_000)] == [["a"], ["b"], ["c"]]
    assert pack([], 100_000) == []


def test_the_plan_and_the_reach_round_trip_and_hold_no_secret(tmp_path):
    plan = tmp_path / "plan.json"
    entries = [PlanEntry("east", "h:1", "sparkraft", "id-e", 42, "/etc/east.properties", 0.5, 5.0, 1000, 2, True)]
    write_plan(plan, entries)
    assert read_plan(plan) == {"east": entries[0]}
    assert read_reach(plan) == {}  # not written yet
    write_reach(plan, {"east": {"hw": 50, "error": None}})
    assert read_reach(plan) == {"east": {"hw": 50, "error": None}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "reach.json"]  # no part file left


def test_the_reader_spark_sends_to_workers_carries_no_threads_or_connections(tmp_path):
    """Spark pickles the stream reader for the workers' ``read``: the planner's pool and readers stay."""
    plan = tmp_path / "plan.json"
    write_plan(plan, [PlanEntry("east", "127.0.0.1:1", "sparkraft", "id", 0)])
    reader = FleetStreamReader({"fleet.plan": str(plan), "recordsPerPartition": "500"})
    reader._refresh()
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.plan == plan and copy.per_partition == 500 and not hasattr(copy, "pool")
    reader.stop()


def test_the_plan_written_from_several_threads_at_once_is_always_whole(tmp_path):
    """The driver's micro-batch and its tick publish the plan at once: each write replaces the
    file whole, none fails under another, and a reader between them sees one writer's plan."""
    import threading

    plan = tmp_path / "plan.json"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(200):
                write_plan(plan, [PlanEntry(f"c{n}", "127.0.0.1:9093", "sparkraft", "id", i)])
                assert len(read_plan(plan)) == 1
        except BaseException as e:  # noqa: BLE001 - reported below, with the thread's number
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert set(read_plan(plan)) <= {"c0", "c1", "c2", "c3"}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]  # no file left beside
