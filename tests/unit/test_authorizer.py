"""The StandardAuthorizer against a straightforward reference: every ACL looked at, Kafka's rules
written out as plainly as they are stated (StandardAuthorizerData.findResult and MatchingRuleBuilder),
over random ACL sets and requests; and the index following committed images by their differences."""
from __future__ import annotations

import ipaddress
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller import api
from quorum.controller.acls_control import to_binding, to_entry
from quorum.metadata.acls import AclsImage
from quorum.metadata.pmap import PMap
from quorum.security.authorizer import Action, Authorizer, cluster_action, topic_action

NAMES = ["a", "ab", "abc", "b", "*", "orders", "orders-1", "orders-10", "pay"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
CIDR_HOSTS = ["10.0.0.0/31", "10.0.0.2/32", "10.0.0.0/8", "::1/128"]  # blocks (metadata.version 4.4-IV1)
OPERATIONS = ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS"]


def reference(acls: list[api.AclBinding], super_users, allow_if_no_acl: bool, principal: str, host: str,
              operation: str, resource_type: str, name: str) -> bool:
    if principal in super_users:
        return True
    resource_acls = [b for b in acls if b.resource_type == resource_type and (
        (b.pattern_type == "LITERAL" and (b.resource_name == name or b.resource_name == "*"))
        or (b.pattern_type == "PREFIXED" and name.startswith(b.resource_name)))]

    def applies(b: api.AclBinding) -> bool:
        in_block = "/" in b.host and ipaddress.ip_address(host) in ipaddress.ip_network(b.host, strict=False)
        if b.principal not in (principal, "User:*") or (b.host not in ("*", host) and not in_block):
            return False
        if b.operation in ("ALL", operation):
            return True
        if b.permission_type == "DENY":
            return False
        if operation == "DESCRIBE":
            return b.operation in ("READ", "WRITE", "DELETE", "ALTER")
        if operation == "DESCRIBE_CONFIGS":
            return b.operation == "ALTER_CONFIGS"
        return False

    matching = [b for b in resource_acls if applies(b)]
    if any(b.permission_type == "DENY" for b in matching):
        return False
    if matching:
        return True
    return allow_if_no_acl and not resource_acls


bindings = st.builds(
    api.AclBinding, resource_type=st.sampled_from(["TOPIC", "CLUSTER"]), resource_name=st.sampled_from(NAMES),
    pattern_type=st.sampled_from(["LITERAL", "PREFIXED"]), principal=st.sampled_from(PRINCIPALS),
    host=st.sampled_from(HOSTS + CIDR_HOSTS), operation=st.sampled_from(OPERATIONS),
    permission_type=st.sampled_from(["ALLOW", "DENY"]))


@settings(max_examples=300, deadline=None)
@given(acls=st.lists(bindings, max_size=25), allow_if_no_acl=st.booleans(),
       principal=st.sampled_from(["User:alice", "User:bob", "User:root"]), host=st.sampled_from(HOSTS[1:]),
       operation=st.sampled_from(OPERATIONS[1:]), resource_type=st.sampled_from(["TOPIC", "CLUSTER"]),
       name=st.sampled_from(NAMES + ["orders-100", "zzz", "abcd"]))
def test_decisions_match_the_reference(acls, allow_if_no_acl, principal, host, operation, resource_type, name):
    authorizer = Authorizer({"User:root"}, allow_if_no_acl)
    authorizer.apply([to_entry(str(i), b) for i, b in enumerate(acls)])
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb

    action = Action(pb.AclOperation.Code.Value(operation), pb.AclResourceType.Code.Value(resource_type), name)
    want = reference(acls, {"User:root"}, allow_if_no_acl, principal, host, operation, resource_type, name)
    assert authorizer.authorize(principal, host, action) == want


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), bindings), max_size=60))
def test_following_images_by_their_differences_equals_building_from_scratch(ops):
    """Adds and removes applied one image at a time (PMap.diff) leave the same decisions as an index
    built from the final ACL set, and removed ACLs leave no trace in the prefix tree."""
    follower, image, next_id, live = Authorizer(), AclsImage(), 0, {}
    for remove, binding in ops:
        acls = image.acls
        if remove and live:
            victim = sorted(live)[next_id % len(live)]
            acls = acls.discard(victim)
            del live[victim]
        else:
            entry = to_entry(f"id{next_id}", binding)
            acls = acls.set(entry.id, entry)
            live[entry.id] = entry
        next_id += 1
        image = AclsImage(acls)
        follower.follow(image)
    fresh = Authorizer()
    fresh.apply(live.values())
    assert len(follower) == len(fresh) == len(live)
    for name in NAMES + ["orders-100", "zzz"]:
        for op in ("READ", "CREATE", "DESCRIBE", "ALTER"):
            for principal in ("User:alice", "User:bob"):
                action = topic_action(op, name)
                assert follower.authorize(principal, "10.0.0.1", action) == fresh.authorize(principal, "10.0.0.1",
                                                                                             action)
    if not live:
        assert all(not index.literal and not index.prefixes.children for index in follower._types.values())


