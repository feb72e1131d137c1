"""A revert's plan (delta_tables/revert.py) from two images of one controller: every domain's
steps in Kafka's terms and in the order they are applied, what cannot be restored with its
reason, the domains chosen and no others, and a saved plan that reads back equal (how --execute
finds that nothing changed since it was reviewed)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "controller"))
from controller_helpers import controller, create  # noqa: E402

from delta_tables.revert import DOMAINS, ORDER, Plan, plan  # noqa: E402
from quorum.controller import api  # noqa: E402

ALLOW_ALICE = api.AclBinding("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
ALLOW_BOB = api.AclBinding("TOPIC", "orders", "LITERAL", "User:bob", "*", "WRITE", "ALLOW")


def _scram(name: str) -> api.AlterUserScramCredentialsRequest:
    return api.AlterUserScramCredentialsRequest(upsertions=(
        api.ScramCredentialUpsertion(name, "SCRAM-SHA-256", 8192, b"s" * 16, b"p" * 32),))


def _alter(kind: str, name: str, *ops) -> api.IncrementalAlterConfigsRequest:
    return api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey(kind, name),
                                                tuple(api.AlterableConfig(*op) for op in ops)),))


def _quota(user: str, key: str, value) -> api.AlterClientQuotasRequest:
    return api.AlterClientQuotasRequest((api.ClientQuotaAlteration((("user", user),), ((key, value),)),))


@pytest.fixture
def history():
    """(the image at the target cut, the image now) of a cluster changed in every domain since."""
    c, _ = controller(3)
    create(c, "orders", 3, 2, configs=(("retention.ms", "1000"),))
    create(c, "payments", 2, 1)
    c.request(_alter("BROKER", "1", ("log.retention.ms", "SET", "5000")))
    c.request(_alter("CLUSTER", "", ("num.partitions", "SET", "2")))
    c.request(api.CreateAclsRequest((ALLOW_ALICE,)))
    c.request(_quota("alice", "producer_byte_rate", 1024.0))
    c.request(_scram("alice"))
    target = c.core.image
    # then: every domain changes
    c.request(api.DeleteTopicsRequest(("payments",)))
    create(c, "audit-log", 1, 1)
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("orders", 5),)))
    c.request(_alter("TOPIC", "orders", ("retention.ms", "SET", "9999"), ("cleanup.policy", "SET", "compact")))
    c.request(_alter("BROKER", "1", ("log.retention.ms", "DELETE", None)))
    c.request(_alter("CLUSTER", "", ("num.partitions", "SET", "4")))
    c.request(api.DeleteAclsRequest((ALLOW_ALICE,)))
    c.request(api.CreateAclsRequest((ALLOW_BOB,)))
    c.request(_quota("alice", "producer_byte_rate", 2048.0))
    c.request(_quota("bob", "consumer_byte_rate", 10.0))
    c.request(api.AlterUserScramCredentialsRequest(deletions=(api.ScramCredentialDeletion("alice", "SCRAM-SHA-256"),)))
    c.request(_scram("bob"))
    return target, c.core.image


def test_every_domain_is_planned_in_kafkas_terms_and_in_order(history):
    target, now = history
    p = plan(now, target, DOMAINS, 100, 50)
    lines = [s.describe() for s in p.steps]
    assert lines == [
        "create ACL ALLOW User:alice READ on TOPIC:orders (LITERAL) from *",
        "create topic payments (2 partitions, replication factor 1)",
        "set BROKER:1 log.retention.ms=5000",
        "set CLUSTER: num.partitions=2 (now 4)",
        "set TOPIC:orders retention.ms=1000 (now 9999)",
        "delete TOPIC:orders cleanup.policy (now compact)",
        "set quota user=alice producer_byte_rate=1024 (now 2048)",
        "remove quota user=bob consumer_byte_rate (now 10)",
        "delete ACL ALLOW User:bob WRITE on TOPIC:orders (LITERAL) from *",
        "delete SCRAM credential bob SCRAM-SHA-256",
        "delete topic audit-log (1 partitions)",
    ], lines
    assert [s.kind for s in p.steps] == sorted((s.kind for s in p.steps), key=ORDER.index)
    cannot = {(c.what, c.reason.split(":")[0]) for c in p.cannot}
    assert ("topic orders: 5 partitions, 3 at the target", "a partition count cannot shrink") in cannot
    assert ("topic payments's data", "a deleted topic is created again empty") in cannot
    assert ("SCRAM credential alice SCRAM-SHA-256", "a SCRAM password cannot be recovered from its salted form") \
        in cannot


def test_only_the_chosen_domains_are_planned(history):
    target, now = history
    p = plan(now, target, ("configs", "quotas"), 100, 50)
    assert {s.domain for s in p.steps} == {"configs", "quotas"} and p.domains == ("configs", "quotas")
    assert not any(c.domain == "topics" for c in p.cannot)
    with pytest.raises(ValueError, match="unknown domain 'groups'"):
        plan(now, target, ("groups",), 100, 50)


def test_nothing_to_do_when_the_images_agree(history):
    target, _ = history
    p = plan(target, target, DOMAINS, 50, 50)
    assert p.steps == [] and p.cannot == []


def test_a_saved_plan_reads_back_equal_and_a_changed_cluster_shows_in_its_differences(history):
    target, now = history
    p = plan(now, target, DOMAINS, 100, 50)
    again = Plan.from_json(p.to_json())
    assert again.steps == p.steps and again.cannot == p.cannot and p.differences(again) == []
    fewer = plan(now, target, ("acls",), 100, 50)
    diff = plan(now, target, ("acls", "features"), 100, 50).differences(fewer)
    assert diff == []  # features did not change
    changed = p.differences(fewer)
    assert "no longer applies: create topic payments (2 partitions, replication factor 1)" in changed
    with pytest.raises(ValueError, match="not a plan sparkraft revert wrote"):
        Plan.from_json('{"steps": []}')


def test_a_feature_raised_since_is_lowered_as_a_safe_downgrade_last(history):
    from dataclasses import replace

    from quorum.metadata.pmap import PMap

    target, now = history
    assert plan(now, target, ("features",), 1, 0).steps == []  # no level changed
    raised = replace(now, features=replace(now.features, levels=PMap.from_dict({**now.features.levels,
                                                                                "group.version": 1})))
    p = plan(raised, target, DOMAINS, 2, 1)
    assert (p.steps[-1].kind, p.steps[-1].resource, p.steps[-1].before, p.steps[-1].after) == (
        "downgrade-feature", "group.version", 1, 0)
    assert "SAFE_DOWNGRADE" in p.steps[-1].describe()
