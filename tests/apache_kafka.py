"""Apache Kafka for real in the tests: its jars (resolved before the tests by
scripts/fetch_jars.py, never downloaded here), its command-line tools run as JVM processes, and a
Kafka node of its own (combined broker and controller, formatted with Kafka's own storage tool)
on 127.0.0.1. A test that needs them skips with one line where the jars are missing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/processes.py, where bench/ imports this module
from fetch_jars import default_root  # noqa: E402
from processes import kill_all  # noqa: E402

KAFKA = "kafka-4.4.0"  # scripts/maven/kafka-4.4.0.xml
OLD_TOOLS = ("kafka-tools-3.7.2", "kafka-tools-3.9.1")  # older clients' tools (scripts/maven/kafka-tools-*.xml)
TOOLS = {  # what Kafka's bin/*.sh scripts run
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
}


def jars(name: str = KAFKA) -> Optional[Path]:
    folder = default_root() / name
    return folder if (folder / ".resolved").exists() else None


def java(*args: str) -> list[str]:
    """A ``java`` command line with the flags the tests give every JVM (tests/conftest.py
    TEST_JVM_FLAGS; none where bench/ uses this module)."""
    return ["java", *os.environ.get("SPARKRAFT_TEST_JVM_FLAGS", "").split(), *args]


def jshell_flags() -> list[str]:
    """The same flags for jshell's own JVM (-J) and for the one that runs the snippets (-R)."""
    flags = os.environ.get("SPARKRAFT_TEST_JVM_FLAGS", "").split()
    return [f"-J{f}" for f in flags] + [f"-R{f}" for f in flags]


def need_kafka(name: str = KAFKA) -> Path:
    """The folder of Kafka jars ``name``, or skip the test with one line."""
    folder = jars(name)
    if folder is None:
        pytest.skip(f"Apache Kafka's jars are not in {default_root() / name} (python scripts/fetch_jars.py; "
                    f".ci/run does it)")
    return folder


