"""Histories of admin writes against three real controller processes, checked by Porcupine
(tests/histories.py): four clients create, delete and reconfigure five topics while a fault is
injected, and every history must be linearizable.

The faults: the active controller SIGKILLed and restarted, SIGSTOPped and resumed (it wakes up
believing it leads), a follower SIGKILLed, and every controller SIGKILLed at once and restarted on
its storage; and, on a dynamic quorum, controllers added and the active one removed. And the check
must see what it is for: with the deliberate bug ``ack-before-commit``
(quorum/failpoints.py: the active controller answers a write before its records are committed), a
topic whose creation was acknowledged is lost with its leader, and Porcupine says the history is not
linearizable.

Beside the writers, a reader per controller (the active one and the standbys, each read from that
controller alone) and a sparkraft broker's metadata client record what they see, each with the
offset of the image it came from; tests/read_checks.py holds every such read to the committed log
(what it saw is what the log has at that offset, never past its end, never going back). With the
deliberate bug ``stale-read`` (controllers answer from an old image, naming the current offset),
that check refuses the reads."""
from __future__ import annotations

import signal
import time

import pytest
from histories import Workload, check
from read_checks import BrokerObserver, Readers, Reads, check_reads

pytestmark = pytest.mark.slow

PROGRESS = 40  # definite results between the steps of a fault


@pytest.fixture
def quorum(controller_processes):
    """Three controllers and a broker heartbeating to them (topics need a broker for their replica);
    ``quorum(env)`` starts them."""
    from conftest import LiveBrokers

    from quorum.rpc.controller_client import ControllerClient

    made = []

    def start(env=None, **overrides):
        cp = controller_processes(**overrides)
        cp.format()
        cp.start(env=env)
        cp.wait_leader(timeout=60)
        admin = ControllerClient(cp.bootstrap(), timeout=30)
        broker = LiveBrokers(admin, cp.cluster_id, ((101, None),), heartbeat_interval_ms=300)
        made.append((admin, broker))
        broker.wait_unfenced()
        return cp
    yield start
    for admin, broker in made:
        broker.close()  # its heartbeats stop before the client they use is closed
        admin.close()


def _kill_and_restart_the_leader(cp, w):
    leader = cp.wait_leader().leader_id
    cp.kill(leader)
    cp.wait_leader(timeout=60, exclude=(leader,))
    w.wait_for(len(w.history.ops) + PROGRESS, 60)
    cp.start([leader])


def _pause_and_resume_the_leader(cp, w):
    leader = cp.wait_leader().leader_id
    cp.send(leader, signal.SIGSTOP)
    try:
        cp.wait_leader(timeout=60, exclude=(leader,))
        w.wait_for(len(w.history.ops) + PROGRESS, 60)
    finally:
        cp.send(leader, signal.SIGCONT)


def _kill_a_follower(cp, w):
    leader = cp.wait_leader().leader_id
    follower = next(i for i in cp.voters if i != leader)
    cp.kill(follower)
    w.wait_for(len(w.history.ops) + PROGRESS, 60)
    cp.start([follower])


def _kill_them_all(cp, w):
    for i in cp.voters:
        cp.kill(i)
    time.sleep(0.5)
    cp.start()
    cp.wait_leader(timeout=60)


FAULTS = {"sigkill-leader": _kill_and_restart_the_leader, "sigstop-leader": _pause_and_resume_the_leader,
          "sigkill-follower": _kill_a_follower, "sigkill-all": _kill_them_all}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_admin_writes_stay_linearizable_through(quorum, fault):
    cp = quorum()
    reads = Reads()
    with Workload(cp.bootstrap(), seed=sum(map(ord, fault))) as w, \
            Readers(cp.bootstrap().split(","), w.keys, reads) as readers, \
            BrokerObserver(cp.bootstrap(), cp.cluster_id, w.keys, reads):
        w.wait_for(PROGRESS, 60)
        for _ in range(2):
            FAULTS[fault](cp, w)
            w.wait_for(len(w.history.ops) + PROGRESS, 90)
    counts = w.history.counts()
    assert counts.get("ok", 0) >= PROGRESS, counts
    verdict = check(w.history, f"linearizability-{fault}")
    assert verdict.startswith("linearizable"), verdict
    assert readers.answered >= 10 and any(o["who"] == "broker" for o in reads.ops)
    check_reads(reads, f"linearizability-{fault}", cp.bootstrap(), cp.cluster_id)


