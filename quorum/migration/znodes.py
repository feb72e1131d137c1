"""Kafka's ZooKeeper-mode layout: znode paths and the JSON in them (Kafka's ``kafka.zk.ZkData``).

Pure functions, no ZooKeeper client: ``decode_*`` turn a znode's bytes into values (MalformedZnode,
naming the path, for anything Kafka itself would not have written), ``encode_*`` write them as a
ZooKeeper-mode broker or tool reads them. Entity names in ``/config`` paths are sanitized as Kafka's
Sanitizer does (URL encoding; ``<default>`` is the default entity).
"""
from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import quote, unquote

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE = "acl_changes_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
MIGRATION = "/migration"
DEFAULT_ENTITY = "<default>"
# config entity types under /config, and the quota entity type each one is
CONFIG_ENTITY_TYPES = ("topics", "brokers", "users", "clients", "ips")
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
SCRAM_KEYS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # config key -> pb.ScramMechanism code
# Kafka's names in ACL JSON and paths <-> the protocol's codes (AclResourceType, AclOperation...)
RESOURCE_TYPES = {"Topic": 2, "Group": 3, "Cluster": 4, "TransactionalId": 5, "DelegationToken": 6, "User": 7}
OPERATIONS = {"All": 2, "Read": 3, "Write": 4, "Create": 5, "Delete": 6, "Alter": 7, "Describe": 8,
              "ClusterAction": 9, "DescribeConfigs": 10, "AlterConfigs": 11, "IdempotentWrite": 12,
              "CreateTokens": 13, "DescribeTokens": 14}
PERMISSIONS = {"Deny": 2, "Allow": 3}
LITERAL, PREFIXED = 3, 4  # pattern types: /kafka-acl and /kafka-acl-extended/prefixed
PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class MalformedZnode(ValueError):
    """A znode's content is not what Kafka writes there."""

    def __init__(self, path: str, reason: str):
        self.path = path
        super().__init__(f"malformed znode {path}: {reason}")


# ---------------------------------------------------------------- paths
def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(entity_type: str, name: str) -> str:
    """``/config/<type>/<sanitized name>``; ``name`` None or "" for brokers is the default entity."""
    return f"{CONFIG}/{entity_type}/{sanitize(name)}"


def sanitize(name: Optional[str]) -> str:
    """Kafka's Sanitizer: URL-encode (a space as %20, '*' kept), the default entity as <default>."""
    if name is None or name == "":
        return DEFAULT_ENTITY
    return quote(name, safe="*")


def desanitize(segment: str) -> Optional[str]:
    return None if segment == DEFAULT_ENTITY else unquote(segment)


def acl_path(pattern_type: int, resource_type: str, name: str) -> str:
    if pattern_type == LITERAL:
        return f"{LITERAL_ACLS}/{resource_type}/{name}"
    return f"{EXTENDED_ACLS}/prefixed/{resource_type}/{name}"


# ---------------------------------------------------------------- reading
def _json(path: str, data: Optional[bytes]) -> Any:
    if not data:
        raise MalformedZnode(path, "empty")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MalformedZnode(path, f"not JSON ({e})") from None


def _object(path: str, data: Optional[bytes]) -> dict:
    value = _json(path, data)
    if not isinstance(value, dict):
        raise MalformedZnode(path, "expected a JSON object")
    return value


def _int(path: str, obj: dict, key: str, default: Any = ...) -> int:
    value = obj.get(key, default)
    if value is ...:
        raise MalformedZnode(path, f"no {key!r}")
    if isinstance(value, str):  # Kafka writes some numbers as strings (block_start, timestamp)
        try:
            value = int(value)
        except ValueError:
            raise MalformedZnode(path, f"{key!r} is not a number") from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedZnode(path, f"{key!r} is not a number")
    return value


def _ids(path: str, value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                              for i in value):
        raise MalformedZnode(path, f"{what} is not a list of broker ids")
    return tuple(value)


def decode_cluster_id(data: Optional[bytes]) -> str:
    obj = _object(CLUSTER_ID, data)
    cid = obj.get("id")
    if not isinstance(cid, str) or not cid:
        raise MalformedZnode(CLUSTER_ID, "no 'id'")
    return cid


def decode_controller_epoch(data: Optional[bytes]) -> int:
    try:
        return int((data or b"").decode())
    except (ValueError, UnicodeDecodeError):
        raise MalformedZnode(CONTROLLER_EPOCH, "not a number") from None


@dataclass(frozen=True)
class ControllerClaim:
    """Who ``/controller`` names: a ZooKeeper-mode broker (no KRaft epoch) or a KRaft controller."""

    broker_id: int
    kraft_controller_epoch: Optional[int]


def decode_controller(data: Optional[bytes]) -> ControllerClaim:
    obj = _object(CONTROLLER, data)
    epoch = obj.get("kraftControllerEpoch")
    return ControllerClaim(_int(CONTROLLER, obj, "brokerid"), None if epoch is None else _int(CONTROLLER, obj, "kraftControllerEpoch"))


def encode_controller(node_id: int, kraft_epoch: int) -> bytes:
    return encode({"version": 2, "brokerid": node_id, "timestamp": str(int(time.time() * 1000)),
                   "kraftControllerEpoch": kraft_epoch})


@dataclass(frozen=True)
class ZkBroker:
    broker_id: int
    endpoints: tuple[tuple[str, str, int, int], ...]  # (listener name, host, port, protocol code)
    rack: Optional[str]


