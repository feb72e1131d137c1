"""How the streaming source reaches a quorum: its options (bootstrap, cluster id, security, whose
quorum), the committed log's reader for sparkraft's controllers or Apache Kafka's, and the cluster id."""
from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class QuorumOptions:
    """How a reader reaches the quorum: the options both readers share (picklable: workers get it)."""

    bootstrap: str
    cluster_id: str
    security: object  # ClientSecurity
    protocol: str = "sparkraft"  # whose quorum: "sparkraft" or "kafka" (Apache Kafka's controllers)

    @classmethod
    def parse(cls, options: dict) -> "QuorumOptions":
        bootstrap = options.get("bootstrap.controllers") or options.get("bootstrap.controller")
        if not bootstrap:
            raise ValueError("the sparkraft source needs option bootstrap.controllers=HOST:PORT[,HOST:PORT...]")
        from quorum.security.client import CLIENT_KEYS, ClientSecurity

        # security.protocol, ssl.*, sasl.*: Kafka's client keys, as options (Spark redacts the password)
        security = ClientSecurity.from_properties({k: str(v) for k, v in options.items() if k in CLIENT_KEYS},
                                                  source="the sparkraft source's options")
        protocol = options.get("quorum.protocol", "sparkraft")
        if protocol not in PROTOCOLS:
            raise ValueError(f"quorum.protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        return cls(bootstrap, options.get("cluster.id", ""), security, protocol)

    def reader(self, timeout: float):
        return log_reader(self.protocol, self.bootstrap, self.cluster_id, timeout, self.security)


PROTOCOLS = ("sparkraft", "kafka")


def log_reader(protocol: str, bootstrap: str, cluster_id: str = "", timeout: float = 15.0, security=None):
    """The committed log's reader for a quorum of ``protocol``: sparkraft's controllers (gRPC and the
    wire), or Apache Kafka's (Kafka's Fetch as an observer, quorum/kafka_import/reader.py). Both
    give the same records (sparkraft's frames), chunks and snapshots."""
    if protocol == "kafka":
        from quorum.kafka_import.reader import KafkaMetadataLogReader

        return KafkaMetadataLogReader(bootstrap, cluster_id=cluster_id, timeout=timeout, security=security)
    from quorum.rpc.log_reader import MetadataLogReader

    # Kafka's records, one per offset: a partition change block becomes the changes it stands for
    return MetadataLogReader(bootstrap, cluster_id=cluster_id, timeout=timeout, security=security, unblock=True)


def cluster_id_of(protocol: str, bootstrap: str, timeout: float, security=None) -> str:
    """The quorum's cluster id (DescribeQuorum of sparkraft's; DescribeCluster of Kafka's controllers)."""
    if protocol == "kafka":
        with log_reader(protocol, bootstrap, timeout=timeout, security=security) as reader:
            reader.discover(time.monotonic() + timeout)
            return reader.cluster_id
    from quorum.rpc.raft_client import RaftClient

    with RaftClient(bootstrap, timeout=timeout, security=security) as client:
        return client.describe_quorum().cluster_id
