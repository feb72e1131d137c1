"""Hostile requests on a controller's Kafka listener (issue 58's findings), sent as an attacker on
127.0.0.1 would, to real controller processes: each is refused or bounded, the quorum keeps its
leader and epoch, and the leader stays within MEMORY_GROWTH_MB of where it was."""
from __future__ import annotations

import datetime
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from apache_kafka import need_kafka
from conftest import LiveBrokers, kafka_listener_quorum, wait_for
from kio.schema.fetch.v17.request import FetchPartition, FetchRequest, FetchTopic, ReplicaState

from quorum.kafka.client import KafkaConnection
from quorum.kafka_log.topic import METADATA_TOPIC_ID

pytestmark = pytest.mark.slow

MEMORY_GROWTH_MB = 100  # what hostile requests may add to a controller's resident memory, at most
FETCH_CAP = 8 << 20  # the most a leader answers one Fetch with (Kafka's leader: the same 8 MiB)
LOG_BYTES = 12 << 20  # the log the fetches ask for whole: more than one capped answer


def _vm(pid: int, key: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key}")


class PeakMemory:
    """The largest resident size ``pid`` reaches while the block runs (sampled every 10 ms)."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._done = pid, 0, threading.Event()

    def __enter__(self) -> "PeakMemory":
        self.before = _vm(self.pid, "VmRSS")
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.01):
            self.peak = max(self.peak, _vm(self.pid, "VmRSS"))

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.before) / 2**20


def _log_bytes(cp, node_id: int) -> int:
    """The bytes of log written (its segments are preallocated: zeros after the last batch)."""
    return sum(len(f.read_bytes().rstrip(b"\0")) for f in cp.log_dir(node_id).rglob("*.log"))


@pytest.fixture(scope="module")
def quorum(tmp_path_factory):
    """Three controllers answering Kafka's protocol, three live brokers, and a log of LOG_BYTES."""
    from quorum.rpc.controller_client import ControllerClient

    need_kafka()
    with kafka_listener_quorum(tmp_path_factory.mktemp("controllers")) as cp, \
            ControllerClient(cp.bootstrap(), timeout=60) as admin:
        brokers = LiveBrokers(admin, cp.cluster_id)
        try:
            leader = cp.wait_leader(timeout=30).leader_id
            brokers.wait_unfenced()
            n = 0
            while _log_bytes(cp, leader) < LOG_BYTES:
                admin.create_topic(f"wide-{n}", 10_000, 3)
                n += 1
            yield cp
        finally:
            brokers.close()



def _fetch_from_zero(port: int, epoch: int, max_bytes: int = 2**31 - 1, cluster_id=None):
    request = FetchRequest(
        cluster_id=cluster_id, replica_state=ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=0), min_bytes=0, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(FetchPartition(
            partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=0, log_start_offset=-1,
            partition_max_bytes=max_bytes, replica_directory_id=None),)),),
        forgotten_topics_data=(), rack_id="")
    with KafkaConnection("127.0.0.1", port, timeout=60) as conn:
        return conn.request(request)


def test_fetches_of_the_whole_log_are_answered_8_mib_at_most_and_the_leader_keeps_its_memory(quorum):
    """Eight Fetches at once of the whole log from offset 0 with max_bytes 2^31-1 (each used to be
    answered with the whole log; four took a leader from 287 MB to 1,145 MB): each answer holds at
    most the leader's cap, and the leader keeps its leadership and its memory."""
    cp = quorum
    before = cp.wait_leader()
    port = cp.kafka_ports[before.leader_id]
    with PeakMemory(cp.procs[before.leader_id].pid) as memory, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _fetch_from_zero(port, before.leader_epoch), range(8)))
    sizes = [len(a.responses[0].partitions[0].records or b"") for a in answers]
    assert all(0 < size <= FETCH_CAP for size in sizes), sizes
    assert memory.growth_mb < MEMORY_GROWTH_MB, f"the leader grew {memory.growth_mb:.0f} MB"
    after = cp.wait_leader()
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)


def test_fetches_without_a_cluster_id_are_answered_and_log_nothing_each(quorum):
    """A Fetch with no ClusterId (Kafka's field is nullable: such a fetch is not checked) used to
    fail inside the controller with a traceback logged per request; a thousand of them now get
    answers and write at most a line or two to the controller's log."""
    cp = quorum
    leader = cp.wait_leader()
    log_path = cp.output(leader.leader_id)
    size = log_path.stat().st_size if log_path.exists() else 0
    port = cp.kafka_ports[leader.leader_id]
    for _ in range(200):
        answer = _fetch_from_zero(port, leader.leader_epoch, max_bytes=1024)
        assert answer.error_code == 0 and answer.responses[0].partitions[0].error_code == 0
    for _ in range(800):
        _fetch_from_zero(port, -1, max_bytes=1024)  # no leader epoch: refused, or answered; quietly
    time.sleep(0.5)
    grown = (log_path.stat().st_size if log_path.exists() else 0) - size
    assert grown < 2_000, log_path.read_text(errors="replace")[-3000:]


