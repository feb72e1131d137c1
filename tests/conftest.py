"""Shared fixtures: real ``sparkraft controller start`` processes on free 127.0.0.1 ports.

``controller_processes()`` gives a :class:`ControllerProcesses` for three voters whose configs and
storage live under ``tmp_path``; every process it started is killed at teardown, whatever the test
did to it (SIGSTOP included).
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import pytest
from processes import kill_all

from quorum.log.meta_properties import format_storage, metadata_partition_dir, random_cluster_id

# Every JVM the tests start (Spark's driver and daemons, Kafka's brokers, controllers and tools)
# lives seconds to minutes and does little work: C2's compiler threads cost such a JVM more CPU than
# they give back, on 2 cores shared by several workers (measured: three Spark sessions side by side
# writing Delta tables, 47 s without these flags, 29 s with them). Set for the tests only: bench/
# measures JVMs as their operators run them.
TEST_JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
for _variable in ("SPARKRAFT_TEST_JVM_FLAGS", "SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_variable, TEST_JVM_FLAGS)

# Short timeouts keep failover tests fast; fetch stays well above the leader's 500 ms long poll.
FAST_TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.request.timeout.ms": "1000",
}


def _listening_port_range() -> tuple[int, int]:
    """Where free_ports draws from: below the kernel's ephemeral range, so that no outgoing
    connection (a gRPC channel, a JVM's client) is given the port between its pick and the server's
    bind (CI saw a controller's second listener lose its port so); each xdist worker its own slice."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top, bottom = low, max(1024, low - 12000)
    if top - bottom < 2000:
        return 0, 0  # no room below it: let the kernel pick
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) % workers if worker[2:].isdigit() else 0
    span = (top - bottom) // workers
    return bottom + index * span, bottom + (index + 1) * span


_handed_out: set[int] = set()  # not handed out twice by this process while others remain


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def kafka_listener_quorum(root: Path):
    """A static quorum of three controllers answering Kafka's protocol on their one port
    (``kafka_ports[i]`` is ``ports[i]``: the quorum, sparkraft's CLI and Kafka's tools share it),
    with its leader elected and every controller answering Kafka's protocol; closed after."""
    cp = ControllerProcesses(root)
    cp.kafka_ports = dict(cp.ports)
    cp.format()
    cp.start()
    try:
        cp.wait_leader(timeout=30)
        # each answers Kafka's protocol once it has replayed what a leader told it was committed
        for i in cp.voters:
            wait_for(lambda i=i: kafka_answers(cp.ports[i]), 60, f"controller {i} answering Kafka's protocol")
        yield cp
    finally:
        cp.close()


def kafka_answers(port: int) -> bool:
    """Whether Kafka's protocol is answered on 127.0.0.1:``port`` (ApiVersions): a controller
    answers it once it has loaded its log."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from quorum.kafka.client import KafkaConnection

    try:
        with KafkaConnection("127.0.0.1", port, timeout=5) as kafka:
            answer = kafka.request(ApiVersionsRequest(client_software_name="tests", client_software_version="1"))
            return answer.error_code == 0
    except Exception:  # refused, closed or not answered yet
        return False


def free_ports(n: int) -> list[int]:
    import random

    low, high = _listening_port_range()
    socks, ports = [], []
    try:
        if high == 0:
            for _ in range(n):
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                socks.append(s)
            return [s.getsockname()[1] for s in socks]
        if len(_handed_out) > (high - low) // 2:
            _handed_out.clear()
        while len(ports) < n:
            port = random.randrange(low, high)
            if port in _handed_out or port in ports:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(port)
        _handed_out.update(ports)
        return ports
    finally:
        for s in socks:
            s.close()


def create_topic_once(admin, name: str, partitions: int, replication_factor: int) -> None:
    """``admin.create_topic`` for a name only this test uses, where a leader may change meanwhile (a
    loaded machine, snapshots and retention): a write the old leader proposed but could not answer
    for is committed by the next, and the client's retry then finds the topic (at-least-once
    across controller changes, as Kafka's AdminClient): that topic with these partitions is ours."""
    from quorum.errors import Errors, SparkraftError

    try:
        admin.create_topic(name, partitions, replication_factor)
    except SparkraftError as e:
        if e.error is not Errors.TOPIC_ALREADY_EXISTS or len(admin.describe_topic(name).partitions) != partitions:
            raise


def sparkraft_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sparkraft", *args]


class LiveBrokers:
    """Brokers that register and keep heartbeating on threads of their own, as broker processes do.

    A broker that registers once and then goes quiet is fenced after ``broker.session.timeout.ms``;
    a test whose slow step (a Spark job on a loaded machine) outlasts that timeout would then find
    every broker fenced. These run the real :class:`~quorum.broker.lifecycle.BrokerLifecycle`
    until :meth:`close`.
    """

    def __init__(self, client, cluster_id: str, brokers=((101, "rack-a"), (102, "rack-b"), (103, "rack-c")),
                 port_base: int = 19000, heartbeat_interval_ms: int = 500):
        import threading

        from quorum.broker.lifecycle import BrokerLifecycle
        from quorum.controller import api
        from quorum.uuids import random_uuid

        self.lifecycles = {
            b: BrokerLifecycle(client, b, cluster_id, random_uuid(),
                               (api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", port_base + b),), rack,
                               heartbeat_interval_ms=heartbeat_interval_ms)
            for b, rack in brokers}
        self.threads = [threading.Thread(target=lc.run, daemon=True, name=f"broker-{b}")
                        for b, lc in self.lifecycles.items()]
        for t in self.threads:
            t.start()

    @property
    def epochs(self) -> dict[int, int]:
        return {b: lc.state.broker_epoch for b, lc in self.lifecycles.items()}

    def wait_unfenced(self, timeout: float = 30) -> dict[int, int]:
        """The broker epochs, once every broker is registered and unfenced."""
        wait_for(lambda: all(lc.state.broker_epoch >= 0 and not lc.state.fenced
                             for lc in self.lifecycles.values()), timeout, "every broker unfenced")
        return self.epochs

    def close(self) -> None:
        for lc in self.lifecycles.values():
            lc.stop()
        for t in self.threads:
            t.join(10)


def read_pty(master: int, done: Callable[[bytes], bool], timeout: float = 20) -> bytes:
    """What a process on the pseudo-terminal ``master`` printed, read until ``done(output)`` or the
    terminal closes or ``timeout`` passes."""
    import select

    seen = b""
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class ControllerProcesses:
    def __init__(self, root: Path, voters=(1, 2, 3), raft_only: bool = False, metrics: bool = False,
                 dynamic: bool = False, per_node=None, security=None, kafka_listener: Optional[str] = None,
                 **overrides: str):
        """``dynamic``: a dynamic quorum's controllers (KIP-853): controller.quorum.bootstrap.servers
        (every controller) instead of controller.quorum.voters; format them with ``format_dynamic``.
        ``per_node(i)``: more properties for controller i (its key store...); ``security``: the
        ClientSecurity the test's own clients use. ``kafka_listener``: the name of a second
        controller listener, speaking Kafka's protocol, on ``kafka_ports[i]``."""
        self.security = security
        self.root = root
        self.raft_only = raft_only  # run `controller start --raft-only` (the tests append raw records)
        self.voters = tuple(voters)
        self.ports = dict(zip(self.voters, free_ports(len(self.voters))))
        # metrics.listener ports, one per controller, when asked for
        self.metrics_ports = dict(zip(self.voters, free_ports(len(self.voters)))) if metrics else {}
        self.kafka_ports = dict(zip(self.voters, free_ports(len(self.voters)))) if kafka_listener else {}
        self.cluster_id = random_cluster_id()
        self.procs: dict[int, subprocess.Popen] = {}
        self._outputs: list = []
        self._run_starts: dict[int, int] = {}  # where each controller's latest run begins in its output
        voter_list = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        for i in self.voters:
            props = {
                "process.roles": "controller",
                "node.id": str(i),
                **({"controller.quorum.bootstrap.servers": self.bootstrap()} if dynamic
                   else {"controller.quorum.voters": voter_list}),
                "listeners": f"CONTROLLER://127.0.0.1:{self.ports[i]}" + (
                    f",{kafka_listener}://127.0.0.1:{self.kafka_ports[i]}" if kafka_listener else ""),
                "controller.listener.names": "CONTROLLER" + (f",{kafka_listener}" if kafka_listener else ""),
                "metadata.log.dir": str(self.log_dir(i)),
                **FAST_TIMEOUTS,
                **({"metrics.listener": f"127.0.0.1:{self.metrics_ports[i]}"} if metrics else {}),
                **overrides,
                **(per_node(i) if per_node else {}),
            }
            self.config(i).write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def config(self, i: int) -> Path:
        return self.root / f"controller-{i}.properties"

    def log_dir(self, i: int) -> Path:
        return self.root / f"data-{i}"

    def partition_dir(self, i: int) -> Path:
        return metadata_partition_dir(self.log_dir(i))

    def output(self, i: int) -> Path:
        """Everything controller ``i`` printed, over all of its runs (the file is appended to)."""
        return self.root / f"controller-{i}.log"

    def run_output(self, i: int) -> str:
        """What controller ``i`` printed since its latest start: a line its earlier run wrote is
        no evidence of what the restarted process did."""
        with open(self.output(i), "rb") as f:
            f.seek(self._run_starts.get(i, 0))
            return f.read().decode(errors="replace")

    def format(self, ids=None, cluster_id: Optional[str] = None) -> None:
        for i in ids or self.voters:
            format_storage(self.log_dir(i), cluster_id or self.cluster_id, i)

    def format_dynamic(self, how: dict[int, list[str]]) -> None:
        """``sparkraft storage format`` with each node's flags (``--standalone``, ...), as an operator would."""
        for i, flags in how.items():
            result = subprocess.run(sparkraft_cmd("storage", "format", "--config", str(self.config(i)),
                                                  "--cluster-id", self.cluster_id, *flags),
                                    capture_output=True, text=True, timeout=60)
            assert result.returncode == 0, result.stderr

    def directory_id(self, i: int) -> str:
        from quorum.log.meta_properties import read_meta_properties
        return read_meta_properties(self.log_dir(i)).directory_id

    def start(self, ids=None, env: Optional[dict] = None) -> None:
        """``env``: more environment for the processes (``SPARKRAFT_FAILPOINTS``...)."""
        for i in ids or self.voters:
            out = open(self.output(i), "ab")
            self._outputs.append(out)
            self._run_starts[i] = out.tell()
            argv = sparkraft_cmd("controller", "start", "--config", str(self.config(i)),
                                 *(["--raft-only"] if self.raft_only else []))
            self.procs[i] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env={**os.environ, **env} if env else None)

    def send(self, i: int, sig: int) -> None:
        self.procs[i].send_signal(sig)

    def stop(self, i: int, timeout: float = 15) -> int:
        """SIGTERM and wait; returns the exit code."""
        p = self.procs[i]
        p.send_signal(signal.SIGTERM)
        return p.wait(timeout)

    def kill(self, i: int) -> None:
        p = self.procs[i]
        p.kill()
        p.wait(10)

    def alive(self, i: int) -> bool:
        return i in self.procs and self.procs[i].poll() is None

    def bootstrap(self, ids=None) -> str:
        return ",".join(f"127.0.0.1:{self.ports[i]}" for i in ids or self.voters)

    def client(self, **kw):
        from quorum.rpc.raft_client import RaftClient

        kw.setdefault("timeout", 20)
        kw.setdefault("rpc_timeout", 1.0)
        kw.setdefault("security", self.security)
        return RaftClient(self.bootstrap(), **kw)

    def wait_leader(self, timeout: float = 20, exclude=(), ids=None):
        """QuorumInfo once a leader not in ``exclude`` answers DescribeQuorum."""
        from quorum.errors import SparkraftError

        with self.client(timeout=2) as c:
            def probe():
                try:
                    info = c.describe_quorum()
                except SparkraftError:
                    return None
                return info if info.leader_id not in exclude else None

            return wait_for(probe, timeout, f"a leader other than {list(exclude)}")

    def close(self) -> None:
        kill_all(self.procs.values(), self._outputs)

    def dump_outputs(self) -> str:
        parts = []
        for i in self.voters:
            path = self.output(i)
            if path.exists():
                parts.append(f"--- controller {i} ---\n" + path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)


class BrokerProcesses:
    """``sparkraft broker start`` processes for the quorum ``cp``: one properties file per broker
    (id -> rack, or None for no rack) with ``settings`` added, a log file each."""

    def __init__(self, root: Path, cp: "ControllerProcesses", brokers: dict, settings: dict):
        self.root = root
        self.brokers = brokers
        self.procs: dict[int, subprocess.Popen] = {}
        self.outputs: list = []
        self.ports: dict[int, int] = {}  # broker id -> its PLAINTEXT listener (Kafka clients)
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in cp.ports.items())
        for (broker_id, rack), port in zip(brokers.items(), free_ports(len(brokers))):
            props = {"process.roles": "broker", "node.id": broker_id, "controller.quorum.voters": voters,
                     "listeners": f"PLAINTEXT://127.0.0.1:{port}", **({"broker.rack": rack} if rack else {}),
                     "metadata.log.dir": root / f"b{broker_id}", **settings}
            self.ports[broker_id] = port
            (root / f"broker-{broker_id}.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()
                                                                         if v is not None))  # None: left out

    def start(self, broker_id: int) -> None:
        out = open(self.root / f"broker-{broker_id}.log", "ab")
        self.outputs.append(out)
        self.procs[broker_id] = subprocess.Popen(
            sparkraft_cmd("broker", "start", "--config", str(self.root / f"broker-{broker_id}.properties")),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self, broker_id: int, timeout: float = 30) -> int:
        """SIGTERM and wait; the exit code."""
        self.procs[broker_id].send_signal(signal.SIGTERM)
        return self.procs[broker_id].wait(timeout)

    def close(self) -> None:
        kill_all(self.procs.values(), self.outputs)

    def dump(self) -> str:
        return "\n".join(f"--- broker {b} ---\n" + (self.root / f"broker-{b}.log").read_text(errors="replace")[-3000:]
                         for b in self.brokers if (self.root / f"broker-{b}.log").exists())


