"""``sparkraft revert`` against real processes (docs/use/revert.md): three controllers, brokers, the
streaming job running; a cut taken, then configs changed at every level, topics created and
deleted, ACLs and quotas added and removed; each domain reverted alone and then all together, each
verified by the job's next cut (the chosen domains equal the target's, the others untouched); a
dry run, a stale plan, topic deletions without the flag and a target cut that does not exist each
refused with one line, changing nothing."""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import LiveBrokers, newest_cut_offset, sparkraft_cmd, wait_for

from delta_tables.bootstrap import image_from_cut
from delta_tables.cut import latest_cut
from delta_tables.revert import DOMAINS, plan
from quorum.controller import api

pytestmark = pytest.mark.slow

ALICE = api.AclBinding("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
BOB = api.AclBinding("GROUP", "billing", "PREFIXED", "User:bob", "*", "READ", "ALLOW")


def _alter(kind: str, name: str, *ops) -> api.IncrementalAlterConfigsRequest:
    return api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey(kind, name),
                                                tuple(api.AlterableConfig(*op) for op in ops)),))


def _quota(user: str, key: str, value) -> api.AlterClientQuotasRequest:
    return api.AlterClientQuotasRequest((api.ClientQuotaAlteration((("user", user),), ((key, value),)),))


def _before(admin) -> None:
    admin.create_topic("orders", 3, 2, [("retention.ms", "86400000")])
    admin.create_topic("payments", 2, 2)
    admin.call(_alter("BROKER", "101", ("log.retention.ms", "SET", "5000")))
    admin.call(_alter("CLUSTER", "", ("num.partitions", "SET", "2")))
    admin.call(api.CreateAclsRequest((ALICE,)))
    admin.call(_quota("alice", "producer_byte_rate", 1024.0))


def _after(admin) -> None:
    """Every domain changes after the target cut."""
    admin.call(api.DeleteTopicsRequest(("payments",)))
    admin.create_topic("scratch", 1, 1)
    admin.call(_alter("TOPIC", "orders", ("retention.ms", "SET", "1000"), ("cleanup.policy", "SET", "compact")))
    admin.call(_alter("BROKER", "101", ("log.retention.ms", "DELETE", None)))
    admin.call(_alter("CLUSTER", "", ("num.partitions", "SET", "6")))
    admin.call(api.DeleteAclsRequest((ALICE,)))
    admin.call(api.CreateAclsRequest((BOB,)))
    admin.call(_quota("alice", "producer_byte_rate", 4096.0))
    admin.call(_quota("bob", "consumer_byte_rate", 10.0))


@pytest.fixture
def reverting(controller_processes, tmp_path):
    """(controllers, an admin client, the warehouse, the target cut's offset, run(*args)): the job
    running throughout, the target cut taken between _before and _after."""
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    wh = tmp_path / "wh"
    with ControllerClient(cp.bootstrap(), timeout=20) as admin:
        brokers = LiveBrokers(admin, admin.describe_cluster().cluster_id, ((101, None), (102, None), (103, None)))
        log = open(tmp_path / "job.log", "wb")
        job = subprocess.Popen(sparkraft_cmd("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse",
                                             str(wh), "--checkpoint", str(tmp_path / "ck"), "--trigger", "0.3",
                                             "--idle-flush", "1"), stdout=log, stderr=subprocess.STDOUT)
        try:
            brokers.wait_unfenced()
            _before(admin)
            committed = admin.call_committed(_quota("carol", "request_percentage", 50.0))[1]
            wait_for(lambda: newest_cut_offset(wh) >= committed, 240, "the job's cut of the state to go back to")
            target = newest_cut_offset(wh)
            _after(admin)

            def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
                out = subprocess.run(sparkraft_cmd("revert", "--warehouse", str(wh), *args), capture_output=True,
                                     text=True, timeout=300)
                assert not check or out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
                return out

            committed = admin.call_committed(_quota("carol", "request_percentage", 50.0))[1]  # a no-op write
            wait_for(lambda: newest_cut_offset(wh) >= committed, 240, "the job's cut of the changes")
            yield cp, admin, wh, target, run
        finally:
            job.kill()
            job.wait(10)
            log.close()
            brokers.close()