def test_the_read_checks_catch_a_controller_answering_from_a_stale_image(quorum):
    """The deliberate bug ``stale-read`` armed: each controller answers reads from the image it had
    at its first read while naming its current offset; the writes change the topics meanwhile."""
    cp = quorum(env={"SPARKRAFT_FAILPOINTS": "stale-read=on"})
    reads = Reads()
    with Workload(cp.bootstrap(), seed=3) as w, Readers(cp.bootstrap().split(","), w.keys, reads):
        w.wait_for(PROGRESS, 60)
    with pytest.raises(AssertionError, match="read violations") as caught:
        check_reads(reads, "reads-injected-stale-read", cp.bootstrap(), cp.cluster_id)
    assert "the committed log has" in str(caught.value) and "the reads are kept in" in str(caught.value)


def test_the_checker_catches_a_write_acknowledged_before_it_was_committed(quorum):
    """The deliberate bug on every controller; the followers paused (and their last long-poll Fetch
    answered, so no answer carrying the new record waits in their sockets), so nothing the leader
    appends commits; a topic created there is acknowledged at once; the leader dies with it; the
    others elect a leader that never had it, and a second creation of the same topic succeeds."""
    from histories import History

    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient

    # a leader that hears from no follower keeps leading for 4 s (controller.quorum.fetch.timeout.ms)
    cp = quorum(env={"SPARKRAFT_FAILPOINTS": "ack-before-commit=on"}, **{"controller.quorum.fetch.timeout.ms": "4000"})
    assert "Failpoints armed" in cp.output(cp.voters[0]).read_text()
    leader = cp.wait_leader().leader_id
    followers = [i for i in cp.voters if i != leader]
    history = History()
    with ControllerClient(f"127.0.0.1:{cp.ports[leader]}", timeout=10) as admin:
        admin.call(api.CreateTopicsRequest((api.CreatableTopic("warmup", 1, 1),)))  # the leader is active
        for i in followers:
            cp.send(i, signal.SIGSTOP)
        time.sleep(1.0)  # past the leader's hold of their last Fetch (500 ms): answered empty
        call = time.monotonic_ns()
        (created,) = admin.call(api.CreateTopicsRequest((api.CreatableTopic("lost", 1, 1),)))
        history.record(0, "create", "lost", "", call, time.monotonic_ns(), "ok" if created.error.value == 0 else "x")
    assert history.ops[0]["result"] == "ok", "the buggy leader acknowledged the creation"
    cp.kill(leader)
    for i in followers:
        cp.send(i, signal.SIGCONT)
    cp.wait_leader(timeout=60, exclude=(leader,))
    with ControllerClient(cp.bootstrap(followers), timeout=30) as admin:
        call = time.monotonic_ns()
        (again,) = admin.call(api.CreateTopicsRequest((api.CreatableTopic("lost", 1, 1),)))
        history.record(1, "create", "lost", "", call, time.monotonic_ns(), "ok" if again.error.value == 0 else "exists")
    assert history.ops[1]["result"] == "ok", "the new leader never had the first creation"
    with pytest.raises(AssertionError, match="NOT linearizable") as caught:
        check(history, "linearizability-injected-ack-before-commit")
    assert "the history is kept in" in str(caught.value)


def test_admin_writes_stay_linearizable_while_controllers_are_added_and_removed(controller_processes):
    """A dynamic quorum grown from one controller to three and shrunk by its active controller, then
    grown again, while the clients write: one history, linearizable."""
    from conftest import LiveBrokers, wait_for
    from test_dynamic_quorum import add, remove, status

    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes(dynamic=True)
    cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"], 3: ["--no-initial-controllers"]})
    cp.start()
    cp.wait_leader(timeout=60)
    admin = ControllerClient(cp.bootstrap(), timeout=30)
    broker = LiveBrokers(admin, cp.cluster_id, ((101, None),), heartbeat_interval_ms=300)
    try:
        broker.wait_unfenced()
        reads = Reads()
        with Workload(cp.bootstrap(), seed=7) as w, Readers(cp.bootstrap().split(","), w.keys, reads), \
                BrokerObserver(cp.bootstrap(), cp.cluster_id, w.keys, reads):
            w.wait_for(PROGRESS, 60)
            for i in (2, 3):
                wait_for(lambda i=i: i in {o["id"] for o in status(cp).get("CurrentObservers", ())}, 60,
                         f"{i} observing")
                add(cp, i)
                w.wait_for(len(w.history.ops) + PROGRESS, 90)
            leader = status(cp)["LeaderId"]
            assert remove(cp, leader, cp.directory_id(leader)).returncode == 0
            w.wait_for(len(w.history.ops) + PROGRESS, 90)
            wait_for(lambda: leader in {o["id"] for o in status(cp).get("CurrentObservers", ())}, 60,
                     f"{leader} observing again")
            add(cp, leader)
            w.wait_for(len(w.history.ops) + PROGRESS, 90)
    finally:
        broker.close()
        admin.close()
    assert check(w.history, "linearizability-voter-changes").startswith("linearizable")
    check_reads(reads, "linearizability-voter-changes", cp.bootstrap(), cp.cluster_id)
