"""Crashes at named places in the write path (quorum/failpoints.py), in real controller processes,
while four clients write: every controller starts with the point armed, crashes when it first gets
there (SIGKILL to itself), and is restarted without it; then the clients' history must be
linearizable (no acknowledged write lost, none seen that later vanished: Porcupine, histories.py),
every read of a controller or a broker's image what the committed log holds at its offset
(read_checks.py), and the voters' logs identical. Also a crash of the only voter as it takes a second one's addition,
retried afterwards. A disk that fails an fsync (EIO) stops its controller with one line, and the
others go on."""
from __future__ import annotations

import pytest
from conftest import LiveBrokers, wait_for
from histories import Workload, check
from read_checks import BrokerObserver, Readers, Reads, check_reads

from quorum.log.file_log import FileLog

pytestmark = pytest.mark.slow

PROGRESS = 40
SMALL_SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": "3000"}


def _run(cp, env, armed=None, until_crashes: int = 1, restart: bool = True):
    """Start ``cp``, the controllers ``armed`` (all by default) with ``env``; write through crashes
    (a watcher restarts each crashed controller without the failpoint, if ``restart``); the
    Workload and the ids that crashed."""
    import threading

    from quorum.rpc.controller_client import ControllerClient

    cp.format()
    armed = set(cp.voters if armed is None else armed)
    cp.start([i for i in cp.voters if i in armed], env=env)
    unarmed = [i for i in cp.voters if i not in armed]
    if unarmed:
        cp.start(unarmed)
    crashed: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.1):
            for i in cp.voters:
                if cp.procs[i].poll() is not None and (restart or i not in crashed):
                    crashed.add(i)
                    if restart:
                        cp.start([i])

    watcher = threading.Thread(target=watch, name="restarter", daemon=True)
    watcher.start()
    admin = ControllerClient(cp.bootstrap(), timeout=60)
    broker = LiveBrokers(admin, cp.cluster_id, ((101, None),), heartbeat_interval_ms=300)
    reads = Reads()
    try:
        with Workload(cp.bootstrap(), seed=len(str(env))) as w, \
                Readers(cp.bootstrap().split(","), w.keys, reads), \
                BrokerObserver(cp.bootstrap(), cp.cluster_id, w.keys, reads):
            wait_for(lambda: len(crashed) >= until_crashes, 180, "a controller at the failpoint")
            for _ in range(3):  # more crashes may follow the first (another controller at the same point)
                w.wait_for(len(w.history.ops) + PROGRESS, 120)
    finally:
        done.set()
        watcher.join(5)
        broker.close()
        admin.close()
    w.reads = reads
    return w, crashed


def _logs_agree(cp, ids) -> None:
    """Every voter at or past the leader's log end as of the first look (the leader goes on
    appending NoOps meanwhile), then stopped: their logs identical up to the shortest."""
    from quorum.rpc.raft_client import RaftClient

    seen: dict = {}

    def caught_up():
        with RaftClient(cp.bootstrap(), timeout=5) as c:
            try:
                info = c.describe_quorum()
            except Exception:  # noqa: BLE001 - not yet
                return False
            ends = seen["ends"] = {v.replica_id: v.log_end_offset for v in info.voters}
            if "target" not in seen and info.leader_id in ends:
                seen["target"] = ends[info.leader_id]
            target = seen.get("target")
            return target is not None and set(ends) >= set(ids) and min(ends.values()) >= target
    try:
        wait_for(caught_up, 60, "every voter at the leader's log end")
    except AssertionError as e:
        raise AssertionError(f"{e}: the voters' ends {seen.get('ends')}, the leader's at the first look "
                             f"{seen.get('target')}") from None
    for i in ids:
        assert cp.stop(i) == 0, f"controller {i} did not stop cleanly after its restart"
    logs = {i: FileLog(cp.partition_dir(i)) for i in ids}
    try:
        start = max(log.start_offset for log in logs.values())
        end = min(log.end_offset for log in logs.values())
        batches = {i: [b for b in log.batches(start, end) if b.base_offset >= start and b.end_offset <= end]
                   for i, log in logs.items()}
    finally:
        for log in logs.values():
            log.close()
    first = next(iter(batches.values()))
    assert first and all(b == first for b in batches.values()), "the voters' logs differ"


@pytest.mark.parametrize("point", ["log-before-fsync", "log-after-fsync", "controller-before-answer",
                                   "snapshot-half-written"])
def test_a_crash_at_each_point_loses_nothing_acknowledged(controller_processes, point):
    cp = controller_processes(**(SMALL_SNAPSHOTS if point == "snapshot-half-written" else {}))
    w, crashed = _run(cp, {"SPARKRAFT_FAILPOINTS": f"{point}=crash"})
    assert crashed, "no controller crashed"
    assert check(w.history, f"failpoint-{point}").startswith("linearizable")
    check_reads(w.reads, f"failpoint-{point}", cp.bootstrap(), cp.cluster_id)
    if point == "snapshot-half-written":  # each restart finds the half-written file and removes it
        for i in crashed:  # (a controller that crashed last may be restarting still)
            wait_for(lambda: "a snapshot left half-written by a crash" in cp.output(i).read_text(), 60,
                     f"controller {i}'s restart to remove its half-written snapshot")
    _logs_agree(cp, cp.voters)


