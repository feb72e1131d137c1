"""A revert's plan: what it takes to bring a cluster's metadata from one image (the newest cut, or
the controllers' image now) back to another (a past cut), for the chosen domains, as the admin
operations Kafka's API makes, in the order they are applied (``sparkraft revert``, docs/use/revert.md).

What cannot be restored is said, never faked (``Plan.cannot``, each with its reason): a partition
count cannot shrink; a deleted topic comes back empty (its data is gone); a SCRAM credential
cannot be rebuilt from its salted form; a password-type config's value is never materialised.

The order: ACLs are created before any are deleted (a revert must not lock out the operator doing
it), topics and partitions before their configs, deletions of topics and SCRAM users late, feature
downgrades last (the controller refuses one the metadata cannot take; everything else is done by
then). A plan compares equal to one made again from the same images: that is how ``--execute``
checks that nothing changed since it was reviewed.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.acls import AclEntry
from quorum.metadata.configs import TOPIC, ConfigResource, is_sensitive
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import REDACTED
from quorum.metadata.scram import mechanism_name

DOMAINS = ("topics", "configs", "acls", "quotas", "users", "features")
# the order steps are applied in (see the module docstring)
ORDER = ("upgrade-feature", "create-acl", "create-topic", "create-partitions", "set-config", "delete-config",
         "set-quota", "remove-quota", "delete-acl", "delete-user", "delete-topic", "downgrade-feature")
FORMAT = 1  # a saved plan's format


@dataclass(frozen=True)
class Step:
    """One admin operation: ``kind`` (ORDER), the resource it is about, and what it finds there
    (``before``: None = nothing) and leaves (``after``)."""

    domain: str
    kind: str
    resource: str  # "orders", "BROKER:1", "CLUSTER:", "user=alice,client-id=<default>", a feature's name
    name: str = ""  # a config's or quota's key, a SCRAM mechanism
    before: Any = None
    after: Any = None

    def __hash__(self) -> int:  # its values are JSON-like (dicts): hashed by their JSON form
        return hash(json.dumps(asdict(self), sort_keys=True, default=str))

    def describe(self) -> str:
        """The step in Kafka's terms, one line."""
        what = {"create-topic": lambda: f"create topic {self.resource} ({self.after['partitions']} partitions, "
                                        f"replication factor {self.after['replication_factor']}"
                                        + (", configs " + ", ".join(f"{k}={v}" for k, v in
                                                                   sorted(self.after['configs'].items()))
                                           if self.after['configs'] else "") + ")",
                "delete-topic": lambda: f"delete topic {self.resource} ({self.before['partitions']} partitions)",
                "create-partitions": lambda: f"add partitions to {self.resource}: {self.before} -> {self.after}",
                "set-config": lambda: f"set {self.resource} {self.name}={self.after}"
                                      + (f" (now {self.before})" if self.before is not None else ""),
                "delete-config": lambda: f"delete {self.resource} {self.name} (now {self.before})",
                "create-acl": lambda: f"create ACL {_acl_text(self.after)}",
                "delete-acl": lambda: f"delete ACL {_acl_text(self.before)}",
                "set-quota": lambda: f"set quota {self.resource} {self.name}={self.after:g}"
                                     + (f" (now {self.before:g})" if self.before is not None else ""),
                "remove-quota": lambda: f"remove quota {self.resource} {self.name} (now {self.before:g})",
                "delete-user": lambda: f"delete SCRAM credential {self.resource} {self.name}",
                "upgrade-feature": lambda: f"upgrade {self.resource} {self.before} -> {self.after}",
                "downgrade-feature": lambda: f"downgrade {self.resource} {self.before} -> {self.after} "
                                             f"(SAFE_DOWNGRADE: refused if the metadata needs the higher level)"}
        return what[self.kind]()


@dataclass(frozen=True)
class Cannot:
    """What the revert cannot bring back, and why."""

    domain: str
    what: str
    reason: str


@dataclass
class Plan:
    from_offset: int  # the cut (or the controllers' offset) the plan starts from
    to_offset: int  # the target cut
    domains: tuple[str, ...]
    steps: list[Step] = field(default_factory=list)
    cannot: list[Cannot] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "from_offset": self.from_offset, "to_offset": self.to_offset,
                           "domains": list(self.domains), "steps": [asdict(s) for s in self.steps],
                           "cannot": [asdict(c) for c in self.cannot]}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        try:
            doc = json.loads(text)
            if doc.get("format") != FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, not {FORMAT}")
            return cls(doc["from_offset"], doc["to_offset"], tuple(doc["domains"]),
                       [Step(**s) for s in doc["steps"]], [Cannot(**c) for c in doc["cannot"]])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"not a plan sparkraft revert wrote: {e}") from None

    def differences(self, other: "Plan") -> list[str]:
        """What ``other`` (made again, from the state now) has that this plan has not, and the
        reverse: empty when the same steps would be applied to the same state."""
        mine, theirs = set(self.steps), set(other.steps)
        return ([f"now also needed: {s.describe()}" for s in sorted(theirs - mine, key=_order)]
                + [f"no longer applies: {s.describe()}" for s in sorted(mine - theirs, key=_order)])