def decode_broker(broker_id: int, data: Optional[bytes]) -> ZkBroker:
    path = f"{BROKER_IDS}/{broker_id}"
    obj = _object(path, data)
    version = _int(path, obj, "version")
    protocols = obj.get("listener_security_protocol_map") or {}
    if not isinstance(protocols, dict):
        raise MalformedZnode(path, "listener_security_protocol_map is not an object")
    endpoints = []
    if version <= 1:
        endpoints.append(("PLAINTEXT", str(obj.get("host", "")), _int(path, obj, "port"), 0))
    else:
        listed = obj.get("endpoints")
        if not isinstance(listed, list):
            raise MalformedZnode(path, "no 'endpoints' list")
        for e in listed:
            name, sep, rest = str(e).partition("://")
            host, colon, port = rest.rpartition(":")
            if not sep or not colon or not port.isdigit():
                raise MalformedZnode(path, f"endpoint {e!r} is not NAME://HOST:PORT")
            protocol = protocols.get(name, name)
            if protocol not in PROTOCOLS:
                raise MalformedZnode(path, f"endpoint {e!r} has no known security protocol")
            endpoints.append((name, host.strip("[]"), int(port), PROTOCOLS[protocol]))
    rack = obj.get("rack")
    return ZkBroker(broker_id, tuple(endpoints), rack if isinstance(rack, str) and rack else None)


@dataclass
class ZkTopic:
    name: str
    topic_id: Optional[str]
    replicas: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)


def decode_topic(name: str, data: Optional[bytes]) -> ZkTopic:
    path = topic_path(name)
    obj = _object(path, data)

    def lists(key: str) -> dict[int, tuple[int, ...]]:
        value = obj.get(key) or {}
        if not isinstance(value, dict):
            raise MalformedZnode(path, f"{key!r} is not an object")
        out = {}
        for p, ids in value.items():
            if not str(p).isdigit():
                raise MalformedZnode(path, f"partition {p!r} in {key!r} is not a number")
            out[int(p)] = _ids(path, ids, f"{key}[{p}]")
        return out

    replicas = lists("partitions")
    if not replicas:
        raise MalformedZnode(path, "no partitions")
    topic_id = obj.get("topic_id")
    if topic_id is not None and (not isinstance(topic_id, str) or len(topic_id) != 22):
        raise MalformedZnode(path, f"topic_id {topic_id!r} is not a Kafka Uuid")
    return ZkTopic(name, topic_id, replicas, lists("adding_replicas"), lists("removing_replicas"))


@dataclass(frozen=True)
class ZkPartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int  # the state znode's version: Kafka's partition epoch in ZooKeeper mode


def decode_partition_state(topic: str, partition: int, data: Optional[bytes], zk_version: int) -> ZkPartitionState:
    path = partition_state_path(topic, partition)
    obj = _object(path, data)
    return ZkPartitionState(_int(path, obj, "leader"), _int(path, obj, "leader_epoch"),
                            _ids(path, obj.get("isr"), "isr"), zk_version)


def decode_config(path: str, data: Optional[bytes]) -> dict[str, str]:
    obj = _object(path, data)
    config = obj.get("config", {})
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise MalformedZnode(path, "'config' is not an object of strings")
    return dict(config)


def decode_scram(path: str, key: str, value: str) -> tuple[bytes, bytes, bytes, int]:
    """A SCRAM credential in a user's config: ``salt=..,stored_key=..,server_key=..,iterations=N``."""
    try:
        parts = dict(item.split("=", 1) for item in value.split(","))
        return (base64.b64decode(parts["salt"], validate=True), base64.b64decode(parts["stored_key"], validate=True),
                base64.b64decode(parts["server_key"], validate=True), int(parts["iterations"]))
    except (ValueError, KeyError):
        raise MalformedZnode(path, f"{key} is not salt=..,stored_key=..,server_key=..,iterations=N") from None


def encode_scram(salt: bytes, stored_key: bytes, server_key: bytes, iterations: int) -> str:
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations={iterations}"


@dataclass(frozen=True)
class ZkAcl:
    principal: str
    host: str
    operation: int
    permission: int


def decode_acls(path: str, data: Optional[bytes]) -> list[ZkAcl]:
    obj = _object(path, data)
    acls = obj.get("acls")
    if not isinstance(acls, list):
        raise MalformedZnode(path, "no 'acls' list")
    out = []
    for a in acls:
        if not isinstance(a, dict):
            raise MalformedZnode(path, "an ACL is not an object")
        operation, permission = OPERATIONS.get(a.get("operation")), PERMISSIONS.get(a.get("permissionType"))
        principal, host = a.get("principal"), a.get("host")
        if operation is None or permission is None or not isinstance(principal, str) or ":" not in principal \
                or not isinstance(host, str):
            raise MalformedZnode(path, f"ACL {a} is not Kafka's (principal, host, operation, permissionType)")
        out.append(ZkAcl(principal, host, operation, permission))
    return out


def decode_producer_id_block(data: Optional[bytes]) -> tuple[int, int]:
    """(broker, block_end) of the last block handed out."""
    obj = _object(PRODUCER_ID_BLOCK, data)
    return _int(PRODUCER_ID_BLOCK, obj, "broker"), _int(PRODUCER_ID_BLOCK, obj, "block_end")


# ---------------------------------------------------------------- writing
def encode(obj: Any) -> bytes:
    """A znode's JSON as Kafka's Json.encodeAsBytes writes it (compact; keys sorted here, so equal
    content is equal bytes)."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def encode_migration(kraft_controller_id: int, kraft_epoch: int, offset: int, epoch: int) -> bytes:
    """``/migration``: how far the KRaft metadata ZooKeeper holds goes (Kafka's ZkMigrationLeadershipState)."""
    return encode({"version": 0, "kraft_controller_id": kraft_controller_id,
                   "kraft_controller_epoch": kraft_epoch, "kraft_metadata_offset": offset,
                   "kraft_metadata_epoch": epoch})