def kafka_tool(tool: str, *args: str, timeout: float = 120, kafka: str = KAFKA) -> subprocess.CompletedProcess:
    """Kafka's ``bin/<tool>.sh ARGS``, as a JVM process from the jars (``kafka``: which release's)."""
    folder = need_kafka(kafka)
    return subprocess.run(java("-Xmx256m", "-cp", f"{folder}/*", TOOLS[tool], *args), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def until_ok(*args: str) -> str:
    """A Kafka tool's output, the tool retried while the cluster is still starting (its listener not
    open yet, its metadata not propagated)."""
    import time

    for _ in range(60):
        out = kafka_tool(*args)
        if out.returncode == 0:
            return out.stdout
        time.sleep(1)
    raise AssertionError(f"{args[0]} {' '.join(args[1:4])} kept failing: {out.stderr[-2000:]}")


def jshell(script: str, tmp: Path) -> str:
    """What a jshell ``script`` prints with Kafka's jars on its class path: Kafka's own definitions
    (config keys, record types) asked of Kafka itself. Skips the test without a JDK's jshell."""
    import shutil

    folder = need_kafka()
    if shutil.which("jshell") is None:
        pytest.skip("jshell (a JDK's) is not installed: .ci/run installs openjdk-17-jdk-headless")
    path = tmp / "script.jsh"
    path.write_text(script.rstrip() + "\n/exit\n")
    class_path = ":".join(str(p) for p in sorted(folder.glob("*.jar")))
    proc = subprocess.run(["jshell", *jshell_flags(), "--class-path", class_path, str(path)], capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def without_jvm_noise(stderr: str) -> list[str]:
    """Kafka's tools' stderr without SLF4J's (4.x) or log4j's (3.x) note that no logging backend
    is set up."""
    return [line for line in stderr.splitlines() if not line.startswith(("SLF4J", "log4j:WARN"))]


class KafkaNode:
    """One Apache Kafka node in combined mode (broker and controller), formatted with Kafka's
    storage tool as a standalone dynamic quorum, listening on 127.0.0.1."""

    def __init__(self, root: Path, broker_port: int, controller_port: int, node_id: int = 1,
                 extra: Optional[dict] = None, heap: str = "512m"):
        """``extra``: added to the node's configuration (an authorizer, say; a key given None is
        left out); ``heap``: the JVM's -Xmx."""
        self.root, self.node_id, self.heap = root, node_id, heap
        self.broker_port, self.controller_port = broker_port, controller_port
        self.config = root / "server.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in {
            "process.roles": "broker,controller", "node.id": node_id,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": root / "data", "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1, **(extra or {}),
        }.items() if v is not None))
        self.proc: Optional[subprocess.Popen] = None

    @property
    def bootstrap_server(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def bootstrap_controller(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    def format(self, cluster_id: str, release_version: Optional[str] = None, standalone: bool = True) -> None:
        """Kafka's storage tool's format, at ``release_version`` (e.g. 3.9-IV0) or Kafka's newest;
        ``standalone``: a dynamic quorum of this node (else the static ``controller.quorum.voters``)."""
        out = kafka_tool("kafka-storage", "format", f"--cluster-id={cluster_id}", "-c", str(self.config),
                         *(("--standalone",) if standalone else ()),
                         *(("--release-version", release_version) if release_version else ()))
        assert out.returncode == 0, out.stderr

    def start(self) -> None:
        folder = need_kafka()
        self._out = open(self.root / "kafka.log", "ab")
        self.proc = subprocess.Popen(java(f"-Xmx{self.heap}", "-cp", f"{folder}/*", "kafka.Kafka", str(self.config)),
                                     stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ})

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc is not None:
            self._out.close()

    def log(self) -> str:
        return (self.root / "kafka.log").read_text(errors="replace")


class KafkaQuorum:
    """Apache Kafka as people run it: three controllers (``process.roles=controller``, a static voter
    set) and brokers 101, 102..., each a JVM process of its own on 127.0.0.1, formatted with Kafka's
    storage tool. ``extra`` is added to every node's configuration."""

    CONTROLLERS = (1, 2, 3)
    BROKER = 101

    def __init__(self, root: Path, ports: list[int], extra: Optional[dict] = None, brokers: int = 1):
        """``ports``: three for the controllers, then one for each broker."""
        self.root = root
        self.controller_ports = dict(zip(self.CONTROLLERS, ports[:3]))
        self.broker_ports = {self.BROKER + i: ports[3 + i] for i in range(brokers)}
        self.broker_port = ports[3]
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.controller_ports.items())
        common = {"controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
                  "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                  "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
                  "transaction.state.log.min.isr": 1, **(extra or {})}
        self.configs: dict[int, Path] = {}
        for node_id, port in self.controller_ports.items():
            self._write(node_id, {"process.roles": "controller", "node.id": node_id,
                                  "listeners": f"CONTROLLER://127.0.0.1:{port}", **common})
        for node_id, port in self.broker_ports.items():
            self._write(node_id, {"process.roles": "broker", "node.id": node_id,
                                  "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                  "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}", **common})
        self.procs: dict[int, subprocess.Popen] = {}

    def _write(self, node_id: int, config: dict) -> None:
        path = self.root / f"node-{node_id}.properties"
        config = {**config, "log.dirs": self.root / f"data-{node_id}"}
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        self.configs[node_id] = path

    @property
    def bootstrap_server(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def bootstrap_controller(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.controller_ports.values())

    def metadata_dir(self, node_id: int) -> Path:
        return self.root / f"data-{node_id}" / "__cluster_metadata-0"

    def format(self, cluster_id: str) -> None:
        for node_id, config in self.configs.items():
            out = kafka_tool("kafka-storage", "format", f"--cluster-id={cluster_id}", "-c", str(config))
            assert out.returncode == 0, out.stderr

    def start(self, node_id: int) -> None:
        folder = need_kafka()
        out = open(self.root / f"node-{node_id}.log", "ab")
        self.procs[node_id] = subprocess.Popen(
            java("-Xmx384m", "-cp", f"{folder}/*", "kafka.Kafka", str(self.configs[node_id])),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()

    def start_all(self) -> None:
        for node_id in self.configs:
            self.start(node_id)

    def kill(self, node_id: int) -> None:
        proc = self.procs.pop(node_id)
        proc.kill()
        proc.wait(30)

    def stop_all(self) -> None:
        for node_id in list(self.procs):
            proc = self.procs.pop(node_id)
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def leader(self) -> Optional[int]:
        """The quorum's leader, as kafka-metadata-quorum says (None while there is none)."""
        import re

        out = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", self.bootstrap_controller, "describe",
                         "--status")
        m = re.search(r"LeaderId:\s+(\d+)", out.stdout)
        return int(m.group(1)) if out.returncode == 0 and m else None


_DESCRIBE = """
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaFilter;
var props = new Properties();
props.put("%(key)s", "%(bootstrap)s");
var admin = Admin.create(props);
for (var b : admin.describeAcls(AclBindingFilter.ANY).values().get()) System.out.println("ACL\\t" + b.entry().principal() + "\\t" + b.entry().host() + "\\t" + b.entry().operation() + "\\t" + b.entry().permissionType() + "\\t" + b.pattern().resourceType() + "\\t" + b.pattern().name() + "\\t" + b.pattern().patternType());
for (var e : admin.describeUserScramCredentials().all().get().entrySet()) for (var c : e.getValue().credentialInfos()) System.out.println("USER\\t" + e.getKey() + "\\t" + c.mechanism().mechanismName() + "\\t" + c.iterations());
for (var e : admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get().entrySet()) for (var q : e.getValue().entrySet()) System.out.println("QUOTA\\t" + new TreeMap<>(e.getKey().entries()) + "\\t" + q.getKey() + "\\t" + q.getValue());
for (var e : admin.describeFeatures().featureMetadata().get().finalizedFeatures().entrySet()) System.out.println("FEATURE\\t" + e.getKey() + "\\t" + e.getValue().maxVersionLevel());
var nodes = admin.describeCluster(new DescribeClusterOptions().includeFencedBrokers(true)).nodes().get();
for (var n : nodes) System.out.println("BROKER\\t" + n.id() + "\\t" + n.isFenced() + "\\t" + n.host() + "\\t" + n.port() + "\\t" + n.rack());
var resources = new ArrayList<ConfigResource>(); resources.add(new ConfigResource(ConfigResource.Type.BROKER, ""));
for (var n : nodes) resources.add(new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(n.id())));
for (var e : admin.describeConfigs(resources).all().get().entrySet()) for (var c : e.getValue().entries()) if (c.source() == (e.getKey().name().isEmpty() ? ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG : ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG)) System.out.println("CONFIG\\t" + e.getKey().name() + "\\t" + c.name() + "\\t" + c.value());
admin.close();
"""


def admin_describe(tmp: Path, bootstrap_server: str = "", bootstrap_controller: str = "") -> dict[str, set]:
    """What Kafka's own AdminClient describes beyond topics, as sets of tuples: ``acls``
    (principal, host, operation, permission, resource type, name, pattern type), ``users`` (name,
    mechanism, iterations), ``quotas`` (entity, key, value), ``features`` (name, finalized level),
    ``brokers`` (id, fenced, host, port, rack), ``configs`` (broker id or "" for the cluster
    default, name, value: dynamic broker configs). A sensitive config's value is None, as Kafka
    hides it."""
    key, bootstrap = (("bootstrap.controllers", bootstrap_controller) if bootstrap_controller
                      else ("bootstrap.servers", bootstrap_server))
    out: dict[str, set] = {"acls": set(), "users": set(), "quotas": set(), "features": set(), "brokers": set(),
                           "configs": set()}
    names = {"ACL": "acls", "USER": "users", "QUOTA": "quotas", "FEATURE": "features", "BROKER": "brokers",
             "CONFIG": "configs"}
    for line in jshell(_DESCRIBE % {"key": key, "bootstrap": bootstrap}, tmp).splitlines():
        kind, _, rest = line.partition("\t")
        if kind in names:
            out[names[kind]].add(tuple(None if f == "null" else f for f in rest.split("\t")))
    return out


SNAPSHOT_WRITER = Path(__file__).resolve().parent.parent / "bench" / "kafka" / "write_snapshot.jsh"


def write_kafka_snapshot(directory: Path, topics: int, per_topic: int, brokers: int, offset: int,
                         heap: str = "2g") -> tuple[Path, str]:
    """A ``__cluster_metadata`` snapshot written by Kafka's own image and snapshot writer (the jshell
    program bench/kafka/write_snapshot.jsh) into ``directory``: its path, and what the program said."""
    import re
    import shutil

    folder = need_kafka()
    if shutil.which("jshell") is None:
        pytest.skip("jshell (a JDK's) is not installed: .ci/run installs openjdk-17-jdk-headless")
    props = {"dir": directory, "topics": topics, "per_topic": per_topic, "brokers": brokers, "offset": offset}
    class_path = ":".join(str(p) for p in sorted(folder.glob("*.jar")))
    done = subprocess.run(["jshell", *jshell_flags(), f"-R-Xmx{heap}", *(f"-R-Dsparkraft.{k}={v}" for k, v in props.items()),
                           "--class-path", class_path, str(SNAPSHOT_WRITER)],
                          capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL)
    wrote = re.search(r"WROTE .*", done.stdout)
    assert wrote is not None, f"Kafka's snapshot writer failed: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    (path,) = directory.glob("*.checkpoint")
    return path, wrote.group(0)


def restored_controller(root: Path, port: int, snapshot: Path, heap: str = "512m") -> KafkaNode:
    """A controller-only Kafka node (one static voter) whose log is restored from ``snapshot``: formatted,
    started once until it leads, stopped, then the snapshot put in its metadata directory, where
    Kafka takes it, at the next start, as the newest state of its log (the snapshot ends past
    everything the log holds). Returned stopped. Its broker session timeout is an hour, so the
    brokers the snapshot registers, which never heartbeat, stay unfenced while a test runs."""
    import time

    node = KafkaNode(root, 0, port, heap=heap, extra={
        "process.roles": "controller", "listeners": f"CONTROLLER://127.0.0.1:{port}", "advertised.listeners": None,
        "controller.quorum.bootstrap.servers": None, "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT", "broker.session.timeout.ms": 3_600_000})
    from quorum.uuids import random_uuid

    node.format(random_uuid(), standalone=False)
    node.start()
    try:
        deadline = time.monotonic() + 120
        while "LeaderId:" not in kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", node.bootstrap_controller,
                                            "describe", "--status").stdout:
            assert time.monotonic() < deadline and node.proc.poll() is None, node.log()[-3000:]
            time.sleep(1)
    finally:
        node.stop()
    import shutil

    shutil.copy(snapshot, root / "data" / "__cluster_metadata-0" / snapshot.name)
    return node


LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.noisy.name = org.apache.kafka.common.config
logger.noisy.level = warn
"""


# Kafka 3.x's brokers log through log4j 1 (reload4j): the same lines to stdout
LOG4J1 = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.common.config=WARN
"""


class KafkaBrokers:
    """Apache Kafka brokers (``process.roles=broker``), one JVM each on 127.0.0.1, whose quorum is
    sparkraft's controllers: ``voters`` names each controller's Kafka listener, as
    ``controller.quorum.voters`` (``id@host:port,...``, a static quorum) or as
    ``controller.quorum.bootstrap.servers`` (``host:port,...``, a dynamic one); ``listener`` is that
    listener's name. Formatted with Kafka's storage tool."""

    def __init__(self, root: Path, cluster_id: str, voters: str, listener: str, ports: dict[int, int],
                 extra: Optional[dict] = None, heap: str = "384m"):
        """``ports``: broker id -> its PLAINTEXT port; ``extra``: added to every broker's configuration."""
        self.root, self.cluster_id, self.heap, self.ports = root, cluster_id, heap, ports
        (root / "log4j2.properties").write_text(LOG4J2)
        (root / "log4j.properties").write_text(LOG4J1)
        self.procs: dict[int, subprocess.Popen] = {}
        self._outs: list = []
        for broker_id, port in ports.items():
            config = {
                "process.roles": "broker", "node.id": broker_id,
                ("controller.quorum.voters" if "@" in voters else "controller.quorum.bootstrap.servers"): voters,
                "controller.listener.names": listener,
                "listener.security.protocol.map": f"{listener}:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "listeners": f"PLAINTEXT://127.0.0.1:{port}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": root / f"data-{broker_id}", "broker.heartbeat.interval.ms": 500,
                "offsets.topic.num.partitions": 6, "offsets.topic.replication.factor": min(3, len(ports)),
                "transaction.state.log.replication.factor": min(3, len(ports)), "transaction.state.log.min.isr": 1,
                "group.initial.rebalance.delay.ms": 0, "num.network.threads": 2, "num.io.threads": 2,
                "background.threads": 2, "replica.lag.time.max.ms": 5000, **(extra or {}),
            }
            self.config(broker_id).write_text("".join(f"{k}={v}\n" for k, v in config.items() if v is not None))

    def config(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}.properties"

    @property
    def bootstrap_server(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def format(self, release: str = KAFKA, only: Optional[list[int]] = None) -> None:
        """Each broker's log directories, with Kafka's storage tool of ``release`` (a jar set's name)."""
        for broker_id in only or self.ports:
            out = kafka_tool("kafka-storage", "format", f"--cluster-id={self.cluster_id}", "-c",
                             str(self.config(broker_id)), kafka=release)
            assert out.returncode == 0, out.stderr

    def start(self, broker_id: int, release: str = KAFKA) -> None:
        """The broker's JVM, of Kafka ``release`` (a jar set's name: kafka-4.4.0, kafka-3.9.1, kafka-3.7.2)."""
        folder = need_kafka(release)
        out = open(self.root / f"broker-{broker_id}.log", "ab")
        self._outs.append(out)
        logging = f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}" if release == KAFKA \
            else f"-Dlog4j.configuration=file:{self.root / 'log4j.properties'}"
        self.procs[broker_id] = subprocess.Popen(
            java(f"-Xmx{self.heap}", logging, "-cp", f"{folder}/*", "kafka.Kafka", str(self.config(broker_id))),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self, broker_id: int, timeout: float = 60) -> int:
        """SIGTERM (a controlled shutdown) and wait; the exit code (143 after a clean shutdown, as
        the JVM exits on SIGTERM)."""
        p = self.procs[broker_id]
        p.terminate()
        return p.wait(timeout)

    def kill(self, broker_id: int) -> None:
        p = self.procs[broker_id]
        p.kill()
        p.wait(30)

    def log(self, broker_id: int) -> str:
        path = self.root / f"broker-{broker_id}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def dump(self) -> str:
        return "\n".join(f"--- Kafka broker {b} ---\n" + "\n".join(
            line for line in self.log(b).splitlines() if " WARN " in line or " ERROR " in line)[-3000:]
            for b in self.ports)

    def close(self) -> None:
        kill_all(self.procs.values(), self._outs, wait_s=30)


JAVA_CLIENTS = Path(__file__).resolve().parent / "java" / "NumberedClients.java"


def java_clients(*args: str, stdout, env: Optional[dict] = None) -> subprocess.Popen:
    """tests/java/NumberedClients.java, run from source with Kafka's jars (its lines to ``stdout``)."""
    folder = need_kafka()
    return subprocess.Popen(java("-Xmx256m", "-cp", f"{folder}/*", str(JAVA_CLIENTS), *args), stdout=stdout,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
