"""What ZooKeeper must hold for a metadata image, and the znode writes from one image to another.

The dual write is a diff, as Kafka's KRaftMigrationZkWriter: ``zk_writes(old, new)`` compares two
images (the last one mirrored and the newest committed) and lists the znodes to create, set or
delete so that ZooKeeper holds ``new``. The images share everything a few batches did not change,
so PMap.diff walks only what changed: a round costs what changed, not the cluster's size. After an
outage the same call with the last image ZooKeeper got catches up in one go, and a new active
controller diffs the image it rebuilt from ZooKeeper against its own (a full reconciliation).

What is mirrored: topics (assignment, partition states), topic and broker configs, client quotas
with SCRAM credentials (``/config/users|clients|ips``), ACLs, the producer id block, with Kafka's
change notifications so ZooKeeper-mode brokers notice. Not ``/brokers/ids``: those are the
ephemeral registrations of ZooKeeper-mode brokers themselves.

A partition's epoch is not compared: in ZooKeeper it is the state znode's version, which ZooKeeper
counts itself. The controller epoch inside a partition state is the claim's, filled in at write time.
"""
from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional

from quorum.metadata.acls import AclEntry
from quorum.metadata.configs import BROKER, TOPIC, ConfigResource
from quorum.metadata.image import MetadataImage
from quorum.metadata.topics import PartitionRegistration, TopicImage
from quorum.migration import znodes as z

_RESOURCE_NAMES = {code: name for name, code in z.RESOURCE_TYPES.items()}
_OPERATION_NAMES = {code: name for name, code in z.OPERATIONS.items()}
_PERMISSION_NAMES = {code: name for name, code in z.PERMISSIONS.items()}
_SCRAM_NAMES = {code: name for name, code in z.SCRAM_KEYS.items()}
_QUOTA_PATHS = {"user": "users", "client-id": "clients", "ip": "ips"}


@dataclass(frozen=True)
class ZkWrite:
    """One znode to create, set (``data``) or delete (``data`` None); ``sequential`` appends a
    sequence number to the path (change notifications). Parents come before children, and deletes
    of children before their parent's."""

    path: str
    data: Optional[bytes]
    create: bool = False
    sequential: bool = False

    @property
    def parent(self) -> str:
        return posixpath.dirname(self.path)


# ---------------------------------------------------------------- content of one znode
def assignment(topic: TopicImage) -> bytes:
    parts = sorted(topic.partitions.items())
    return z.encode({"version": 3, "topic_id": topic.topic_id,
                     "partitions": {str(p): list(r.replicas) for p, r in parts},
                     "adding_replicas": {str(p): list(r.adding_replicas) for p, r in parts if r.adding_replicas},
                     "removing_replicas": {str(p): list(r.removing_replicas) for p, r in parts if r.removing_replicas}})


def partition_state(p: PartitionRegistration, controller_epoch: int) -> bytes:
    return z.encode({"version": 1, "controller_epoch": controller_epoch, "leader": p.leader,
                     "leader_epoch": p.leader_epoch, "isr": list(p.isr)})


def _state_key(p: PartitionRegistration) -> tuple:
    return p.leader, p.leader_epoch, p.isr


def _replicas_key(p: PartitionRegistration) -> tuple:
    return p.replicas, p.adding_replicas, p.removing_replicas


def _config(values: dict[str, str]) -> bytes:
    return z.encode({"version": 1, "config": values})


# ---------------------------------------------------------------- the diff
class _Writes:
    def __init__(self) -> None:
        self.out: list[ZkWrite] = []
        self.config_changes: list[str] = []  # entity paths ("topics/t") for /config/changes
        self.acl_changes: list[tuple[int, str, str]] = []  # (pattern type, resource type name, name)

    def put(self, path: str, old: Optional[bytes], new: Optional[bytes]) -> None:
        if old == new:
            return
        self.out.append(ZkWrite(path, new, create=old is None))

    def config(self, path: str, old: Optional[dict], new: Optional[dict]) -> None:
        """A config znode (None: none) and the change notification ZooKeeper-mode brokers follow."""
        if old == new:
            return
        self.put(path, None if old is None else _config(old), None if new is None else _config(new))
        self.config_changes.append(path.removeprefix(z.CONFIG + "/"))


