"""A node's configuration: Kafka's key names (DESIGN §8), parsed once into a typed NodeConfig.

``KEYS`` is the single table of known keys (type, default, check, doc). As in Kafka, an unknown key
only gets a warning, while a known key with a bad value, or a combination that cannot work, raises
ConfigError with one line naming the key, the value and what was expected.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from quorum.config_values import (  # noqa: F401  (HostPort, parse_host_port: imported from here too)
    SECURITY_PROTOCOLS,
    TLS_PROTOCOLS,
    HostPort,
    _bool,
    _client_auth,
    _host_port,
    _host_ports,
    _int,
    _listener_names,
    _listeners,
    _mapping_rules,
    _non_empty,
    _pem,
    _per_ip_overrides,
    _principal_template,
    _principals,
    _protocol_map,
    _roles,
    _voters,
    _zk_connect,
    parse_host_port,
)
from quorum.connection_limits import DEFAULT_LIMITS, ConnectionLimits
from quorum.controller.settings import ControllerSettings
from quorum.properties import parse_properties
from quorum.raft.settings import RaftSettings
from quorum.security.authorizer import Authorizer
from quorum.security.client import ClientSecurity
from quorum.security.node_security import DEFAULT_BROKER_PRINCIPAL, DEFAULT_VOTER_PRINCIPAL, NodeSecurity
from quorum.security.principal import PrincipalMapper
from quorum.security.sasl_server import DEFAULT_LIFETIME_MS, SaslLogin, ScramAuthenticator
from quorum.security.tls import ServerTls

log = logging.getLogger(__name__)

UNBOUNDED_BYTES = 2**62  # queued.max.request.bytes=-1


class ConfigError(Exception):
    """A config file that is missing, unreadable or holds a value sparkraft cannot run with."""


# --- the table of known keys -----------------------------------------------------------------

REQUIRED = object()  # default of a key that has no default


# Where a key's name comes from. Most are Apache Kafka's own (its KafkaConfig), and mean what they
# mean there; a test holds these sets to Kafka 4.4's config definitions.
KAFKA, KAFKA_AUTHORIZER, KAFKA_3, SPARKRAFT = "kafka", "kafka-authorizer", "kafka-3", "sparkraft"
ORIGINS = {
    KAFKA: "Apache Kafka's",
    KAFKA_AUTHORIZER: "Apache Kafka's StandardAuthorizer's",
    KAFKA_3: "Apache Kafka 3.x's (gone from 4.0)",
    SPARKRAFT: "sparkraft's own",
}
_AUTHORIZER_KEYS = frozenset({"super.users", "allow.everyone.if.no.acl.found"})
_KAFKA_3_KEYS = frozenset({"zookeeper.metadata.migration.enable", "zookeeper.connect", "zookeeper.session.timeout.ms",
                          "leader.imbalance.per.broker.percentage"})
_SPARKRAFT_KEYS = frozenset({
    "controller.quorum.wire.port", "controller.quorum.observer.idle.timeout.ms", "metadata.cache.interval.ms",
    "max.partitions.per.request", "max.partitions", "metrics.listener", "socket.request.arrival.timeout.ms",
    "controller.quorum.voter.principal", "broker.principal", "metadata.audit.enable", "metadata.log.hold.max.ms"})


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    attr: str  # the NodeConfig field it fills
    parse: Callable[[str], Any]
    default: Any
    doc: str
    origin: str  # a key of ORIGINS


def _key(name: str, parse: Callable[[str], Any], default: Any, doc: str) -> ConfigKey:
    attr = name.removeprefix("controller.quorum.").removeprefix("metadata.").replace(".", "_")
    origin = (KAFKA_AUTHORIZER if name in _AUTHORIZER_KEYS else KAFKA_3 if name in _KAFKA_3_KEYS
              else SPARKRAFT if name in _SPARKRAFT_KEYS else KAFKA)
    return ConfigKey(name, attr, parse, default, doc, origin)


_MS = _int(0)
_POSITIVE = _int(1)

KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        _key("node.id", _int(0), REQUIRED, "This node's id; a controller's must be in the voters."),
        _key("process.roles", _roles, REQUIRED, "'controller', 'broker' or both."),
        _key("controller.quorum.voters", _voters, None, "The static voter set: ID@HOST:PORT,..."),
        _key("controller.quorum.bootstrap.servers", _host_ports, None,
             "HOST:PORT,... of controllers to ask for the leader: a controller of a dynamic quorum "
             "(KIP-853; its voters are in the log) uses it instead of the voters, a broker may."),
        _key("controller.quorum.auto.join.enable", _bool, False,
             "A controller of a dynamic quorum that is not a voter adds itself once caught up (KIP-1186)."),
        _key("controller.quorum.wire.port", _int(-1), 0,
             "Where the controller serves the wire (the quorum's Raft requests and appends, and the "
             "Controller service's admin and broker requests, framed on TCP, with the controller "
             "listener's TLS; SASL_SSL clients keep gRPC): 0 on the controller listener's own port, which "
             "then carries gRPC, the wire and Kafka's protocol alike, told apart by their first bytes; a "
             "port number, a port of its own on the listener's host (the listener then serves gRPC only; "
             "peers and clients ask it for the wire's port); -1 serves none."),
        _key("listeners", _listeners, None, "NAME://HOST:PORT,... this node listens on."),
        _key("controller.listener.names", _listener_names, None,
             "Which listeners are the controller's: the first serves the quorum, sparkraft's clients and "
             "Kafka's brokers and tools on one port (gRPC, the wire and Kafka's protocol); each one after "
             "it answers Kafka's protocol only."),
        _key("metadata.log.dir", _non_empty, REQUIRED, "Directory of __cluster_metadata."),
        _key("controller.quorum.election.timeout.ms", _POSITIVE, 1000,
             "Base time without a leader before a (pre-)vote; randomised up to twice this."),
        _key("controller.quorum.fetch.timeout.ms", _POSITIVE, 2000,
             "Time without a successful Fetch before a follower starts an election."),
        _key("controller.quorum.election.backoff.max.ms", _POSITIVE, 1000,
             "Upper bound of the backoff after a lost election."),
        _key("controller.quorum.request.timeout.ms", _POSITIVE, 2000, "Timeout of one quorum RPC."),
        _key("controller.quorum.retry.backoff.ms", _MS, 20, "Pause before retrying a failed RPC."),
        _key("controller.quorum.append.linger.ms", _MS, 25,
             "How long the leader gathers appends into one batch."),
        _key("controller.quorum.observer.idle.timeout.ms", _POSITIVE, 300_000,
             "The leader forgets an observer that has not fetched for this long."),
        _key("broker.session.timeout.ms", _POSITIVE, 9000,
             "A broker without a heartbeat for this long is fenced."),
        _key("broker.heartbeat.interval.ms", _POSITIVE, 2000, "Time between broker heartbeats."),
        _key("metadata.log.segment.bytes", _int(1024), 1024 * 1024 * 1024,
             "Size at which a log segment is rolled (small values let tests roll often)."),
        _key("metadata.log.max.record.bytes.between.snapshots", _POSITIVE, 20 * 1024 * 1024,
             "Bytes of new records after which a snapshot is written."),
        _key("metadata.log.max.snapshot.interval.ms", _MS, 3600 * 1000,
             "Longest time between snapshots when records arrived (0 = only by size)."),
        _key("metadata.max.retention.bytes", _int(-1), 100 * 1024 * 1024,
             "Log and snapshot bytes kept before old ones are deleted (-1 = no limit)."),
        _key("metadata.max.retention.ms", _int(-1), 7 * 24 * 3600 * 1000,
             "Age after which old segments and snapshots are deleted (-1 = no limit)."),
        _key("metadata.audit.enable", _bool, True,
             "Write an audit entry for each admin request and each change a broker or controller makes "
             "(docs/use/audit.md); false leaves a gap in the history for as long as it is set."),
        _key("metadata.log.hold.max.ms", _int(-1), 7 * 24 * 3600 * 1000,
             "How long a reader's hold on the log (the streaming job's) keeps records from retention "
             "without being renewed (-1 = until released)."),
        _key("metadata.max.idle.interval.ms", _MS, 500,
             "The leader appends a NoOp record after this long without records (0 = never)."),
        _key("metadata.cache.interval.ms", _POSITIVE, 300 * 1000,
             "How often a broker writes its metadata cache (records after it are kept in its copy of the log)."),
        _key("max.partitions.per.request", _POSITIVE, 100_000,
             "Most partitions one CreateTopics or CreatePartitions request may add (INVALID_PARTITIONS past it)."),
        _key("max.partitions", _POSITIVE, 5_000_000,
             "Most partitions the cluster may hold in all (POLICY_VIOLATION past it)."),
        _key("auto.leader.rebalance.enable", _bool, True,
             "The active controller moves leadership back to each partition's preferred replica "
             "(the first) where a broker leads too few of the partitions it prefers."),
        _key("leader.imbalance.per.broker.percentage", _int(0), 10,
             "A broker's partitions are rebalanced when more than this percentage of those it is the "
             "preferred replica of are led by another broker."),
        _key("leader.imbalance.check.interval.seconds", _POSITIVE, 300,
             "How often the active controller checks the leader balance."),
        _key("metrics.listener", _host_port, None, "HOST:PORT serving Prometheus /metrics."),
        _key("broker.rack", _non_empty, None, "The broker's rack, for rack-aware placement."),
        # security (DESIGN §12)
        _key("listener.security.protocol.map", _protocol_map, None,
             "NAME:PLAINTEXT|SSL per listener; a listener not named here is PLAINTEXT."),
        _key("ssl.keystore.type", _pem, "PEM", "The key store's format: PEM."),
        _key("ssl.keystore.location", _non_empty, None,
             "A PEM file: this node's private key and certificate chain (SSL listeners, and its own "
             "client certificate towards SSL peers)."),
        _key("ssl.truststore.type", _pem, "PEM", "The trust store's format: PEM."),
        _key("ssl.truststore.location", _non_empty, None, "A PEM file of the CA certificates this node trusts."),
        _key("ssl.client.auth", _client_auth, "none", "none, requested or required: whether SSL clients "
             "must present a certificate signed by the trust store (mutual TLS)."),
        _key("ssl.principal.mapping.rules", _mapping_rules, "DEFAULT",
             "Kafka's rules from a certificate's distinguished name to a principal name."),
        _key("authorizer.class.name", str, "", "Any non-empty value enables the built-in StandardAuthorizer."),
        _key("super.users", _principals, frozenset(), "Principals allowed everything: User:A;User:B."),
        _key("allow.everyone.if.no.acl.found", _bool, False,
             "With an authorizer: allow an action on a resource that has no ACL at all."),
        _key("connections.max.reauth.ms", _POSITIVE, DEFAULT_LIFETIME_MS,
             "How long a SASL/SCRAM login lasts (its session token); clients log in again before it ends."),
        # what connections may cost a listener (wire, gRPC, Kafka): quorum/connection_limits.py
        _key("max.connections", _POSITIVE, DEFAULT_LIMITS.max_connections,
             "Connections open at once on each listener; past it a new one is closed as it arrives."),
        _key("max.connections.per.ip", _POSITIVE, DEFAULT_LIMITS.max_connections_per_ip,
             "Connections open at once from one client address on each listener."),
        _key("max.connections.per.ip.overrides", _per_ip_overrides, {},
             "HOST:COUNT,... per-address exceptions to max.connections.per.ip."),
        _key("max.connection.creation.rate", _POSITIVE, DEFAULT_LIMITS.max_creation_rate,
             "New connections a second on each listener; past it a new one is closed as it arrives."),
        _key("connections.max.idle.ms", _POSITIVE, int(DEFAULT_LIMITS.idle_timeout_s * 1000),
             "A connection with no request (and none unanswered) for this long is closed."),
        _key("socket.request.arrival.timeout.ms", _POSITIVE, int(DEFAULT_LIMITS.request_arrival_s * 1000),
             "A request must arrive whole within this long of its first byte, else its connection is "
             "closed (sparkraft's; Kafka has none)."),
        _key("queued.max.request.bytes", _int(-1), DEFAULT_LIMITS.max_buffered_bytes,
             "Bytes of requests still arriving, over all of a listener's connections, past which the "
             "connections holding part of one are not read until others finish (-1 = no limit)."),
        _key("sasl.server.max.receive.size", _POSITIVE, DEFAULT_LIMITS.max_unauthenticated_bytes,
             "Largest request from a client not authenticated yet: before its SASL login, or on the wire "
             "without a verified certificate where an authorizer runs."),
        # migration from ZooKeeper mode (DESIGN §15)
        _key("zookeeper.metadata.migration.enable", _bool, False,
             "A controller of a new quorum imports a ZooKeeper-mode cluster's metadata from zookeeper.connect, "
             "takes over as its controller and mirrors every change to ZooKeeper until the migration is finalized."),
        _key("zookeeper.connect", _zk_connect, None, "HOST:PORT[,HOST:PORT...][/chroot] of the ZooKeeper-mode cluster."),
        _key("zookeeper.session.timeout.ms", _POSITIVE, 18000, "The ZooKeeper session timeout of a migrating controller."),
        _key("controller.quorum.voter.principal", _principal_template, DEFAULT_VOTER_PRINCIPAL,
             "Under mutual TLS, the principal voter N's certificate must map to ({node.id} = N)."),
        _key("broker.principal", _principal_template, DEFAULT_BROKER_PRINCIPAL,
             "Under mutual TLS, the principal broker N's certificate must map to ({node.id} = N)."),
    ]
}


# --- the typed config ------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeConfig:
    """One node's parsed and cross-checked configuration; field comments are in ``KEYS``."""

    node_id: int
    process_roles: frozenset[str]
    voters: dict[int, HostPort] | None
    bootstrap_servers: tuple[HostPort, ...] | None
    auto_join_enable: bool
    wire_port: int
    listeners: dict[str, HostPort] | None
    controller_listener_names: tuple[str, ...] | None
    log_dir: str
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    append_linger_ms: int
    observer_idle_timeout_ms: int
    broker_session_timeout_ms: int
    broker_heartbeat_interval_ms: int
    log_segment_bytes: int
    log_max_record_bytes_between_snapshots: int
    log_max_snapshot_interval_ms: int
    max_retention_bytes: int
    max_retention_ms: int
    log_hold_max_ms: int
    audit_enable: bool
    max_idle_interval_ms: int
    cache_interval_ms: int
    max_partitions_per_request: int
    max_partitions: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_per_broker_percentage: int
    leader_imbalance_check_interval_seconds: int
    metrics_listener: HostPort | None
    broker_rack: str | None
    listener_security_protocol_map: dict[str, str] | None
    ssl_keystore_type: str
    ssl_keystore_location: str | None
    ssl_truststore_type: str
    ssl_truststore_location: str | None
    ssl_client_auth: str
    ssl_principal_mapping_rules: str
    authorizer_class_name: str
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool
    connections_max_reauth_ms: int
    voter_principal: str
    broker_principal: str
    zookeeper_metadata_migration_enable: bool
    zookeeper_connect: str | None
    zookeeper_session_timeout_ms: int
    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: dict[str, int]
    max_connection_creation_rate: int
    connections_max_idle_ms: int
    socket_request_arrival_timeout_ms: int
    queued_max_request_bytes: int
    sasl_server_max_receive_size: int
    # the known keys as the file gave them: what a broker reports as STATIC_BROKER_CONFIG
    given: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_properties(cls, props: dict[str, str], source: str = "config") -> "NodeConfig":
        """Check ``props`` (raw strings) against KEYS; warn about unknown keys."""
        for name in props.keys() - KEYS.keys():
            log.warning("%s: unknown configuration key %r is ignored", source, name)
        values = {}
        for key in KEYS.values():
            if key.name in props:
                raw = props[key.name]
                try:
                    values[key.attr] = key.parse(raw)
                except ValueError as e:
                    raise ConfigError(f"{source}: invalid value {raw!r} for {key.name}: {e}") from None
            elif key.default is REQUIRED:
                raise ConfigError(f"{source}: {key.name} is required ({key.doc})")
            else:
                values[key.attr] = key.default
        config = cls(**values, given={k: v for k, v in props.items() if k in KEYS})
        config._check(source)
        return config

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def dynamic_quorum(self) -> bool:
        """A controller of a dynamic quorum (KIP-853): no controller.quorum.voters; the voters are in the log."""
        return self.is_controller and not self.voters

    @property
    def controller_listener_name(self) -> str | None:
        return self.controller_listener_names[0] if self.controller_listener_names else None

    def more_controller_listeners(self) -> tuple[tuple[str, str, int], ...]:
        """(name, host, port) of the controller listeners after the first: where it answers Kafka's
        protocol (quorum/kafka/controller_apis.py)."""
        names = (self.controller_listener_names or ())[1:] if self.is_controller else ()
        return tuple((n, *self.listeners[n]) for n in names if n in (self.listeners or {}))

    @property
    def controller_listener(self) -> HostPort | None:
        """The address this controller serves the quorum on (first controller listener)."""
        if not self.is_controller or not self.controller_listener_names or not self.listeners:
            return None
        return self.listeners.get(self.controller_listener_names[0])

    def raft_settings(self) -> RaftSettings:
        """The controller.quorum.* timeouts in the form the Raft core takes them."""
        return RaftSettings(
            election_timeout_ms=self.election_timeout_ms,
            fetch_timeout_ms=self.fetch_timeout_ms,
            election_backoff_max_ms=self.election_backoff_max_ms,
            request_timeout_ms=self.request_timeout_ms,
            retry_backoff_ms=self.retry_backoff_ms,
            append_linger_ms=self.append_linger_ms,
            observer_idle_timeout_ms=self.observer_idle_timeout_ms,
        )

    def controller_settings(self) -> ControllerSettings:
        """The controller core's settings: broker.*, metadata.max.idle.interval.ms, max.partitions*,
        the leader balance."""
        return ControllerSettings(session_timeout_ms=self.broker_session_timeout_ms,
                                  heartbeat_interval_ms=self.broker_heartbeat_interval_ms,
                                  idle_interval_ms=self.max_idle_interval_ms or 1 << 40,  # 0 = never a NoOp
                                  log_hold_max_ms=self.log_hold_max_ms,
                                  audit=self.audit_enable,
                                  max_partitions_per_request=self.max_partitions_per_request,
                                  max_partitions=self.max_partitions,
                                  auto_leader_rebalance=self.auto_leader_rebalance_enable,
                                  leader_imbalance_percentage=self.leader_imbalance_per_broker_percentage,
                                  leader_imbalance_check_interval_ms=self.leader_imbalance_check_interval_seconds * 1000,
                                  zk_migration=self.zookeeper_metadata_migration_enable)

    def connection_limits(self) -> ConnectionLimits:
        """What connections may cost each of this node's listeners (max.connections and the rest)."""
        queued = self.queued_max_request_bytes
        return ConnectionLimits(
            max_connections=self.max_connections, max_connections_per_ip=self.max_connections_per_ip,
            per_ip_overrides=dict(self.max_connections_per_ip_overrides),
            max_creation_rate=self.max_connection_creation_rate,
            idle_timeout_s=self.connections_max_idle_ms / 1000,
            request_arrival_s=self.socket_request_arrival_timeout_ms / 1000,
            max_buffered_bytes=UNBOUNDED_BYTES if queued < 0 else max(queued, 1),
            max_unauthenticated_bytes=self.sasl_server_max_receive_size)

    def security_protocol(self, listener_name: str | None) -> str:
        """What ``listener.security.protocol.map`` says of a listener; unmapped, a listener named after
        a protocol is that protocol (Kafka's default map), any other PLAINTEXT."""
        mapped = (self.listener_security_protocol_map or {}).get(listener_name or "")
        return mapped or (listener_name if listener_name in SECURITY_PROTOCOLS else "PLAINTEXT")

    def node_security(self, listener_name: str | None) -> NodeSecurity:
        """TLS, principals and authorizer of the listener ``listener_name`` (None: no listener of its
        own, a broker), and how this node connects to the controllers; ConfigError on bad key files."""
        tls = None
        protocol = self.security_protocol(listener_name) if listener_name is not None else "PLAINTEXT"
        try:
            if protocol in TLS_PROTOCOLS:
                # as in Kafka, a SASL_SSL listener asks no client certificate: its clients log in
                tls = ServerTls(self.ssl_keystore_location or "", self.ssl_truststore_location,
                                self.ssl_client_auth if protocol == "SSL" else "none")
            controller_protocol = self.security_protocol(self.controller_listener_name)
            client = ClientSecurity(protocol=controller_protocol, truststore=self.ssl_truststore_location,
                                    keystore=self.ssl_keystore_location if controller_protocol == "SSL" else None)
            if client.keystore:
                client.channel_credentials()  # bad files: one line now, not a handshake failure later
        except ValueError as e:
            raise ConfigError(str(e)) from None
        authorizer = None
        if self.authorizer_class_name:
            authorizer = Authorizer(self.super_users, self.allow_everyone_if_no_acl_found)
        # SCRAM logins are served where a controller's listener is TLS (a token must not cross in clear)
        scram = ScramAuthenticator(self.connections_max_reauth_ms) \
            if tls is not None and listener_name in (self.controller_listener_names or ()) else None
        return NodeSecurity(tls=tls, mapper=PrincipalMapper(self.ssl_principal_mapping_rules), authorizer=authorizer,
                            client=client, voter_principal=self.voter_principal,
                            broker_principal=self.broker_principal, scram=scram,
                            sasl_login=SaslLogin(self.connections_max_reauth_ms)
                            if protocol.startswith("SASL_") else None)

    def _check(self, source: str) -> None:
        """Combinations of keys that Kafka also refuses."""
        def fail(message: str) -> None:
            raise ConfigError(f"{source}: {message}")

        voter_ids = ", ".join(map(str, sorted(self.voters or ())))
        if self.is_controller:
            if not self.voters and not self.bootstrap_servers:
                fail("a controller needs controller.quorum.voters (a static quorum) or "
                     "controller.quorum.bootstrap.servers (a dynamic one, whose voters are in the log)")
            if self.voters and self.bootstrap_servers:
                fail("set controller.quorum.voters (a static quorum) or controller.quorum.bootstrap.servers "
                     "(a dynamic one), not both")
            if self.voters and self.node_id not in self.voters:
                fail(f"node.id {self.node_id} is not in controller.quorum.voters ({voter_ids})")
            if not self.controller_listener_names:
                fail("controller.listener.names is required for a controller")
            missing = [n for n in self.controller_listener_names if n not in (self.listeners or {})]
            if missing:
                fail(f"listeners must include the controller listener {missing[0]} "
                     f"(listeners: {','.join(self.listeners or {}) or 'none'})")
            address, voter_address = self.controller_listener, (self.voters or {}).get(self.node_id, (None, 0))
            if self.voters and address[1] not in (0, voter_address[1]):
                log.warning("%s: listener %s port %d differs from node %d's voter entry %s:%d",
                            source, self.controller_listener_names[0], address[1], self.node_id,
                            *voter_address)
        if self.zookeeper_metadata_migration_enable:
            if not self.is_controller:
                fail("zookeeper.metadata.migration.enable is a controller's key (the controllers migrate the metadata)")
            if not self.zookeeper_connect:
                fail("zookeeper.metadata.migration.enable=true needs zookeeper.connect")
        for name in sorted({*(self.listener_security_protocol_map or {}), *(self.listeners or {})}):
            protocol = self.security_protocol(name)
            if protocol in TLS_PROTOCOLS and not self.ssl_keystore_location:
                fail(f"listener {name} is {protocol} (listener.security.protocol.map) but ssl.keystore.location "
                     f"is not set")
            if protocol.startswith("SASL_") and name == self.controller_listener_name:
                fail(f"controller listener {name} is {protocol}: the first controller listener (the quorum's) is "
                     f"PLAINTEXT or SSL (SCRAM clients log in over SSL with security.protocol=SASL_SSL; SASL_ "
                     f"listeners are Kafka listeners: a broker's, or a controller's after the first)")
        if self.ssl_client_auth == "required" and not self.ssl_truststore_location:
            fail("ssl.client.auth=required needs ssl.truststore.location (the CAs that sign client certificates)")
        if self.is_broker:
            if not self.voters and not self.bootstrap_servers:
                fail("a broker needs controller.quorum.voters or controller.quorum.bootstrap.servers")
            if not self.listeners:
                fail("listeners is required for a broker: they are the endpoints it registers")
            if not self.is_controller:
                if self.voters and self.node_id in self.voters:
                    fail(f"node.id {self.node_id} is in controller.quorum.voters ({voter_ids}) "
                         "but process.roles has no 'controller'")
                clash = [n for n in (self.controller_listener_names or ()) if n in self.listeners]
                if clash:
                    fail(f"listeners of a broker must not include the controller listener {clash[0]}")


def load_config(path: str | Path) -> NodeConfig:
    """Read and check a properties file; ConfigError if it is missing, unreadable or invalid."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    try:
        props = parse_properties(text)
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None
    return NodeConfig.from_properties(props, source=str(path))

