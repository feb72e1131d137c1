"""Kafka's StandardAuthorizer over the committed ACL records: who may do what to which resource.

A decision (``authorize``) follows StandardAuthorizerData exactly:

1. a super user (``super.users``, compared as ``User:name``) is allowed everything;
2. the ACLs that apply are those of the request's resource type whose pattern matches the name (a
   LITERAL of the same name, the LITERAL wildcard ``*``, a PREFIXED the name starts with), whose
   principal is the caller's or ``User:*`` and whose host is the caller's address, a CIDR block
   holding it (metadata.version 4.4-IV1), or ``*``;
3. an ACL's operation applies if it is ALL or the requested one; an ALLOW of READ, WRITE, DELETE or
   ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS allows DESCRIBE_CONFIGS (a DENY implies
   nothing beyond itself);
4. any DENY that applies wins; else any ALLOW allows; else, if the resource has no ACL at all (of
   anyone), ``allow.everyone.if.no.acl.found`` decides; else denied.

Lookups do not scan: per resource type, literal names are a dict and prefixes a character trie, so
a decision walks the resource name once, whatever the number of ACLs. The index changes on the
controller's thread as ACL records are replayed and is read by the gRPC threads under one lock, so
a decision never sees half of a committed batch.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.acls import AclEntry, AclsImage
from quorum.security.cidr import in_block

OP = pb.AclOperation.Code
RT = pb.AclResourceType.Code
_LITERAL = pb.PatternType.LITERAL
_PREFIXED = pb.PatternType.PREFIXED
_ALLOW = pb.AclPermissionType.ALLOW
_DENY = pb.AclPermissionType.DENY
_ALL = OP.Value("ALL")
_DESCRIBE = OP.Value("DESCRIBE")
_DESCRIBE_CONFIGS = OP.Value("DESCRIBE_CONFIGS")
IMPLIES_DESCRIBE = frozenset(OP.Value(n) for n in ("DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"))
IMPLIES_DESCRIBE_CONFIGS = frozenset(OP.Value(n) for n in ("DESCRIBE_CONFIGS", "ALTER_CONFIGS"))

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as in Kafka


@dataclass(frozen=True, slots=True)
class Action:
    """One thing a request wants to do: ``operation`` on ``resource_type`` named ``resource_name``
    (pb codes, as in the ACL records)."""

    operation: int
    resource_type: int
    resource_name: str


def topic_action(operation: str, topic: str) -> Action:
    return Action(OP.Value(operation), RT.Value("TOPIC"), topic)


def group_action(operation: str, group: str) -> Action:
    return Action(OP.Value(operation), RT.Value("GROUP"), group)


def cluster_action(operation: str) -> Action:
    return Action(OP.Value(operation), RT.Value("CLUSTER"), CLUSTER_NAME)


def _applies(acl: AclEntry, operation: int, principal: str, host: str) -> bool:
    """Whether ``acl`` speaks to this caller and operation (not yet whether it allows or denies)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host and not ("/" in acl.host and in_block(host, acl.host)):
        return False
    if acl.operation == _ALL or acl.operation == operation:
        return True
    if acl.permission_type != _ALLOW:
        return False
    if operation == _DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    if operation == _DESCRIBE_CONFIGS:
        return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


ByPrincipal = dict[str, list[AclEntry]]  # the ACLs of one pattern, by principal


def _add(acls: ByPrincipal, acl: AclEntry) -> None:
    acls.setdefault(acl.principal, []).append(acl)


def _remove(acls: ByPrincipal, acl: AclEntry) -> None:
    same = acls[acl.principal]
    same.remove(acl)
    if not same:
        del acls[acl.principal]


class _Node:
    """A trie node: the PREFIXED ACLs whose prefix ends here, and the next characters."""

    __slots__ = ("acls", "children")

    def __init__(self) -> None:
        self.acls: ByPrincipal = {}
        self.children: dict[str, _Node] = {}