def test_a_decision_with_100000_acls_walks_the_name_not_the_acls():
    """Prefixes of many lengths and literals of many names: the answer needs only the ACLs on the
    resource's own name and its prefixes (the benchmark in bench/ measures the time)."""
    rng = random.Random(7)
    authorizer = Authorizer()
    entries = []
    for i in range(100_000):
        name = f"team{rng.randrange(2000)}-{'svc' * rng.randrange(1, 4)}{i}"
        pattern = "PREFIXED" if i % 3 == 0 else "LITERAL"
        entries.append(to_entry(str(i), api.AclBinding("TOPIC", name[: rng.randrange(5, len(name) + 1)]
                                                        if pattern == "PREFIXED" else name, pattern,
                                                        f"User:u{i % 500}", "*", "READ", "ALLOW")))
    entries.append(to_entry("deny", api.AclBinding("TOPIC", "team7-", "PREFIXED", "User:u7", "*", "READ", "DENY")))
    authorizer.apply(entries)
    readers = {e.principal for e in entries if e.resource_name == entries[42].resource_name}
    assert authorizer.authorize(next(iter(readers)), "h", topic_action("READ", entries[42].resource_name))
    assert not authorizer.authorize("User:nobody", "h", topic_action("READ", entries[42].resource_name))
    assert not authorizer.authorize("User:u7", "h", topic_action("READ", "team7-svc7"))
    assert not authorizer.authorize("User:u1", "h", cluster_action("ALTER"))


def test_super_users_and_no_acl_found():
    authorizer = Authorizer({"User:admin"}, allow_if_no_acl=True)
    assert authorizer.authorize("User:admin", "h", cluster_action("ALTER"))
    assert authorizer.authorize("User:anyone", "h", topic_action("CREATE", "free"))  # no ACL on it at all
    authorizer.apply([to_entry("1", api.AclBinding("TOPIC", "free", "LITERAL", "User:bob", "*", "READ", "ALLOW"))])
    assert not authorizer.authorize("User:anyone", "h", topic_action("CREATE", "free"))  # now it has one
    assert authorizer.authorize("User:bob", "h", topic_action("DESCRIBE", "free"))  # READ implies DESCRIBE
    assert not Authorizer().authorize("User:anyone", "h", topic_action("CREATE", "free"))  # default: deny


def test_pmap_diff_skips_what_two_images_share():
    rng = random.Random(3)
    base = PMap.from_dict({i: i for i in range(50_000)})
    for _ in range(20):
        d = dict(base.items())
        ev = base.evolver()
        for _ in range(rng.randrange(10)):
            k = rng.randrange(60_000)
            if k in d and rng.random() < 0.5:
                ev.discard(k)
                del d[k]
            else:
                ev[k] = -k
                d[k] = -k
        newer = ev.finish()
        got = {k: (old, new) for k, old, new in base.diff(newer)}
        want = {k: (base.get(k), d.get(k)) for k in set(d) | set(base) if base.get(k) != d.get(k)}
        assert got == want


def test_bindings_round_trip_for_the_cli():
    b = api.AclBinding("TOPIC", "orders-", "PREFIXED", "User:alice", "*", "CREATE", "ALLOW")
    assert to_binding(to_entry("x", b)) == b


def test_a_cidr_host_is_refused_before_4_4_iv1_and_checked_after():
    from controller_helpers import controller

    from quorum.errors import Errors

    c, _ = controller(0)
    c.request(api.UpdateFeaturesRequest((("metadata.version", 31),), upgrade_type="SAFE_DOWNGRADE"))

    def create(host):
        (r,) = c.request(api.CreateAclsRequest((api.AclBinding("TOPIC", "t", "LITERAL", "User:a", host, "READ",
                                                               "ALLOW"),)))
        return r
    r = create("10.0.0.0/8")
    assert (r.error, r.message) == (Errors.UNSUPPORTED_VERSION,
                                    "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher.")
    c.request(api.UpdateFeaturesRequest((("metadata.version", 33),)))
    assert create("10.0.0.0/8").error is Errors.NONE
    # each message as Kafka 4.4's validator gives it for the same host
    r = create("10.0.0.0/33")
    assert (r.error, r.message) == (Errors.INVALID_REQUEST, "Invalid CIDR notation '10.0.0.0/33': Value [33] not in "
                                                            "range [0,32]")
    assert create("abc/8").message == "Invalid CIDR notation 'abc/8': Could not parse [abc/8]"
    assert create(" 10.0.0.0/8").error is Errors.INVALID_REQUEST


def test_a_downgrade_below_4_4_iv1_deletes_cidr_acls_only_when_unsafe():
    from controller_helpers import controller

    from quorum.errors import Errors

    c, _ = controller(0)
    c.request(api.CreateAclsRequest((api.AclBinding("TOPIC", "t", "LITERAL", "User:a", "10.0.0.0/8", "READ", "ALLOW"),
                                     api.AclBinding("TOPIC", "t", "LITERAL", "User:a", "10.0.0.1", "READ", "ALLOW"))))
    [r] = c.request(api.UpdateFeaturesRequest((("metadata.version", 31),), upgrade_type="SAFE_DOWNGRADE"))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "1 ACL(s) with a CIDR host deleted" in r.message
    assert len(c.core.image.acls.acls) == 2
    [r] = c.request(api.UpdateFeaturesRequest((("metadata.version", 31),), upgrade_type="UNSAFE_DOWNGRADE"))
    assert r.error is Errors.NONE and [a.host for a in c.core.image.acls.acls.values()] == ["10.0.0.1"]
