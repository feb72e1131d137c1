"""A dynamic controller quorum (KIP-853) with real processes and the real CLI: format one controller
--standalone, grow it to three with `quorum add-controller`, remove the active controller, replace a
voter's disk; writes keep committing and every acknowledged one is on every voter."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import free_ports, sparkraft_cmd, wait_for

pytestmark = pytest.mark.slow


def sparkraft(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=timeout)


def status(cp, timeout: float = 15) -> dict:
    """``quorum describe --status --json``; {} if no leader answered within ``timeout``."""
    result = sparkraft("quorum", "describe", "--status", "--json", "--timeout", str(timeout),
                       "--bootstrap-controller", cp.bootstrap())
    return json.loads(result.stdout) if result.returncode == 0 else {}


def voters(cp) -> dict[int, str]:
    return {v["id"]: v["directoryId"] for v in status(cp).get("CurrentVoters", ())}


def add(cp, i: int) -> None:
    result = sparkraft("quorum", "add-controller", "--config", str(cp.config(i)),
                       "--bootstrap-controller", cp.bootstrap())
    assert result.returncode == 0, result.stderr + cp.dump_outputs()
    assert f"Added controller {i}" in result.stdout


def restart_on_another_port(cp, i: int) -> None:
    """Stop controller ``i`` (cleanly), give its listener a free port and start it again."""
    assert cp.stop(i) == 0
    cp.ports[i] = free_ports(1)[0]
    lines = cp.config(i).read_text().splitlines()
    cp.config(i).write_text("\n".join(f"listeners=CONTROLLER://127.0.0.1:{cp.ports[i]}" if line.startswith("listeners=")
                                      else line for line in lines) + "\n")
    cp.start([i])


def remove(cp, i: int, directory_id: str) -> subprocess.CompletedProcess:
    return sparkraft("quorum", "remove-controller", "--controller-id", str(i), "--controller-directory-id",
                     directory_id, "--bootstrap-controller", cp.bootstrap())


def test_grow_from_one_remove_the_leader_and_replace_a_disk(controller_processes):
    cp = controller_processes(voters=(1, 2, 3), raft_only=True, dynamic=True)
    cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"], 3: ["--no-initial-controllers"]})
    cp.start()
    acked: list[tuple[int, int]] = []
    with cp.client(timeout=30) as c:
        def write(n: int) -> None:
            for k in range(n):
                acked.append(c.append([f"w{len(acked)}".encode()]))

        write(5)
        assert voters(cp) == {1: cp.directory_id(1)}
        wait_for(lambda: {o["id"] for o in status(cp).get("CurrentObservers", ())} >= {2, 3}, 30, "2 and 3 observing")
        add(cp, 2)
        write(5)
        add(cp, 3)
        write(5)
        current = status(cp)
        assert {v["id"]: v["directoryId"] for v in current["CurrentVoters"]} == {
            i: cp.directory_id(i) for i in (1, 2, 3)}
        assert all(v["endpoints"] == [f"CONTROLLER://127.0.0.1:{cp.ports[v['id']]}"] for v in current["CurrentVoters"])

        # refusals: one line with Kafka's error name, nothing changed
        follower = next(i for i in (1, 2, 3) if i != current["LeaderId"])
        for bootstrap in (cp.bootstrap(), cp.bootstrap([follower])):  # also after a redirect to the leader
            result = sparkraft("quorum", "add-controller", "--config", str(cp.config(2)),
                               "--bootstrap-controller", bootstrap)
            assert result.returncode == 1 and result.stderr.startswith("DUPLICATE_VOTER"), result.stderr
        result = remove(cp, 2, "AAAAAAAAAAAAAAAAAAAAAQ")
        assert result.returncode == 1 and result.stderr.startswith("VOTER_NOT_FOUND"), result.stderr
        assert len(voters(cp)) == 3

        # replace a disk (of a follower: two of three voters keep the quorum going): wipe it, format a
        # new replica, remove the old one, add the new
        victim = next(i for i in (1, 2, 3) if i != current["LeaderId"])
        old_dir = cp.directory_id(victim)
        cp.kill(victim)
        shutil.rmtree(cp.log_dir(victim))
        cp.format_dynamic({victim: ["--no-initial-controllers"]})
        assert cp.directory_id(victim) != old_dir
        cp.start([victim])
        assert remove(cp, victim, old_dir).returncode == 0
        wait_for(lambda: victim in {o["id"] for o in status(cp).get("CurrentObservers", ())}, 30,
                 "the new disk observing")
        add(cp, victim)
        write(5)
        assert voters(cp) == {v: cp.directory_id(v) for v in (1, 2, 3)}

        # remove the active controller: it leads until that commits, then hands over
        leader = status(cp)["LeaderId"]
        result = remove(cp, leader, cp.directory_id(leader))
        assert result.returncode == 0, result.stderr
        wait_for(lambda: status(cp, timeout=2).get("LeaderId") not in (leader, None), 30, "a new leader among the rest")
        write(5)
        rest = sorted({1, 2, 3} - {leader})
        assert voters(cp) == {v: cp.directory_id(v) for v in rest}

    # every acknowledged write is on every voter's disk, once the voters stop
    for i in rest:
        assert cp.stop(i) == 0
    from quorum.log.file_log import FileLog
    logs = {i: FileLog(cp.partition_dir(i)) for i in rest}
    try:
        for n, (base, last) in enumerate(acked):
            copies = {i: [r for b in log.batches(base, last + 1) for r in b.records
                          if base <= b.base_offset + b.records.index(r) <= last] for i, log in logs.items()}
            assert all(c == [f"w{n}".encode()] for c in copies.values()), (n, base, copies)
    finally:
        for log in logs.values():
            log.close()


def test_auto_join_makes_observers_voters_and_replaces_a_lost_disk(controller_processes):
    cp = controller_processes(voters=(1, 2, 3), raft_only=True, dynamic=True,
                              **{"controller.quorum.auto.join.enable": "true"})
    cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"], 3: ["--no-initial-controllers"]})
    cp.start()
    wait_for(lambda: voters(cp) == {i: cp.directory_id(i) for i in (1, 2, 3)}, 60, "2 and 3 to join by themselves")
    with cp.client(timeout=30) as c:
        c.append([b"before"])
    # node 3's disk is lost: formatted again and started, it removes its old replica and adds itself
    old = cp.directory_id(3)
    cp.kill(3)
    shutil.rmtree(cp.log_dir(3))
    cp.format_dynamic({3: ["--no-initial-controllers"]})
    cp.start([3])
    wait_for(lambda: voters(cp).get(3) == cp.directory_id(3) != old, 60, "the new disk of 3 to replace the old")
    assert sorted(voters(cp)) == [1, 2, 3]
    with cp.client(timeout=30) as c:
        c.append([b"after"])

    # 3 restarts on another port: it announces it (UpdateRaftVoter) and the voter set follows (while two
    # voters keep a leader: the others trust a voter's requests only from the endpoint they know for it)
    restart_on_another_port(cp, 3)
    wait_for(lambda: {v["id"]: v["endpoints"] for v in status(cp).get("CurrentVoters", ())}.get(3)
             == [f"CONTROLLER://127.0.0.1:{cp.ports[3]}"], 60, "3's new endpoint in the voter set")
    with cp.client(timeout=30) as c:
        c.append([b"moved"])

    # an operator's removal of a running auto-joined voter sticks (KIP-1186: at most once per run)
    assert remove(cp, 2, cp.directory_id(2)).returncode == 0
    with cp.client(timeout=30) as c:
        c.append([b"later"])
    assert sorted(voters(cp)) == [1, 3]


def test_the_voters_table_equals_quorum_describe_at_its_cut(controller_processes, tmp_path):
    """The streaming source's rows (read as the Spark job reads them, without Spark) into the
    materialiser: at each cut the voters table is what `quorum describe` said then."""
    import pyarrow as pa

    from delta_tables.cut import latest_cut, read_table, tables_at
    from delta_tables.writer import DeltaRsWriter
    from streaming.materializer import Materializer
    from streaming.source import ARROW_SCHEMA, LogRange, SparkraftStreamReader

    cp = controller_processes(voters=(1, 2), dynamic=True)
    cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"]})
    cp.start()
    wh = str(tmp_path / "wh")
    materializer = Materializer(DeltaRsWriter(wh))

    def catch_up() -> None:
        reader = SparkraftStreamReader({"bootstrap.controllers": cp.bootstrap()})
        try:
            end = reader.latestOffset({"offset": materializer.next_offset}, None)["offset"]
            batches = list(reader.read(LogRange(materializer.next_offset, end)))
        finally:
            reader.stop()
        materializer.process(pa.Table.from_batches(batches, schema=ARROW_SCHEMA))

    def table(cut) -> list[dict]:
        rows = read_table(tables_at(wh, cut)["voters"]).to_pylist()
        return sorted(({"id": r["node_id"], "directoryId": r["directory_id"],
                        "endpoints": [f"{e['name']}://{e['host']}:{e['port']}" for e in r["endpoints"]]}
                       for r in rows), key=lambda v: v["id"])

    wait_for(lambda: 2 in {o["id"] for o in status(cp).get("CurrentObservers", ())}, 30, "2 observing")
    alone = status(cp)["CurrentVoters"]
    catch_up()
    first = latest_cut(wh)
    assert table(first) == alone and [v["id"] for v in alone] == [1]
    add(cp, 2)
    both = status(cp)["CurrentVoters"]
    catch_up()
    second = latest_cut(wh)
    assert second.offset > first.offset
    assert table(second) == sorted(both, key=lambda v: v["id"]) and len(both) == 2
    assert table(first) == alone  # the earlier cut still reads as it was


def test_a_static_quorum_upgraded_to_kraft_version_1_takes_a_new_controller(controller_processes):
    """Three controllers of `controller.quorum.voters`, then `features upgrade --feature kraft.version=1`:
    the voters land in the log with their directory ids, and a fourth controller (configured with the
    bootstrap servers) is added; the static-config controllers follow the log's set from then on."""
    cp = controller_processes(voters=(1, 2, 3, 4))
    static = ",".join(f"{i}@127.0.0.1:{cp.ports[i]}" for i in (1, 2, 3))
    for i in (1, 2, 3, 4):
        lines = [line for line in cp.config(i).read_text().splitlines() if not line.startswith("controller.quorum.")]
        lines.append(f"controller.quorum.voters={static}" if i != 4
                     else f"controller.quorum.bootstrap.servers={cp.bootstrap((1, 2, 3))}")
        cp.config(i).write_text("\n".join(lines) + "\n")
    cp.format([1, 2, 3])
    cp.format_dynamic({4: ["--no-initial-controllers"]})
    cp.start([1, 2, 3])
    first = cp.wait_leader()
    assert sorted(v.replica_id for v in first.voters) == [1, 2, 3]

    def features(*flags: str) -> subprocess.CompletedProcess:
        return sparkraft("features", "upgrade", *flags, "--bootstrap-controller", cp.bootstrap((1, 2, 3)))

    def static_refusal() -> None:
        refused = sparkraft("quorum", "add-controller", "--config", str(cp.config(4)),
                            "--bootstrap-controller", cp.bootstrap((1, 2, 3)))
        assert refused.returncode == 1 and refused.stderr.startswith("UNSUPPORTED_VERSION"), refused.stderr

    static_refusal()
    result = features("--feature", "kraft.version=2")
    assert result.returncode == 1 and "Could not upgrade kraft.version to 2. INVALID_UPDATE_VERSION" in result.stdout
    wait_for(lambda: features("--feature", "kraft.version=1", "--dry-run").returncode == 0, 30,
             "every voter to have fetched with its directory id")
    static_refusal()  # a dry run changes nothing
    result = features("--feature", "kraft.version=1")
    assert result.returncode == 0 and "kraft.version was upgraded to 1." in result.stdout, result.stdout + result.stderr
    assert voters(cp) == {i: cp.directory_id(i) for i in (1, 2, 3)}
    result = features("--feature", "kraft.version=0")
    assert result.returncode == 1 and "cannot go back" in result.stdout

    cp.start([4])
    wait_for(lambda: 4 in {o["id"] for o in status(cp).get("CurrentObservers", ())}, 30, "4 observing")
    add(cp, 4)
    assert voters(cp) == {i: cp.directory_id(i) for i in (1, 2, 3, 4)}
    # the static-config controllers now reach 4 through the log's voter set: with the leader gone,
    # a majority of the four still elects one
    before = status(cp)
    cp.kill(before["LeaderId"])
    after = cp.wait_leader(timeout=30, exclude=(before["LeaderId"], None))
    assert sorted(v.replica_id for v in after.voters) == [1, 2, 3, 4]
    wait_for(lambda: status(cp).get("HighWatermark", -1) > before["HighWatermark"], 30,
             "the new leader to commit")


