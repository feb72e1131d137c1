"""CreateAcls, DeleteAcls and DescribeAcls (Kafka's AclControlManager): ACL records by id.

A filter (DeleteAcls, DescribeAcls) matches as Kafka's AclBindingFilter: an enum field "ANY"
matches anything, an empty or None string field matches anything, and pattern type "MATCH" matches
a literal binding of the same name, the literal wildcard "*" and every prefixed binding the name
starts with. Creating a binding that exists already succeeds without a record.
"""
from __future__ import annotations

from collections.abc import Callable

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.acls import AclEntry
from quorum.metadata.image import MetadataImage
from quorum.metadata.versions import CIDR_ACLS, release
from quorum.security.cidr import cidr_refusal

_RT, _PT = pb.AclResourceType.Code, pb.PatternType.Code
_OP, _PERM = pb.AclOperation.Code, pb.AclPermissionType.Code
CONCRETE_RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")


def _code(enum, name: str, what: str) -> int:
    try:
        return enum.Value(name.upper())
    except ValueError:
        raise SparkraftError(Errors.INVALID_REQUEST, f"Unknown {what} {name!r}") from None


def to_entry(acl_id: str, b: api.AclBinding, cidr_hosts: bool = True) -> AclEntry:
    """A binding to create, validated; INVALID_REQUEST if it cannot be stored. ``cidr_hosts``: may
    its host be a CIDR block (metadata.version 4.4-IV1 or later)?"""
    if b.resource_type.upper() not in CONCRETE_RESOURCE_TYPES:
        raise SparkraftError(Errors.INVALID_REQUEST, f"Invalid resourceType {b.resource_type}")
    if b.pattern_type.upper() not in ("LITERAL", "PREFIXED"):
        raise SparkraftError(Errors.INVALID_REQUEST, f"Invalid patternType {b.pattern_type}")
    if b.operation.upper() in ("ANY", "UNKNOWN"):
        raise SparkraftError(Errors.INVALID_REQUEST, f"Invalid operation {b.operation}")
    if b.permission_type.upper() not in ("ALLOW", "DENY"):
        raise SparkraftError(Errors.INVALID_REQUEST, f"Invalid permissionType {b.permission_type}")
    if not b.resource_name:
        raise SparkraftError(Errors.INVALID_REQUEST, "Resource name should not be empty")
    if ":" not in b.principal or b.principal.startswith(":"):
        raise SparkraftError(Errors.INVALID_REQUEST, f"Could not parse principal from `{b.principal}` "
                                                     f"(no colon is found separating the principal "
                                                     f"type from the principal name)")
    if not b.host:
        raise SparkraftError(Errors.INVALID_REQUEST, "Host should not be empty")
    if "/" in b.host:
        if not cidr_hosts:
            raise SparkraftError(Errors.UNSUPPORTED_VERSION, f"CIDR-based ACL host patterns require metadata "
                                                             f"version {release(CIDR_ACLS)} or higher.")
        why = cidr_refusal(b.host)
        if why is not None:
            raise SparkraftError(Errors.INVALID_REQUEST, f"Invalid CIDR notation '{b.host}': {why}")
    return AclEntry(acl_id, _code(_RT, b.resource_type, "resource type"), b.resource_name,
                    _code(_PT, b.pattern_type, "pattern type"), b.principal, b.host,
                    _code(_OP, b.operation, "operation"), _code(_PERM, b.permission_type, "permission type"))


def to_binding(e: AclEntry) -> api.AclBinding:
    return api.AclBinding(_RT.Name(e.resource_type), e.resource_name, _PT.Name(e.pattern_type),
                          e.principal, e.host, _OP.Name(e.operation), _PERM.Name(e.permission_type))


def _binding_key(e: AclEntry) -> tuple:
    """What makes two ACL entries the same binding (everything but the id)."""
    return (e.resource_type, e.resource_name, e.pattern_type, e.principal, e.host, e.operation, e.permission_type)


def matcher(f: api.AclBinding) -> Callable[[AclEntry], bool]:
    """A predicate for a filter; INVALID_REQUEST if the filter cannot match anything sensible."""
    rt = _code(_RT, f.resource_type or "ANY", "resource type")
    pt = _code(_PT, f.pattern_type or "ANY", "pattern type")
    op = _code(_OP, f.operation or "ANY", "operation")
    perm = _code(_PERM, f.permission_type or "ANY", "permission type")
    if pt == _PT.Value("UNKNOWN") or rt == _RT.Value("UNKNOWN"):
        raise SparkraftError(Errors.INVALID_REQUEST, "A filter cannot match UNKNOWN types")
    any_rt, any_pt, any_op, any_perm = (_RT.Value("ANY"), _PT.Value("ANY"), _OP.Value("ANY"),
                                        _PERM.Value("ANY"))
    match_pt, literal, prefixed = _PT.Value("MATCH"), _PT.Value("LITERAL"), _PT.Value("PREFIXED")
    name, principal, host = f.resource_name or None, f.principal or None, f.host or None

    def name_matches(e: AclEntry) -> bool:
        if pt == match_pt and name is not None:
            if e.pattern_type == literal:
                return e.resource_name == name or e.resource_name == "*"
            return e.pattern_type == prefixed and name.startswith(e.resource_name)
        if pt not in (any_pt, match_pt) and e.pattern_type != pt:
            return False
        return name is None or e.resource_name == name

    def matches(e: AclEntry) -> bool:
        return ((rt == any_rt or e.resource_type == rt) and name_matches(e)
                and (principal is None or e.principal == principal)
                and (host is None or e.host == host)
                and (op == any_op or e.operation == op)
                and (perm == any_perm or e.permission_type == perm))
    return matches


def create(image: MetadataImage, req: api.CreateAclsRequest, new_id: Callable[[], str]
           ) -> tuple[list[pb.AccessControlEntryRecord], tuple[api.ItemResult, ...]]:
    records, results = [], []
    known = {_binding_key(e) for e in image.acls.acls.values()}  # one pass, not one per binding
    cidr_hosts = (image.features.metadata_version or 0) >= CIDR_ACLS
    for b in req.bindings:
        try:
            entry = to_entry("", b, cidr_hosts)
        except SparkraftError as e:
            results.append(api.ItemResult(e.error, e.message))
            continue
        key = _binding_key(entry)
        if key not in known:
            known.add(key)
            records.append(AclEntry(new_id(), *key).to_record())
        results.append(api.ItemResult())
    return records, tuple(results)


def delete(image: MetadataImage, req: api.DeleteAclsRequest
           ) -> tuple[list[pb.RemoveAccessControlEntryRecord], tuple]:
    records, results, removed = [], [], set()
    for f in req.filters:
        try:
            match = matcher(f)
        except SparkraftError as e:
            results.append((api.ItemResult(e.error, e.message), ()))
            continue
        hits = [e for e in image.acls.acls.values() if match(e)]
        for e in hits:
            if e.id not in removed:
                removed.add(e.id)
                records.append(pb.RemoveAccessControlEntryRecord(id=e.id))
        results.append((api.ItemResult(), tuple(to_binding(e) for e in sorted(hits, key=lambda e: e.id))))
    return records, tuple(results)


def describe(image: MetadataImage, f: api.AclBinding) -> list[api.AclBinding]:
    match = matcher(f)
    return [to_binding(e) for e in sorted(image.acls.acls.values(), key=lambda e: e.id) if match(e)]