@pytest.fixture
def controller_processes(tmp_path, request):
    made: list[ControllerProcesses] = []

    def make(**kw) -> ControllerProcesses:
        root = tmp_path / f"quorum{len(made)}"
        root.mkdir()
        cp = ControllerProcesses(root, **kw)
        made.append(cp)
        return cp

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for cp in made:
        cp.close()
        if failed or os.environ.get("SPARKRAFT_TEST_SHOW_OUTPUT"):
            print(cp.dump_outputs())


@pytest.fixture
def fixed_ports():
    """Held by the tests that listen on the walkthrough's fixed ports (the README's walkthrough, and
    ``sparkraft demo``, whose brokers take 9092-9094 when they are free): one such test at a time
    across xdist's workers, so neither takes a port the other just saw free."""
    import fcntl
    import tempfile

    with open(os.path.join(tempfile.gettempdir(), "sparkraft-tests-fixed-ports.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def pytest_configure(config):
    """Skips are held to tests/allowed_skips.toml where the run is reported (not on xdist's workers)."""
    from skip_policy import SkipPolicy, load_allowed

    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(SkipPolicy(load_allowed()), "sparkraft-skip-policy")


def pytest_collection_modifyitems(config, items):
    """The longest files first (tests/longest_first.py): xdist hands out whole files in this order."""
    from longest_first import order

    order(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)


@pytest.fixture(scope="session")
def spark():
    """One Spark session for every test that needs one (starting one takes 6-18 s here)."""
    from streaming.job import spark_session

    session = spark_session("sparkraft-tests")
    yield session
    session.stop()


def audit_entries(bootstrap: str, security=None) -> list:
    """The audit entries (AuditRecords) in the quorum's committed log, oldest first."""
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.metadata.records import decode_record
    from quorum.rpc.log_reader import MetadataLogReader

    with MetadataLogReader(bootstrap, security=security) as reader:
        return [m for r in reader.follow(0, until=reader.high_watermark(), wait_ms=0) if not r.control
                and isinstance(m := decode_record(r.data).message, pb.AuditRecord) and m.request]


def newest_cut_offset(warehouse) -> int:
    """The offset of the warehouse's newest cut; -1 while it has none (or is not there yet)."""
    from delta_tables.cut import latest_cut

    try:
        return latest_cut(str(warehouse)).offset
    except Exception:  # no cut yet
        return -1