def plan(now: MetadataImage, target: MetadataImage, domains: Iterable[str], from_offset: int,
         to_offset: int) -> Plan:
    """The steps from ``now`` to ``target`` for ``domains`` (DOMAINS), and what cannot be restored."""
    chosen = tuple(d for d in DOMAINS if d in set(domains))
    unknown = set(domains) - set(DOMAINS)
    if unknown:
        raise ValueError(f"unknown domain {sorted(unknown)[0]!r}: choose from {', '.join(DOMAINS)}")
    out = Plan(from_offset, to_offset, chosen)
    for domain in chosen:
        _DIFFS[domain](now, target, out, chosen)
    out.steps = _hashable(sorted(out.steps, key=_order))
    return out


def _order(step: Step) -> tuple:
    return ORDER.index(step.kind), step.resource, step.name, json.dumps(step.after, sort_keys=True, default=str)


def _hashable(steps: list[Step]) -> list[Step]:
    """Steps whose values are JSON-like, as a saved plan reads back (tuples as lists, for equality)."""
    return [Step(**json.loads(json.dumps(asdict(s)))) for s in steps]


def _topics(now: MetadataImage, target: MetadataImage, out: Plan, chosen) -> None:
    for name in sorted(set(target.topics.ids_by_name) | set(now.topics.ids_by_name)):
        was, there = target.topics.topic_by_name(name), now.topics.topic_by_name(name)
        if was is not None and there is None:
            configs = dict(target.configs.configs(ConfigResource(TOPIC, name)))
            for key in [k for k, v in configs.items() if v == REDACTED or is_sensitive(k)]:
                del configs[key]
                out.cannot.append(Cannot("topics", f"topic {name} config {key}", _PASSWORD))
            out.steps.append(Step("topics", "create-topic", name, after={
                "partitions": len(was.partitions), "replication_factor": _replication(was), "configs": configs}))
            out.cannot.append(Cannot("topics", f"topic {name}'s data", "a deleted topic is created again empty: "
                                     "its records are not in the metadata"))
        elif was is None and there is not None:
            out.steps.append(Step("topics", "delete-topic", name, before={
                "topic_id": there.topic_id, "partitions": len(there.partitions)}))
        elif was is not None and there is not None:
            if was.topic_id != there.topic_id:
                out.cannot.append(Cannot("topics", f"topic {name}'s data", "the topic was deleted and created "
                                         "again since the target cut: the earlier one's records are gone"))
            if len(was.partitions) > len(there.partitions):
                out.steps.append(Step("topics", "create-partitions", name, before=len(there.partitions),
                                      after=len(was.partitions)))
            elif len(was.partitions) < len(there.partitions):
                out.cannot.append(Cannot("topics", f"topic {name}: {len(there.partitions)} partitions, "
                                         f"{len(was.partitions)} at the target", "a partition count cannot shrink"))


def _replication(topic) -> int:
    first = next(iter(topic.partitions.values()), None)
    return len(first.replicas) if first is not None else 1


_PASSWORD = "a password-type config's value is never materialised, so it cannot be restored"


def _configs(now: MetadataImage, target: MetadataImage, out: Plan, chosen) -> None:
    for resource in sorted(set(target.configs.resources) | set(now.configs.resources)):
        if resource.type == TOPIC:  # a topic's configs: where it exists at both ends (created ones carry theirs)
            if now.topics.topic_by_name(resource.name) is None or target.topics.topic_by_name(resource.name) is None:
                if "topics" not in chosen and target.topics.topic_by_name(resource.name) is not None:
                    out.cannot.append(Cannot("configs", f"topic {resource.name}'s configs",
                                             "the topic does not exist now: revert topics too"))
                continue
        label = _resource_label(resource)
        was, there = target.configs.configs(resource), now.configs.configs(resource)
        for key in sorted(set(was) | set(there)):
            old, new = was.get(key), there.get(key)
            if old == new:
                continue
            if is_sensitive(key) or REDACTED in (old, new):
                out.cannot.append(Cannot("configs", f"{label} {key}", _PASSWORD))
            elif old is None:
                out.steps.append(Step("configs", "delete-config", label, key, before=new))
            else:
                out.steps.append(Step("configs", "set-config", label, key, before=new, after=old))