def zk_writes(old: MetadataImage, new: MetadataImage, controller_epoch: int,
              force_topics: Iterable[str] = ()) -> list[ZkWrite]:
    """The writes that take ZooKeeper from holding ``old`` to holding ``new``. ``force_topics``:
    topics whose assignment znode is rewritten even if unchanged (imported without a topic id)."""
    w = _Writes()
    _topics(old, new, controller_epoch, set(force_topics), w)
    _configs(old, new, w)
    _client_configs(old, new, w)
    _acls(old, new, w)
    if old.producer_ids.next_producer_id != new.producer_ids.next_producer_id and new.producer_ids.next_producer_id > 0:
        end = new.producer_ids.next_producer_id - 1
        w.out.append(ZkWrite(z.PRODUCER_ID_BLOCK, z.encode({"version": 1, "broker": -1, "block_start": str(max(0, end - 999)),
                                                             "block_end": str(end)}),
                             create=old.producer_ids.next_producer_id < 0))
    for entity_path in w.config_changes:
        w.out.append(ZkWrite(z.CONFIG_CHANGE_PREFIX, z.encode({"version": 2, "entity_path": entity_path}),
                             create=True, sequential=True))
    for pattern, rtype, name in w.acl_changes:
        if pattern == z.LITERAL:
            w.out.append(ZkWrite(f"{z.LITERAL_ACL_CHANGES}/{z.ACL_CHANGE}", f"{rtype}:{name}".encode(),
                                 create=True, sequential=True))
        else:
            w.out.append(ZkWrite(f"{z.EXTENDED_ACL_CHANGES}/{z.ACL_CHANGE}", z.encode(
                {"version": 1, "resourceType": _upper(rtype), "name": name, "patternType": "PREFIXED"}),
                create=True, sequential=True))
    return w.out


def _upper(camel: str) -> str:
    """Kafka's enum name of a resource type: TransactionalId -> TRANSACTIONAL_ID."""
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(camel)).upper()


def _topics(old: MetadataImage, new: MetadataImage, epoch: int, force: set[str], w: _Writes) -> None:
    for _, a, b in old.topics.by_id.diff(new.topics.by_id):
        if b is None:
            _delete_topic(a, w)
        elif a is None:
            _create_topic(b, epoch, w)
        else:
            rewrite, at = b.name in force, len(w.out)
            for pid, pa, pb in a.partitions.diff(b.partitions):
                if pb is None or pa is None or _replicas_key(pa) != _replicas_key(pb):
                    rewrite = True
                state = z.partition_state_path(b.name, pid)
                if pb is None:
                    w.out.append(ZkWrite(state, None))
                    w.out.append(ZkWrite(z.partition_path(b.name, pid), None))
                elif pa is None:
                    w.out.append(ZkWrite(z.partition_path(b.name, pid), b"", create=True))
                    w.out.append(ZkWrite(state, partition_state(pb, epoch), create=True))
                elif _state_key(pa) != _state_key(pb):
                    w.out.append(ZkWrite(state, partition_state(pb, epoch)))
            if rewrite:  # the assignment before its new partitions' znodes
                w.out.insert(at, ZkWrite(z.topic_path(b.name), assignment(b)))
    for name in force:  # topics whose id ZooKeeper lacks, unchanged since
        topic = new.topics.topic_by_name(name)
        if topic is not None and old.topics.topic_by_name(name) == topic:
            w.out.append(ZkWrite(z.topic_path(name), assignment(topic)))


def _create_topic(t: TopicImage, epoch: int, w: _Writes) -> None:
    w.out.append(ZkWrite(z.topic_path(t.name), assignment(t), create=True))
    w.out.append(ZkWrite(z.partitions_path(t.name), b"", create=True))
    for pid, p in sorted(t.partitions.items()):
        w.out.append(ZkWrite(z.partition_path(t.name, pid), b"", create=True))
        w.out.append(ZkWrite(z.partition_state_path(t.name, pid), partition_state(p, epoch), create=True))


def _delete_topic(t: TopicImage, w: _Writes) -> None:
    for pid in sorted(t.partitions):
        w.out.append(ZkWrite(z.partition_state_path(t.name, pid), None))
        w.out.append(ZkWrite(z.partition_path(t.name, pid), None))
    w.out.append(ZkWrite(z.partitions_path(t.name), None))
    w.out.append(ZkWrite(z.topic_path(t.name), None))