class _TypeIndex:
    """The ACLs of one resource type: literal names in a dict, prefixes in a trie, each pattern's
    ACLs by principal (a decision looks at the caller's and ``User:*``'s only)."""

    __slots__ = ("literal", "prefixes", "count")

    def __init__(self) -> None:
        self.literal: dict[str, ByPrincipal] = {}
        self.prefixes = _Node()
        self.count = 0

    def add(self, acl: AclEntry) -> None:
        if acl.pattern_type == _LITERAL:
            _add(self.literal.setdefault(acl.resource_name, {}), acl)
        else:
            node = self.prefixes
            for ch in acl.resource_name:
                node = node.children.setdefault(ch, _Node())
            _add(node.acls, acl)
        self.count += 1

    def remove(self, acl: AclEntry) -> None:
        if acl.pattern_type == _LITERAL:
            acls = self.literal[acl.resource_name]
            _remove(acls, acl)
            if not acls:
                del self.literal[acl.resource_name]
        else:
            path = [self.prefixes]
            for ch in acl.resource_name:
                path.append(path[-1].children[ch])
            _remove(path[-1].acls, acl)
            for parent, ch, node in zip(reversed(path[:-1]), reversed(acl.resource_name), reversed(path[1:])):
                if node.acls or node.children:
                    break
                del parent.children[ch]  # prune the branch nothing hangs on any more
        self.count -= 1

    def matching(self, name: str) -> Iterable[ByPrincipal]:
        """The ACLs (by principal) of every pattern that matches ``name``; none is empty."""
        exact = self.literal.get(name)
        if exact:
            yield exact
        if name != WILDCARD:
            wild = self.literal.get(WILDCARD)
            if wild:
                yield wild
        node = self.prefixes
        for ch in name:
            node = node.children.get(ch)
            if node is None:
                return
            if node.acls:
                yield node.acls


class Authorizer:
    """The ACL index of one node and its two settings; ``authorize`` is safe from any thread."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._types: dict[int, _TypeIndex] = {}
        self._by_id: dict[str, AclEntry] = {}
        self._lock = threading.Lock()
        self._seen = AclsImage()  # the committed ACLs this index holds

    def __len__(self) -> int:
        return len(self._by_id)

    # -- following the log (the controller's thread) ------------------------------------------------
    def apply(self, added: Iterable[AclEntry] = (), removed: Iterable[str] = ()) -> None:
        """Take one committed change: ACLs added (or replaced, by id) and ids removed, all at once."""
        with self._lock:
            for acl_id in removed:
                old = self._by_id.pop(acl_id, None)
                if old is not None:
                    self._types[old.resource_type].remove(old)
            for acl in added:
                old = self._by_id.pop(acl.id, None)
                if old is not None:
                    self._types[old.resource_type].remove(old)
                self._by_id[acl.id] = acl
                self._types.setdefault(acl.resource_type, _TypeIndex()).add(acl)

    def follow(self, image: AclsImage) -> None:
        """Become the index of ``image``: only what changed since the last image is applied (the
        images share what they did not change, so this costs the change, not the ACL count)."""
        if image is self._seen:
            return
        added, removed = [], []
        for acl_id, _, new in self._seen.acls.diff(image.acls):
            if new is None:
                removed.append(acl_id)
            else:
                added.append(new)
        self.apply(added, removed)
        self._seen = image

    # -- deciding (any thread) ----------------------------------------------------------------------
    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, principal: str, host: str, action: Action) -> bool:
        if principal in self.super_users:
            return True
        allowed = found = False
        with self._lock:
            index = self._types.get(action.resource_type)
            if index is not None:
                for by_principal in index.matching(action.resource_name):
                    found = True
                    for who in (principal, WILDCARD_PRINCIPAL):
                        for acl in by_principal.get(who, ()):
                            if _applies(acl, action.operation, principal, host):
                                if acl.permission_type == _DENY:
                                    return False
                                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not found
