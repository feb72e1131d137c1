"""Real ``sparkraft controller start`` processes: failover under a write load, and bad input.

The write load comes from a RaftClient thread that records every acknowledged (offset, record).
Faults: SIGKILL of the leader, the killed node's restart, SIGSTOP/SIGCONT of the next leader,
SIGTERM. At the end every node's log, read back with FileLog, must hold every acknowledged record at
its offset, and the three logs must be identical batch for batch up to the shortest one.
"""
from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time

import pytest
from conftest import LiveBrokers, sparkraft_cmd, wait_for

from quorum.errors import SparkraftError
from quorum.log.file_log import FileLog

pytestmark = pytest.mark.slow


class Writer(threading.Thread):
    """Appends one unique record at a time through a RaftClient; remembers what was acknowledged."""

    def __init__(self, client):
        super().__init__(name="writer", daemon=True)
        self.client = client
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        k = 0
        while not self.stop.is_set():
            record = f"write-{k}".encode()
            k += 1
            try:
                base, last = self.client.append([record])
            except Exception as e:  # SparkraftError, or the client was closed under us
                self.errors.append(str(e))
                continue
            assert base == last
            with self.lock:
                self.acked.append((base, record))

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def wait_more(self, n: int, timeout: float, what: str) -> None:
        target = self.count() + n
        wait_for(lambda: self.count() >= target, timeout, f"{n} more acknowledged writes {what}")


def read_log(partition_dir):
    log = FileLog(partition_dir)
    try:
        return list(log.batches(0, log.end_offset))
    finally:
        log.close()


def records_by_offset(batches):
    out = {}
    for b in batches:
        for k, r in enumerate(b.records):
            out[b.base_offset + k] = r
    return out


def wait_caught_up(cp, timeout=20):
    """Every voter holds the leader's whole log and the high watermark covers it."""
    with cp.client(timeout=2) as c:
        def caught_up():
            try:
                info = c.describe_quorum()
            except SparkraftError:
                return None
            ends = {v.log_end_offset for v in info.voters}
            return info if len(ends) == 1 and info.high_watermark == ends.pop() else None

        return wait_for(caught_up, timeout, "all voters caught up")


def write_through(cp, faults) -> Writer:
    """Run ``faults(writer)`` while a writer appends; stop the writer, return it."""
    writer = Writer(cp.client(timeout=30, rpc_timeout=1.0))
    writer.start()
    try:
        writer.wait_more(30, 15, "before any fault")
        faults(writer)
    finally:
        writer.stop.set()
        writer.join(2)  # a healthy quorum answers the last append at once
        writer.client.close()  # else abort it
        writer.join(5)
    assert not writer.is_alive()
    return writer


def stop_all_and_check_logs(cp, writer, min_epochs):
    """Wait until every voter caught up, SIGTERM all (exit 0), then compare the logs on disk."""
    info = wait_caught_up(cp)
    for i in cp.voters:
        assert cp.stop(i) == 0, f"controller {i} did not exit cleanly"
    acked = writer.acked
    assert len({o for o, _ in acked}) == len(acked), "an offset was acknowledged twice"
    logs = {i: read_log(cp.partition_dir(i)) for i in cp.voters}
    for i, batches in logs.items():
        on_disk = records_by_offset(batches)
        missing = [(o, r) for o, r in acked if on_disk.get(o) != r]
        assert not missing, f"node {i} lacks acknowledged writes {missing[:5]}"
        assert batches[-1].end_offset >= info.high_watermark
    # identical, batch for batch, up to the shortest log
    common = min(b[-1].end_offset for b in logs.values())
    prefixes = {i: [b for b in batches if b.end_offset <= common] for i, batches in logs.items()}
    reference = prefixes[cp.voters[0]]
    for i, prefix in prefixes.items():
        assert prefix == reference, f"node {i}'s log differs from node {cp.voters[0]}'s below offset {common}"
    assert len({b.epoch for b in reference}) >= min_epochs


def test_sigkill_of_the_leader_under_write_load_loses_no_acknowledged_write(controller_processes):
    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    first = cp.wait_leader().leader_id

    def faults(writer):
        # SIGKILL the leader: another takes over and writes go on.
        cp.kill(first)
        cp.wait_leader(exclude=(first,))
        writer.wait_more(30, 15, f"after node {first} was killed")
        # The killed node comes back on its storage and catches up.
        cp.start([first])
        writer.wait_more(30, 15, f"after node {first} restarted")

    writer = write_through(cp, faults)
    assert len(writer.acked) >= 90
    stop_all_and_check_logs(cp, writer, min_epochs=2)