def _configs(old: MetadataImage, new: MetadataImage, w: _Writes) -> None:
    """``/config/topics/<t>`` exists for every topic (Kafka creates it empty); ``/config/brokers/<id>``
    and ``/config/brokers/<default>`` where a key is set."""
    touched: set[ConfigResource] = {r for r, _, _ in old.configs.resources.diff(new.configs.resources)}
    for _, a, b in old.topics.by_id.diff(new.topics.by_id):
        if (a is None) != (b is None):
            touched.add(ConfigResource(TOPIC, (a or b).name))
    for resource in sorted(touched):
        if resource.type == TOPIC:
            had, has = old.topics.topic_by_name(resource.name), new.topics.topic_by_name(resource.name)
            w.config(z.config_path("topics", resource.name),
                     None if had is None else dict(old.configs.configs(resource)),
                     None if has is None else dict(new.configs.configs(resource)))
        elif resource.type == BROKER:
            a, b = old.configs.configs(resource), new.configs.configs(resource)
            w.config(z.config_path("brokers", resource.name), dict(a) if a else None, dict(b) if b else None)


def _entity_path(entity: tuple[tuple[str, Optional[str]], ...]) -> Optional[tuple[str, Optional[str], Optional[str]]]:
    """(entity type path, name, client-id under a user or None) of a quota entity ZooKeeper can hold."""
    parts = dict(entity)
    if set(parts) == {"user", "client-id"}:
        return "users", parts["user"], parts["client-id"]
    if len(parts) == 1:
        kind, name = next(iter(parts.items()))
        if kind in _QUOTA_PATHS:
            return _QUOTA_PATHS[kind], name, None
    return None


def _quota_entity(key: tuple[str, Optional[str], Optional[str]]) -> tuple:
    kind, name, client = key
    parts = {"user": name, "client-id": client} if client is not None else {z.QUOTA_ENTITY_TYPES[kind]: name}
    return tuple(sorted(parts.items()))


def _client_path(key: tuple[str, Optional[str], Optional[str]]) -> str:
    kind, name, client = key
    if client is not None:
        return f"{z.CONFIG}/users/{z.sanitize(name)}/clients/{z.sanitize(client)}"
    return z.config_path(kind, name)


def _client_config(image: MetadataImage, key: tuple[str, Optional[str], Optional[str]]) -> Optional[dict]:
    """A user's, client's or IP's config znode: its quotas (Kafka writes doubles as Java prints
    them: 1024.0) and, for a user, its SCRAM credentials."""
    values = {k: str(float(v)) for k, v in image.client_quotas.quotas(_quota_entity(key)).items()}
    kind, name, client = key
    if kind == "users" and client is None and name is not None:
        for mechanism, label in _SCRAM_NAMES.items():
            c = image.scram.credential(name, mechanism)
            if c is not None:
                values[label] = z.encode_scram(c.salt, c.stored_key, c.server_key, c.iterations)
    return values or None


def _client_configs(old: MetadataImage, new: MetadataImage, w: _Writes) -> None:
    keys = set()
    for entity, _, _ in old.client_quotas.entities.diff(new.client_quotas.entities):
        key = _entity_path(entity)
        if key is not None:
            keys.add(key)
    for (user, _), _, _ in old.scram.credentials.diff(new.scram.credentials):
        keys.add(("users", user, None))
    for key in sorted(keys, key=lambda k: (k[0], k[1] or "", k[2] or "")):
        w.config(_client_path(key), _client_config(old, key), _client_config(new, key))


def acl_json(entries: Iterable[AclEntry]) -> Optional[bytes]:
    acls = sorted(({"principal": e.principal, "permissionType": _PERMISSION_NAMES[e.permission_type],
                    "operation": _OPERATION_NAMES[e.operation], "host": e.host} for e in entries),
                  key=lambda a: (a["principal"], a["host"], a["operation"], a["permissionType"]))
    return z.encode({"version": 1, "acls": acls}) if acls else None


def _acls(old: MetadataImage, new: MetadataImage, w: _Writes) -> None:
    resources = set()
    for _, a, b in old.acls.acls.diff(new.acls.acls):
        for e in (a, b):
            if e is not None and e.resource_type in _RESOURCE_NAMES and e.pattern_type in (z.LITERAL, z.PREFIXED):
                resources.add((e.pattern_type, e.resource_type, e.resource_name))
    if not resources:
        return
    by_resource: dict[Any, tuple[list, list]] = {r: ([], []) for r in resources}
    for i, image in enumerate((old, new)):
        for e in image.acls.acls.values():
            key = (e.pattern_type, e.resource_type, e.resource_name)
            if key in by_resource:
                by_resource[key][i].append(e)
    for (pattern, rtype, name), (before, after) in sorted(by_resource.items()):
        type_name = _RESOURCE_NAMES[rtype]
        w.put(z.acl_path(pattern, type_name, name), acl_json(before), acl_json(after))
        w.acl_changes.append((pattern, type_name, name))