@pytest.mark.parametrize("fault, says", [("eio", "Input/output error"), ("enospc", "No space left on device")])
def test_a_disk_that_fails_an_fsync_stops_its_controller_and_the_others_go_on(controller_processes, fault, says):
    cp = controller_processes()
    w, crashed = _run(cp, {"SPARKRAFT_FAILPOINTS": f"log-before-fsync={fault}"}, armed={3}, restart=False)
    (stopped,) = crashed
    assert cp.procs[stopped].returncode not in (0, -9), "it stopped on its own, with an error"
    out = cp.output(stopped).read_text()
    assert f"KAFKA_STORAGE_ERROR: its log could not be fsynced ({says}" in out, out[-2000:]
    assert check(w.history, f"failpoint-fsync-{fault}").startswith("linearizable")
    check_reads(w.reads, f"failpoint-fsync-{fault}", cp.bootstrap([i for i in cp.voters if i != stopped]),
                cp.cluster_id)


def test_a_full_disk_under_snapshots_is_reported_and_the_controllers_go_on(controller_processes):
    """Every snapshot a controller starts fails half-written with ENOSPC: it says so, leaves no
    temporary file, keeps its whole log (nothing is dropped for a snapshot that is not there) and
    serves on; the history holds."""
    from quorum.snapshot.files import list_snapshots

    cp = controller_processes(**SMALL_SNAPSHOTS)
    w, crashed = _run(cp, {"SPARKRAFT_FAILPOINTS": "snapshot-half-written=enospc"}, until_crashes=0)
    assert not crashed, f"controllers {crashed} stopped"
    assert check(w.history, "failpoint-snapshot-enospc").startswith("linearizable")
    check_reads(w.reads, "failpoint-snapshot-enospc", cp.bootstrap(), cp.cluster_id)
    for i in cp.voters:
        assert "could not write snapshot" in cp.output(i).read_text() and "No space left on device" in \
            cp.output(i).read_text(), f"controller {i} said nothing of its failed snapshots"
    _logs_agree(cp, cp.voters)
    for i in cp.voters:
        d = cp.partition_dir(i)
        assert not [p.name for p in d.iterdir() if p.name.endswith(".tmp")], f"controller {i} left a temporary file"
        log = FileLog(d)
        try:
            assert log.start_offset == 0 and not [s for s in list_snapshots(d) if s.end_offset > 0]
        finally:
            log.close()


def test_a_crash_while_a_voter_is_added_loses_nothing_and_the_addition_can_be_retried(controller_processes):
    """One controller, standalone; it crashes as it takes the addition of a second voter (before
    that commits), comes back, and the addition, retried, goes through; the history holds."""
    import threading

    from test_dynamic_quorum import sparkraft, status

    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes(dynamic=True)
    cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"], 3: ["--no-initial-controllers"]})
    cp.start([1], env={"SPARKRAFT_FAILPOINTS": "voter-change-appended=crash"})
    cp.start([2, 3])
    cp.wait_leader(timeout=60)
    done, crashed = threading.Event(), []

    def watch() -> None:
        while not done.wait(0.1):
            if cp.procs[1].poll() is not None:
                crashed.append(cp.procs[1].returncode)
                cp.start([1])

    watcher = threading.Thread(target=watch, name="restarter", daemon=True)
    watcher.start()
    admin = ControllerClient(cp.bootstrap(), timeout=60)
    broker = LiveBrokers(admin, cp.cluster_id, ((101, None),), heartbeat_interval_ms=300)
    try:
        with Workload(cp.bootstrap(), seed=5) as w:
            w.wait_for(PROGRESS, 60)
            def added(i: int) -> bool:
                """Whether ``i`` votes; if not, ask for it (again: the leader may have crashed taking it)."""
                if i in {v["id"] for v in status(cp).get("CurrentVoters", ())}:
                    return True
                sparkraft("quorum", "add-controller", "--config", str(cp.config(i)), "--bootstrap-controller",
                          cp.bootstrap())
                return False

            for i in (2, 3):
                wait_for(lambda i=i: added(i), 120, f"controller {i} added")
                w.wait_for(len(w.history.ops) + PROGRESS, 120)
    finally:
        done.set()
        watcher.join(5)
        broker.close()
        admin.close()
    assert crashed == [-9], f"controller 1 crashed at the point once: {crashed}"
    assert check(w.history, "failpoint-voter-change-appended").startswith("linearizable")
    _logs_agree(cp, cp.voters)