def test_sigkill_restart_then_sigstop_of_the_new_leader_and_it_rejoins_as_follower(controller_processes):
    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    first = cp.wait_leader().leader_id
    leaders = [first]

    def faults(writer):
        cp.kill(first)
        second = cp.wait_leader(exclude=(first,)).leader_id
        leaders.append(second)
        writer.wait_more(30, 15, f"after node {first} was killed")
        cp.start([first])
        writer.wait_more(20, 15, f"after node {first} restarted")
        # SIGSTOP the new leader: the other two elect a third; SIGCONT: it rejoins as a follower.
        cp.send(second, signal.SIGSTOP)
        leaders.append(cp.wait_leader(exclude=(second,), timeout=8).leader_id)
        writer.wait_more(30, 15, f"while node {second} was stopped")
        resumed_at_ms = time.time() * 1000
        cp.send(second, signal.SIGCONT)
        with cp.client(timeout=2) as c:
            def rejoined():
                try:
                    info = c.describe_quorum()
                except SparkraftError:
                    return False
                me = {v.replica_id: v for v in info.voters}[second]
                return info.leader_id != second and me.last_fetch_ms is not None and me.last_fetch_ms > resumed_at_ms

            wait_for(rejoined, 15, f"node {second} to fetch from the new leader after SIGCONT")
        writer.wait_more(20, 15, f"after node {second} resumed")

    writer = write_through(cp, faults)
    assert leaders[0] != leaders[1] != leaders[2]
    assert len(writer.acked) >= 130
    stop_all_and_check_logs(cp, writer, min_epochs=3)