def test_grow_to_five_and_shrink_under_sigkill_and_sigstop_lose_no_acknowledged_write(controller_processes):
    """1 -> 5 -> 3 voters and the active controller's removal while a client writes without pause,
    each change between sets of three or more voters made while one random voter is SIGSTOPped or
    SIGKILLed (restarted after; the seed is in every message). Then every
    acknowledged write is on every voter's disk and their logs agree below the high watermark."""
    import random
    import signal
    import threading

    from quorum.errors import SparkraftError

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    cp = controller_processes(voters=(1, 2, 3, 4, 5), raft_only=True, dynamic=True)
    cp.format_dynamic({1: ["--standalone"], **{i: ["--no-initial-controllers"] for i in (2, 3, 4, 5)}})
    cp.start()
    acked: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def write() -> None:
        with cp.client(timeout=60) as c:
            n = 0
            while not stop.is_set():
                payload = f"w{n}".encode()
                n += 1
                try:
                    acked.append((c.append([payload])[0], payload))
                except SparkraftError:
                    pass  # not acknowledged: it may or may not be in the log

    writer = threading.Thread(target=write, name="writer", daemon=True)
    writer.start()

    def change_while_disturbed(change, spare=(), after: int = 0) -> None:
        """``change()`` with one voter (not in ``spare``) stopped or killed meanwhile, if at least three
        vote before and after it (``after`` voters): a majority of either set is then still up."""
        current = sorted(voters(cp))
        victims = [v for v in current if v not in spare]
        if min(len(current), after) < 3 or not victims:
            change()
            return
        victim, how = rng.choice(victims), rng.choice(["SIGSTOP", "SIGKILL"])
        cp.send(victim, signal.SIGSTOP) if how == "SIGSTOP" else cp.kill(victim)
        try:
            change()
        finally:
            cp.send(victim, signal.SIGCONT) if how == "SIGSTOP" else cp.start([victim])

    try:
        wait_for(lambda: len(acked) > 10, 60, f"writes committing (seed {seed})")
        for i in (2, 3, 4, 5):
            wait_for(lambda: i in {o["id"] for o in status(cp).get("CurrentObservers", ())}, 60, f"{i} observing")
            change_while_disturbed(lambda: add(cp, i), spare=(i,), after=i)
        assert sorted(voters(cp)) == [1, 2, 3, 4, 5], seed
        for i in (5, 4):
            change_while_disturbed(lambda: assert_ok(remove(cp, i, cp.directory_id(i))), spare=(i,), after=i - 1)
        assert sorted(voters(cp)) == [1, 2, 3], seed
        leader = status(cp)["LeaderId"]
        assert_ok(remove(cp, leader, cp.directory_id(leader)))  # to two voters: none may be down meanwhile
        wait_for(lambda: status(cp, timeout=2).get("LeaderId") not in (leader, None), 60, "a leader among the rest")
        count = len(acked)
        wait_for(lambda: len(acked) > count + 10, 60, f"writes committing again (seed {seed})")
    finally:
        stop.set()
        writer.join(90)
    rest = sorted(voters(cp))
    assert len(rest) == 2 and leader not in rest, seed
    high_watermark = status(cp)["HighWatermark"]
    for i in (1, 2, 3, 4, 5):
        if cp.alive(i):
            assert cp.stop(i) == 0, seed
    from quorum.log.file_log import FileLog
    logs = {i: FileLog(cp.partition_dir(i)) for i in rest}
    try:
        held = {i: {b.base_offset + k: r for b in log.batches(0, high_watermark) for k, r in enumerate(b.records)
                    if b.base_offset + k < high_watermark} for i, log in logs.items()}
    finally:
        for log in logs.values():
            log.close()
    first, second = (held[i] for i in rest)
    assert first == second, f"the voters' logs differ below the high watermark {high_watermark} (seed {seed})"
    missing = [(o, p) for o, p in acked if first.get(o) != p]
    assert not missing and len(acked) > 20, f"seed {seed}: acknowledged writes not on the voters: {missing[:5]}"


def assert_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr


def test_a_sole_voter_restarted_on_another_port_announces_it_to_itself(controller_processes):
    """The leader is the voter that moved: it sends UpdateRaftVoter to its own listener."""
    cp = controller_processes(voters=(1,), raft_only=True, dynamic=True)
    cp.format_dynamic({1: ["--standalone"]})
    cp.start()
    wait_for(lambda: voters(cp) == {1: cp.directory_id(1)}, 30, "the standalone voter leading")
    restart_on_another_port(cp, 1)
    wait_for(lambda: [v["endpoints"] for v in status(cp).get("CurrentVoters", ())]
             == [[f"CONTROLLER://127.0.0.1:{cp.ports[1]}"]], 30, "its new endpoint in the voter set")
