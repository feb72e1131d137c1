"""The demo's cluster in one process (``sparkraft demo``, demo.py): the state its steps share
(:class:`Demo`: where it keeps its storage, its controllers, brokers and clients, and with
``--secure`` the throwaway CA and each participant's TLS settings) and its brokers
(:class:`DemoBroker`: a broker's image, registration, heartbeats and Kafka listener, as
``sparkraft broker start`` runs them, on ports of its own)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

VOTERS = (1, 2, 3)
SECURE_MAPPING_RULES = "RULE:^CN=(.*?),.*$/$1/,DEFAULT"  # CN=admin,O=... -> User:admin


@dataclass
class Demo:
    """What the steps share."""

    root: Path
    kept: bool = True  # False: root is a temporary directory, removed when the demo ends
    out: Callable[[str], None] = print
    cluster_id: str = ""
    nodes: dict = field(default_factory=dict)  # node id -> ControllerNode
    leader_id: Optional[int] = None
    client: Optional[object] = None  # a ControllerClient
    brokers: dict = field(default_factory=dict)  # broker id -> DemoBroker
    spark: Optional[object] = None  # the SparkSession of the streaming step
    ca: Optional[object] = None  # --secure: the ThrowawayCa whose certificates everyone uses

    @property
    def secure(self) -> bool:
        return self.ca is not None

    def client_security(self, cn: str):
        """How ``CN=cn`` connects: mutual TLS with its own certificate (--secure), else PLAINTEXT."""
        from quorum.security.client import PLAINTEXT, ClientSecurity

        if self.ca is None:
            return PLAINTEXT
        return ClientSecurity("SSL", str(self.ca.truststore), str(self.ca.keystore(cn)))

    def node_security(self, node_id: int):
        from quorum.security.authorizer import Authorizer
        from quorum.security.node_security import PLAINTEXT_NODE, NodeSecurity
        from quorum.security.principal import PrincipalMapper
        from quorum.security.sasl_server import ScramAuthenticator
        from quorum.security.tls import ServerTls

        if self.ca is None:
            return PLAINTEXT_NODE
        cn = f"controller-{node_id}"
        return NodeSecurity(tls=ServerTls(str(self.ca.keystore(cn)), str(self.ca.truststore), "required"),
                            mapper=PrincipalMapper(SECURE_MAPPING_RULES), authorizer=Authorizer({"User:admin"}),
                            client=self.client_security(cn), scram=ScramAuthenticator())

    def broker_security(self, broker_id: int):
        """A broker's Kafka listener's security: --secure, mutual TLS with its own certificate and
        the StandardAuthorizer (User:admin a super user), else PLAINTEXT."""
        from quorum.security.authorizer import Authorizer
        from quorum.security.node_security import PLAINTEXT_NODE, NodeSecurity
        from quorum.security.principal import PrincipalMapper
        from quorum.security.tls import ServerTls

        if self.ca is None:
            return PLAINTEXT_NODE
        cn = f"broker-{broker_id}"
        return NodeSecurity(tls=ServerTls(str(self.ca.keystore(cn)), str(self.ca.truststore), "required"),
                            mapper=PrincipalMapper(SECURE_MAPPING_RULES), authorizer=Authorizer({"User:admin"}),
                            client=self.client_security(cn))

    def kafka_client_config(self) -> dict:
        """librdkafka's settings to reach a broker's Kafka listener: --secure, TLS as User:admin."""
        if self.ca is None:
            return {}
        admin = str(self.ca.keystore("admin"))
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca.truststore),
                "ssl.certificate.location": admin, "ssl.key.location": admin}

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values())

    def node_dir(self, node_id: int) -> Path:
        return self.root / f"controller-{node_id}"


def _incarnation_id(cluster_id: str, broker_id: int) -> str:
    """Stable per demo directory, so a second run re-registers the same incarnation (no duplicate)."""
    import base64
    import hashlib

    digest = hashlib.sha256(f"{cluster_id}/{broker_id}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class DemoBroker:
    """One broker as ``sparkraft broker start`` runs it, on threads of this process: its own
    metadata image (from its cache in DIR/broker-<id>, else the log) following the log, and the
    lifecycle (register, heartbeat with the image's offset, controlled shutdown at the end)."""

    def __init__(self, demo: Demo, broker_id: int, rack: str, bootstrap_source=None):
        from quorum.broker.lifecycle import BrokerLifecycle
        from quorum.broker.metadata_client import BrokerMetadataClient
        from quorum.controller import api

        self.broker_id = broker_id
        from quorum.rpc.controller_client import ControllerClient

        security = demo.client_security(f"broker-{broker_id}")  # --secure: its own principal, User:broker-N
        self.metadata = BrokerMetadataClient(demo.bootstrap, demo.cluster_id, demo.root / f"broker-{broker_id}",
                                             bootstrap_source=bootstrap_source, fetch_wait_ms=200, security=security)
        self.client = ControllerClient(demo.bootstrap, security=security)
        self.port = _free_or_any(9092 + broker_id - 101)
        # --secure: its Kafka listener is SSL with mutual TLS, and registered as such
        self.listener = "SSL" if demo.secure else "PLAINTEXT"
        endpoint = api.BrokerEndpoint(self.listener, "127.0.0.1", self.port, self.listener)
        self.demo = demo
        self.kafka = None  # its Kafka listener, once unfenced (start_kafka)
        self.lifecycle = BrokerLifecycle(self.client, broker_id, demo.cluster_id,
                                         _incarnation_id(demo.cluster_id, broker_id), (endpoint,), rack,
                                         heartbeat_interval_ms=500,
                                         offset_source=lambda: self.metadata.applied_offset)
        self.thread = threading.Thread(target=self.lifecycle.run, name=f"broker-{broker_id}", daemon=True)

    def start(self) -> None:
        self.metadata.start()
        self.thread.start()

    def start_kafka(self) -> None:
        """Answer Kafka clients on its endpoint, as ``sparkraft broker start`` does: PLAINTEXT, or
        with --secure SSL with mutual TLS and the broker's own authorizer over its image's ACLs."""
        from quorum.kafka.apis import KafkaContext
        from quorum.kafka.server import KafkaListener

        security = self.demo.broker_security(self.broker_id)
        ctx = KafkaContext(self.broker_id, self.demo.cluster_id, self.listener, lambda: self.metadata.image,
                           self.client, self.metadata.wait_for, security=security)
        ssl_context = security.tls.wire_context() if security.tls is not None else None
        self.kafka = KafkaListener(ctx, "127.0.0.1", self.port, ssl_context=ssl_context).start()

    def stop(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        self.lifecycle.stop()
        self.thread.join(5)
        self.lifecycle.controlled_shutdown(timeout=5)
        self.metadata.stop(save=True)
        self.client.close()


def _free_or_any(port: int) -> int:
    """``port`` if nothing listens there on 127.0.0.1, else a free one."""
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