def test_a_replaced_disk_rejoins_without_voting_and_catches_up(controller_processes):
    import shutil

    from quorum.log.election_store import QUORUM_STATE_FILE, FileElectionStore

    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    leader = cp.wait_leader().leader_id
    victim = next(i for i in cp.voters if i != leader)
    cluster_id = (cp.log_dir(victim) / "meta.properties").read_text().split("cluster.id=")[1].split()[0]

    def faults(writer):
        cp.kill(victim)
        shutil.rmtree(cp.log_dir(victim))
        result = subprocess.run(sparkraft_cmd("storage", "format", "--config", str(cp.config(victim)),
                                              "--cluster-id", cluster_id, "--rejoin"),
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert FileElectionStore(cp.partition_dir(victim) / QUORUM_STATE_FILE).read().rejoining
        writer.wait_more(20, 15, f"while node {victim} is down")
        cp.start([victim])
        writer.wait_more(20, 15, f"after node {victim} came back blank")

    writer = write_through(cp, faults)
    stop_all_and_check_logs(cp, writer, min_epochs=1)
    # Caught up, so the mark is gone from disk: it votes again.
    assert not FileElectionStore(cp.partition_dir(victim) / QUORUM_STATE_FILE).read().rejoining


def assert_one_line_error(result, starts_with):
    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith(starts_with), lines[0]
    return lines[0]


def run_controller(config, timeout=30):
    return subprocess.run(sparkraft_cmd("controller", "start", "--config", str(config)), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_sigterm_on_leader_exits_zero_and_a_foreign_node_is_refused(controller_processes, tmp_path):
    cp = controller_processes(raft_only=True)
    cp.format([1, 2])
    cp.start([1, 2])
    cp.wait_leader()

    # Node 3's directory was formatted for another cluster: the voters reject it, it exits.
    cp.format([3], cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    line = assert_one_line_error(run_controller(cp.config(3)), "INCONSISTENT_CLUSTER_ID: ")
    assert cp.cluster_id in line and "AAAAAAAAAAAAAAAAAAAAAA" in line

    # With a properly formatted node 3, SIGTERM on the leader hands over at once and exits 0.
    import shutil
    shutil.rmtree(cp.log_dir(3))
    cp.format([3])
    cp.start([3])
    with cp.client(timeout=10) as c:
        base, _ = c.append([b"before-sigterm"])
    leader = wait_caught_up(cp).leader_id
    t0 = time.monotonic()
    assert cp.stop(leader) == 0
    info = cp.wait_leader(exclude=(leader,), timeout=10)
    took = time.monotonic() - t0
    assert info.leader_id != leader
    assert took < 5, f"a new leader took {took:.1f}s"
    output = cp.output(leader).read_text()
    assert "resigns as leader" in output and "Traceback" not in output
    with cp.client(timeout=10) as c:
        b2, _ = c.append([b"after-sigterm"])
    assert b2 > base


def test_bad_input_is_one_line_and_non_zero(controller_processes):
    cp = controller_processes(raft_only=True)
    # unformatted directory
    assert_one_line_error(run_controller(cp.config(1)), "KAFKA_STORAGE_ERROR: ")
    # port in use
    cp.format([1])
    with socket.socket() as s:
        s.bind(("127.0.0.1", cp.ports[1]))
        s.listen()
        line = assert_one_line_error(run_controller(cp.config(1)), "ERROR: ")
    assert f"cannot listen on 127.0.0.1:{cp.ports[1]}: address already in use" in line
    # node.id not among the voters
    bad = cp.root / "bad.properties"
    bad.write_text(cp.config(1).read_text().replace("node.id=1", "node.id=7"))
    line = assert_one_line_error(run_controller(bad), "ERROR: ")
    assert "node.id 7 is not in controller.quorum.voters" in line
    # a config that does not exist
    assert_one_line_error(run_controller(cp.root / "missing.properties"), "ERROR: ")


def test_a_damaged_segment_stops_the_controller_with_one_line_and_changes_nothing(controller_processes):
    cp = controller_processes(raft_only=True)
    cp.format([1])
    log = FileLog(cp.partition_dir(1))
    for k in range(3):
        log.append_as_leader([f"r{k}".encode()], 1, 0)
    log.flush()
    log.close()
    segment = next(cp.partition_dir(1).glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[50] ^= 0xFF  # inside the first batch; two intact batches follow
    segment.write_bytes(bytes(data))
    line = assert_one_line_error(run_controller(cp.config(1)), "KAFKA_STORAGE_ERROR: ")
    assert str(segment) in line and "corrupt" in line
    assert segment.read_bytes() == bytes(data)


def test_a_missing_quorum_state_beside_a_log_refuses_to_start_with_one_line(controller_processes):
    """Starting in epoch 0 without quorum-state, a node could grant a second vote in an epoch it
    already voted or followed in. It must refuse, and change nothing."""
    from quorum.log.election_store import QUORUM_STATE_FILE

    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    leader = cp.wait_leader().leader_id
    with cp.client(timeout=10) as c:
        c.append([b"acknowledged"])
    victim = next(v for v in cp.voters if v != leader)
    wait_caught_up(cp)
    assert cp.stop(victim) == 0
    (cp.partition_dir(victim) / QUORUM_STATE_FILE).unlink()
    before = sorted((p.name, p.stat().st_size) for p in cp.partition_dir(victim).iterdir())
    line = assert_one_line_error(run_controller(cp.config(victim)), "KAFKA_STORAGE_ERROR: ")
    assert "quorum-state is missing but the log holds records" in line and "--rejoin" in line
    assert sorted((p.name, p.stat().st_size) for p in cp.partition_dir(victim).iterdir()) == before


def test_a_restarted_controller_answers_no_read_until_it_has_heard_what_was_committed(controller_processes):
    """A standby SIGKILLed, a topic created while it was down, the other two SIGSTOPped and the
    standby restarted: alone, it cannot know of the topic, so it does not answer that the topic
    does not exist (a stale read) but refuses reads as still replaying; once the others resume it
    hears the leader and answers with the topic."""
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    leader = cp.wait_leader().leader_id
    victim = next(i for i in cp.voters if i != leader)
    others = [i for i in cp.voters if i != victim]
    with ControllerClient(cp.bootstrap(), timeout=20) as admin:
        brokers = LiveBrokers(admin, admin.describe_cluster().cluster_id)
        try:
            brokers.wait_unfenced()
            admin.create_topic("before", 1, 1)
            cp.kill(victim)
            admin.create_topic("while-down", 1, 1)
        finally:
            brokers.close()
    for i in others:
        cp.send(i, signal.SIGSTOP)
    try:
        cp.start([victim])
        with ControllerClient(cp.bootstrap([victim]), timeout=3) as alone:
            def refused() -> str:
                try:
                    names = alone.list_topics()
                except SparkraftError as e:
                    return str(e)
                raise AssertionError(f"a controller that heard no leader answered a read: {names}")

            wait_for(lambda: "still replaying" in refused(), 60, "the restarted controller to refuse reads")
            assert "still replaying its metadata log" in refused()
    finally:
        for i in others:
            cp.send(i, signal.SIGCONT)
    with ControllerClient(cp.bootstrap([victim]), timeout=60) as alone:
        assert set(alone.list_topics()) == {"before", "while-down"}