def _left(wh, target: int, domains) -> list[str]:
    """What still differs from the target cut in ``domains``, at the newest cut."""
    newest = latest_cut(str(wh))
    p = plan(image_from_cut(str(wh), newest)[0], image_from_cut(str(wh), latest_cut(str(wh), target))[0],
             domains, newest.offset, target)
    return [s.describe() for s in p.steps]


def test_each_domain_alone_then_all_together_come_back_and_refusals_change_nothing(reverting, tmp_path):
    cp, admin, wh, target, run = reverting
    bootstrap = ("--bootstrap-controller", cp.bootstrap())
    # refused, each in one line, changing nothing: a stale plan, a missing cut, bad input
    saved = tmp_path / "plan.json"
    shown = run("--to-offset", str(target), "--only", "configs,quotas", "--plan-out", str(saved), "--json")
    assert json.loads(shown.stdout)["domains"] == ["configs", "quotas"] and saved.exists()
    committed = admin.call_committed(_alter("TOPIC", "orders", ("retention.ms", "SET", "2000")))[1]  # since the plan
    wait_for(lambda: newest_cut_offset(wh) >= committed, 240, "the job's cut of the change")
    before = _left(wh, target, DOMAINS)
    stale = run("--execute", str(saved), *bootstrap, check=False)
    assert stale.returncode == 1 and stale.stderr.count("\n") == 1, stale.stderr
    assert "changed since the plan was made" in stale.stderr and "retention.ms" in stale.stderr
    for args, says in ((("--to-offset", "-1"), "no consistent cut at or below offset -1"),
                       (("--to-time", "2001-01-01T00:00:00Z"), "no record was appended by then"),
                       (("--to-offset", str(target), "--only", "groups"), "unknown domain 'groups'"),
                       (("--to-offset", str(target), "--execute"), "--execute needs --bootstrap-controller"),
                       (("--execute", str(tmp_path / "nope.json"), *bootstrap), "nope.json"),
                       (("--execute", str(saved), "--only", "acls", *bootstrap), "applies the saved plan as it is")):
        out = run(*args, check=False)
        assert out.returncode == 1 and out.stderr.count("\n") == 1 and says in out.stderr, (args, out.stderr)
    committed = admin.call_committed(_quota("carol", "request_percentage", 50.0))[1]
    wait_for(lambda: newest_cut_offset(wh) >= committed, 240, "a cut after the refusals")
    assert _left(wh, target, DOMAINS) == before, "a refused revert changed something"

    # each domain alone, then all of them
    dry = run("--to-offset", str(target))
    assert "Dry run: nothing applied" in dry.stdout and "create topic payments" in dry.stdout
    assert "delete topic scratch" in dry.stdout and "a partition count cannot shrink" not in dry.stdout
    assert _left(wh, target, DOMAINS), "a dry run changed nothing"
    for domain in ("configs", "acls", "quotas"):
        others = [d for d in DOMAINS if d != domain]
        before_others = _left(wh, target, others)
        out = run("--to-offset", str(target), "--only", domain, "--execute", *bootstrap)
        assert "Verified" in out.stdout, out.stdout
        assert _left(wh, target, (domain,)) == []
        assert _left(wh, target, others) == before_others, f"reverting {domain} touched another domain"
    refused = run("--to-offset", str(target), "--execute", *bootstrap, check=False)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--allow-topic-deletion" in refused.stderr and "scratch" in refused.stderr
    out = run("--to-offset", str(target), "--execute", "--allow-topic-deletion", *bootstrap)
    assert "Verified" in out.stdout and _left(wh, target, DOMAINS) == []
    assert sorted(admin.list_topics()) == ["orders", "payments"]
    # who did it: the revert's writes are in the audit trail, as the operator's
    entries = json.loads(subprocess.run(sparkraft_cmd("audit", "--bootstrap-controller", cp.bootstrap(), "--json",
                                                      "--resource", "TOPIC:scratch"),
                                        capture_output=True, text=True, timeout=120).stdout)
    assert [e["request"] for e in entries] == ["CreateTopics", "DeleteTopics"]


