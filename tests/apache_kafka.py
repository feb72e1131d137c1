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
from fetch_jars import default_root  # noqa: E402

KAFKA = "kafka-4.4.0"  # scripts/maven/kafka-4.4.0.xml
TOOLS = {  # what Kafka's bin/*.sh scripts run
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-storage": "kafka.tools.StorageTool",
}


def jars(name: str = KAFKA) -> Optional[Path]:
    folder = default_root() / name
    return folder if (folder / ".resolved").exists() else None


def need_kafka() -> Path:
    """The Kafka jars' folder, or skip the test with one line."""
    folder = jars()
    if folder is None:
        pytest.skip(f"Apache Kafka's jars are not in {default_root() / KAFKA} (python scripts/fetch_jars.py; "
                    f".ci/run does it)")
    return folder


def kafka_tool(tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Kafka's ``bin/<tool>.sh ARGS``, as a JVM process from the jars."""
    folder = need_kafka()
    return subprocess.run(["java", "-Xmx256m", "-cp", f"{folder}/*", TOOLS[tool], *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


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
    proc = subprocess.run(["jshell", "--class-path", class_path, str(path)], capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def without_jvm_noise(stderr: str) -> list[str]:
    """Kafka's tools' stderr without SLF4J's note that no logging backend is on the class path."""
    return [line for line in stderr.splitlines() if not line.startswith("SLF4J")]


class KafkaNode:
    """One Apache Kafka node in combined mode (broker and controller), formatted with Kafka's
    storage tool as a standalone dynamic quorum, listening on 127.0.0.1."""

    def __init__(self, root: Path, broker_port: int, controller_port: int, node_id: int = 1):
        self.root, self.node_id = root, node_id
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
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        }.items()))
        self.proc: Optional[subprocess.Popen] = None

    @property
    def bootstrap_server(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def bootstrap_controller(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    def format(self, cluster_id: str) -> None:
        out = kafka_tool("kafka-storage", "format", "-t", cluster_id, "-c", str(self.config), "--standalone")
        assert out.returncode == 0, out.stderr

    def start(self) -> None:
        folder = need_kafka()
        self._out = open(self.root / "kafka.log", "ab")
        self.proc = subprocess.Popen(["java", "-Xmx512m", "-cp", f"{folder}/*", "kafka.Kafka", str(self.config)],
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