def _registration(cluster_id: str, broker_id: int = 150, listeners=(("PLAINTEXT", "127.0.0.1"),), rack=None):
    import uuid

    from kio.schema.broker_registration.v4 import request as r
    from kio.schema.types import BrokerId
    from kio.static.primitive import i16, i64, u16

    from quorum.controller.settings import MV_MAX

    return r.BrokerRegistrationRequest(
        broker_id=BrokerId(broker_id), cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
        listeners=tuple(r.Listener(name=name, host=host, port=u16(9092), security_protocol=i16(0))
                        for name, host in listeners),
        features=(r.Feature(name="metadata.version", min_supported_version=i16(7),
                            max_supported_version=i16(MV_MAX)),),
        rack=rack, is_migrating_zk_broker=False, log_dirs=(uuid.uuid4(),), previous_broker_epoch=i64(-1))


def test_registrations_past_the_bounds_are_refused_before_the_controller_and_keep_the_leader(quorum):
    """What one unauthenticated BrokerRegistration used to get past (a 45 MB one of 2,500,000
    listeners cost the quorum its leader twice): a frame larger than a registration can be is
    refused unread; too many listeners, a host or listener name no client could connect to or that
    a terminal or a browser would render (a newline, markup), a rack of markup, no listener at all,
    broker id 2^31-1: each refused with INVALID_REQUEST, nothing registered, the leader kept."""
    from quorum.errors import Errors
    from quorum.kafka.codec import SMALL_REQUEST_BYTES
    from quorum.rpc.controller_client import ControllerClient

    cp = quorum
    before = cp.wait_leader()
    port = cp.kafka_ports[before.leader_id]
    with ControllerClient(cp.bootstrap(), timeout=30) as admin:
        registered = {b.broker_id for b in admin.describe_cluster().brokers}
    refused = [
        _registration(cp.cluster_id, listeners=[(f"L{i}", "127.0.0.1") for i in range(65)]),
        _registration(cp.cluster_id, listeners=[("PLAINTEXT", "h" * 256)]),
        _registration(cp.cluster_id, listeners=[("PLAINTEXT", "<script>alert(1)</script>")]),
        _registration(cp.cluster_id, listeners=[("PLAIN\nTEXT", "127.0.0.1")]),
        _registration(cp.cluster_id, rack="<img src=x onerror=alert(1)>"),
        _registration(cp.cluster_id, listeners=()),
        _registration(cp.cluster_id, broker_id=2**31 - 1),
    ]
    with PeakMemory(cp.procs[before.leader_id].pid) as memory:
        with KafkaConnection("127.0.0.1", port, timeout=30) as kafka:
            for request in refused:
                assert kafka.request(request).error_code == Errors.INVALID_REQUEST, request
        # a frame past what a registration can be (a 40 MiB host, 2,500,000 listeners): closed unread
        big = SMALL_REQUEST_BYTES[62] + 1
        with KafkaConnection("127.0.0.1", port, timeout=30) as kafka:
            kafka.send_raw(struct.pack(">ihhih", big, 62, 4, 1, -1) + b"\0" * (big - 10))
            wait_for(kafka.closed_by_peer, 30, "the connection closed")
    assert memory.growth_mb < MEMORY_GROWTH_MB, f"the leader grew {memory.growth_mb:.0f} MB"
    with ControllerClient(cp.bootstrap(), timeout=30) as admin:
        assert {b.broker_id for b in admin.describe_cluster().brokers} == registered
    after = cp.wait_leader()
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)


def _observers(cp) -> set[int]:
    from quorum.rpc.raft_client import RaftClient

    client = RaftClient(cp.bootstrap(), timeout=30)
    try:
        return {o.replica_id for o in client.describe_quorum().observers}
    finally:
        client.close()


def _fetch_as(port: int, epoch: int, replica_id: int) -> None:
    request = FetchRequest(
        cluster_id=None, replica_state=ReplicaState(replica_id=replica_id, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=0), min_bytes=0, max_bytes=1024, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(FetchPartition(
            partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=0, log_start_offset=-1,
            partition_max_bytes=1024, replica_directory_id=None),)),),
        forgotten_topics_data=(), rack_id="")
    with KafkaConnection("127.0.0.1", port, timeout=30) as conn:
        conn.request(request)


def test_made_up_observers_are_forgotten_within_seconds(quorum):
    """Fetches from 300 made-up replica ids with no directory id grew CurrentObservers from 1 to 301
    for five minutes; now they are gone within seconds of their last fetch."""
    from quorum.raft.progress import ANONYMOUS_IDLE_TIMEOUT_MS

    cp = quorum
    leader = cp.wait_leader()
    for i in range(300):
        _fetch_as(cp.kafka_ports[leader.leader_id], leader.leader_epoch, 70_000 + i)
    made_up = set(range(70_000, 70_300))
    assert made_up <= _observers(cp)
    time.sleep(ANONYMOUS_IDLE_TIMEOUT_MS / 1000 + 1)
    wait_for(lambda: not made_up & _observers(cp), 10, "the made-up observers forgotten")
