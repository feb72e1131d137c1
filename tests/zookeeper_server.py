"""A real ZooKeeper for the migration tests: Debian's ``zookeeper`` package (.ci/run installs it),
started standalone on 127.0.0.1 as its own process (bench/peers/zookeeper_server.py), so that a
test can pause it with SIGSTOP; and ``KafkaZkWriter``, which writes a ZooKeeper-mode Kafka
cluster's znodes the way Kafka 3.x's brokers and controller do (the JSON below follows Kafka's
ZkData, written out here independently of quorum/migration/znodes.py so that the tests check the
importer against Kafka's formats, not against itself)."""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal

from bench.peers.zookeeper_server import ZOOKEEPER_JAR, ZooKeeper


def available() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


class ZooKeeperServer(ZooKeeper):
    def __init__(self, root):
        super().__init__(root, heap="256m")

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def client(self):
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.connect, timeout=10)
        zk.start(20)
        return zk

    def reconnected(self, zk):
        """A new client in place of ``zk``, whose session a pause longer than its timeout may have
        ended (kazoo then fails every call made before it has a new session)."""
        zk.stop()
        zk.close()
        return self.client()

    def close(self) -> None:
        if self.process.alive():
            self.resume()
        self.process.kill()


def _j(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class KafkaZkWriter:
    """Writes what a ZooKeeper-mode Kafka cluster keeps in ZooKeeper (Kafka 3.x formats)."""

    def __init__(self, zk, cluster_id: str):
        self.zk = zk
        zk.ensure_path("/cluster")
        zk.create("/cluster/id", _j({"version": "1", "id": cluster_id}))
        zk.create("/controller_epoch", b"7")
        for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/brokers", "/config/users",
                     "/config/clients", "/config/ips", "/config/changes", "/admin/delete_topics",
                     "/kafka-acl/Topic", "/kafka-acl-changes", "/kafka-acl-extended/prefixed",
                     "/kafka-acl-extended-changes"):
            zk.ensure_path(path)

    def broker(self, broker_id: int, port: int, rack: str | None = None) -> None:
        self.zk.create(f"/brokers/ids/{broker_id}", _j({
            "features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"], "jmx_port": -1, "port": port, "host": "127.0.0.1",
            "version": 5, "timestamp": "1700000000000", **({"rack": rack} if rack else {})}))

    def topic(self, name: str, assignment: dict[int, list[int]], topic_id: str | None = None,
              leader_epoch: int = 0, state_writes: int = 1) -> None:
        """``state_writes``: how often the partition state was written (its znode version + 1)."""
        data = {"version": 3 if topic_id else 1, "partitions": {str(p): r for p, r in assignment.items()},
                "adding_replicas": {}, "removing_replicas": {}}
        if topic_id:
            data["topic_id"] = topic_id
        t = self.zk.transaction()
        t.create(f"/brokers/topics/{name}", _j(data))
        t.create(f"/brokers/topics/{name}/partitions")
        for p, replicas in assignment.items():
            t.create(f"/brokers/topics/{name}/partitions/{p}")
            t.create(f"/brokers/topics/{name}/partitions/{p}/state", self.state(replicas, leader_epoch))
        assert not [r for r in t.commit() if isinstance(r, Exception)]
        for p, replicas in assignment.items():
            for _ in range(state_writes - 1):
                self.zk.set(f"/brokers/topics/{name}/partitions/{p}/state", self.state(replicas, leader_epoch))

    @staticmethod
    def state(isr: list[int], leader_epoch: int) -> bytes:
        return _j({"controller_epoch": 7, "leader": isr[0], "version": 1, "leader_epoch": leader_epoch, "isr": isr})

    def config(self, entity_type: str, name: str, config: dict[str, str]) -> None:
        path = f"/config/{entity_type}/{name}"
        self.zk.ensure_path(path)
        self.zk.set(path, _j({"version": 1, "config": config}))

    def acl(self, resource_type: str, name: str, acls: list[dict], prefixed: bool = False) -> None:
        root = "/kafka-acl-extended/prefixed" if prefixed else "/kafka-acl"
        self.zk.ensure_path(f"{root}/{resource_type}")
        self.zk.create(f"{root}/{resource_type}/{name}", _j({"version": 1, "acls": acls}))

    def producer_id_block(self, broker_id: int, start: int, end: int) -> None:
        self.zk.create("/latest_producer_id_block", _j({"version": 1, "broker": broker_id,
                                                        "block_start": str(start), "block_end": str(end)}))


def scram_config(salt: bytes, stored_key: bytes, server_key: bytes, iterations: int) -> str:
    """Kafka's ScramCredentialUtils.credentialToString."""
    b64 = base64.b64encode
    return (f"salt={b64(salt).decode()},stored_key={b64(stored_key).decode()},"
            f"server_key={b64(server_key).decode()},iterations={iterations}")
