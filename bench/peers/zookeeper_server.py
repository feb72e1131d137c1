"""A real ZooKeeper (Debian's ``zookeeper`` package), started standalone on 127.0.0.1 with a data
directory of its own, for the migration benchmark and tests (tests/zookeeper_server.py); and a
ZooKeeper-mode Kafka cluster of any size written into it in Kafka's formats (pipelined creates:
200,000 partitions are ~400,000 znodes)."""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from bench.harness.procs import ChildProcess, free_ports

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
WINDOW = 4000  # creates in flight


class ZooKeeper:
    def __init__(self, work_dir: Path, heap: str = "2g"):
        work_dir.mkdir(parents=True, exist_ok=True)
        if not ZOOKEEPER_JAR.exists():
            raise RuntimeError("needs Debian's zookeeper package: apt-get install zookeeper")
        self.port = free_ports(1)[0]
        cfg = work_dir / "zoo.cfg"
        # forceSync=no: populating a cluster is set-up, not what is measured (the import only reads)
        cfg.write_text(f"tickTime=2000\ndataDir={work_dir / 'data'}\nclientPort={self.port}\n"
                       "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nforceSync=no\n"
                       "4lw.commands.whitelist=ruok\njute.maxbuffer=4194304\n")
        self.process = ChildProcess("zookeeper", ["java", f"-Xmx{heap}", "-Djute.maxbuffer=4194304", "-cp",
                                                  str(ZOOKEEPER_JAR), "org.apache.zookeeper.server.ZooKeeperServerMain",
                                                  str(cfg)], work_dir / "zookeeper.log").start()
        deadline = time.monotonic() + 60
        while not self._ok():
            if not self.process.alive() or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"ZooKeeper did not start: {self.process.log_tail(5)}")
            time.sleep(0.2)

    def _ok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.stop(timeout=10)


def _j(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def populate(zk, cluster_id: str, topics: int, partitions_per_topic: int, brokers: int, progress) -> int:
    """A ZooKeeper-mode cluster (Kafka 3.x formats): ``brokers`` brokers, ``topics`` topics of
    ``partitions_per_topic`` partitions, RF 3, one config per topic; the znodes written."""
    for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/changes", "/cluster"):
        zk.ensure_path(path)
    zk.create("/cluster/id", _j({"version": "1", "id": cluster_id}))
    zk.create("/controller_epoch", b"1")
    for b in range(1, brokers + 1):
        zk.create(f"/brokers/ids/{b}", _j({
            "features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://127.0.0.1:{9000 + b}"], "jmx_port": -1, "port": 9000 + b,
            "host": "127.0.0.1", "version": 5, "timestamp": "1700000000000", "rack": f"rack-{b % 3}"}))
    pending, written, started = [], 0, time.monotonic()

    def create(path: str, data: bytes = b"") -> None:
        nonlocal written
        pending.append(zk.create_async(path, data))
        if len(pending) >= WINDOW:
            for p in pending:
                p.get()
            written += len(pending)
            pending.clear()

    for t in range(topics):
        name = f"t{t:06d}"
        assignment = {p: [1 + (t + p + k) % brokers for k in range(3)] for p in range(partitions_per_topic)}
        topic_id = f"T{t:07d}" + "A" * 14
        # one session's requests are applied in order: a partition's znode before its state's
        zk.create(f"/brokers/topics/{name}", _j({"version": 3, "topic_id": topic_id, "adding_replicas": {},
                                                 "removing_replicas": {},
                                                 "partitions": {str(p): r for p, r in assignment.items()}}))
        zk.create(f"/brokers/topics/{name}/partitions")
        for p, replicas in assignment.items():
            create(f"/brokers/topics/{name}/partitions/{p}")
            create(f"/brokers/topics/{name}/partitions/{p}/state",
                   _j({"controller_epoch": 1, "leader": replicas[0], "version": 1, "leader_epoch": 0,
                       "isr": replicas}))
        create(f"/config/topics/{name}", _j({"version": 1, "config": {"retention.ms": str(3_600_000 + t)}}))
        if t % 200 == 199:
            progress.line(f"  ZooKeeper: {t + 1:,} / {topics:,} topics written "
                          f"({written / max(time.monotonic() - started, 1e-9):,.0f} znodes/s)")
    for p in pending:
        p.get()
    return written + len(pending)