def _resource_label(resource: ConfigResource) -> str:
    return "CLUSTER:" if resource.kind == "CLUSTER" else f"{resource.kind}:{resource.name}"


def resource_of_label(label: str) -> tuple[str, str]:
    """("TOPIC", "orders") of "TOPIC:orders"; ("CLUSTER", "") of "CLUSTER:"."""
    kind, _, name = label.partition(":")
    return kind, name


def _acls(now: MetadataImage, target: MetadataImage, out: Plan, chosen) -> None:
    was, there = _bindings(target), _bindings(now)
    for b in sorted(set(was) - set(there)):
        out.steps.append(Step("acls", "create-acl", _acl_text(dict(b)), after=dict(b)))
    for b in sorted(set(there) - set(was)):
        out.steps.append(Step("acls", "delete-acl", _acl_text(dict(b)), before=dict(b)))


def _bindings(image: MetadataImage) -> set[tuple]:
    """Each ACL binding by what it says (its id is the controller's, not the operator's)."""
    return {tuple(sorted(binding(e).items())) for e in image.acls.acls.values()}


def binding(e: AclEntry) -> dict[str, str]:
    """An ACL binding in Kafka's names (READ, ALLOW, TOPIC, LITERAL)."""
    return {"resource_type": pb.AclResourceType.Code.Name(e.resource_type), "resource_name": e.resource_name,
            "pattern_type": pb.PatternType.Code.Name(e.pattern_type), "principal": e.principal, "host": e.host,
            "operation": pb.AclOperation.Code.Name(e.operation),
            "permission_type": pb.AclPermissionType.Code.Name(e.permission_type)}


def binding_codes(b: dict) -> dict[str, int]:
    """A binding's enum fields (``binding``'s names) as Kafka's codes, for its wire protocol."""
    return {"resource_type": pb.AclResourceType.Code.Value(b["resource_type"]),
            "pattern_type": pb.PatternType.Code.Value(b["pattern_type"]),
            "operation": pb.AclOperation.Code.Value(b["operation"]),
            "permission_type": pb.AclPermissionType.Code.Value(b["permission_type"])}


def _acl_text(b: dict) -> str:
    return (f"{b['permission_type']} {b['principal']} {b['operation']} on {b['resource_type']}:"
            f"{b['resource_name']} ({b['pattern_type']}) from {b['host']}")


def _quotas(now: MetadataImage, target: MetadataImage, out: Plan, chosen) -> None:
    for entity in sorted(set(target.client_quotas.entities) | set(now.client_quotas.entities),
                         key=lambda e: [(t, n or "") for t, n in e]):
        label = entity_label(entity)
        was, there = target.client_quotas.quotas(entity), now.client_quotas.quotas(entity)
        for key in sorted(set(was) | set(there)):
            old, new = was.get(key), there.get(key)
            if old == new:
                continue
            if old is None:
                out.steps.append(Step("quotas", "remove-quota", label, key, before=new))
            else:
                out.steps.append(Step("quotas", "set-quota", label, key, before=new, after=old))


def entity_label(entity) -> str:
    """A client quota entity as Kafka's tools name it: "user=alice,client-id=<default>"."""
    return ",".join(f"{t}={n if n is not None else '<default>'}" for t, n in entity)


def entity_of_label(label: str) -> tuple[tuple[str, Optional[str]], ...]:
    parts = [p.partition("=") for p in label.split(",") if p]
    return tuple((t, None if n == "<default>" else n) for t, _, n in parts)


def _users(now: MetadataImage, target: MetadataImage, out: Plan, chosen) -> None:
    was, there = target.scram.credentials, now.scram.credentials
    for user, mechanism in sorted(set(was) | set(there)):
        name = mechanism_name(mechanism)
        old, new = was.get((user, mechanism)), there.get((user, mechanism))
        if old is None and new is not None:
            out.steps.append(Step("users", "delete-user", user, name, before={"iterations": new.iterations}))
        elif old is not None and (new is None or new.iterations != old.iterations):
            out.cannot.append(Cannot("users", f"SCRAM credential {user} {name}", "a SCRAM password cannot be "
                                     "recovered from its salted form: set it again with the user's password"))


def _features(now: MetadataImage, target: MetadataImage, out: Plan, chosen) -> None:
    for name in sorted(set(target.features.levels) | set(now.features.levels)):
        old, new = target.features.level(name), now.features.level(name)
        if old == new:
            continue
        kind = "upgrade-feature" if old > new else "downgrade-feature"
        if name == METADATA_VERSION and old == 0:
            continue  # a cut before metadata.version was set: nothing to go back to
        out.steps.append(Step("features", kind, name, before=new, after=old))


_DIFFS = {"topics": _topics, "configs": _configs, "acls": _acls, "quotas": _quotas, "users": _users,
          "features": _features}
