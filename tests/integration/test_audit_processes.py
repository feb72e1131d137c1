"""The audit trail against real processes (docs/use/audit.md): three secured controllers (TLS, SCRAM
users, client certificates requested, the StandardAuthorizer), an admin who creates users and
grants ACLs, a SCRAM user and a user known by her certificate who each create, alter and delete
their topics, one refused for lack of ACLs, and the active controller SIGKILLed in the middle. The
streaming job materialises the log; ``sparkraft audit`` and the console then say who did each
thing from where, with the denied attempt recorded, every acknowledged write has its entry (and
each entry that says ``done`` its records), the chain verifies, and the users' passwords appear in
no entry, no Delta file, no log segment and no console page. (Requests a Kafka broker forwards
for its clients, with Kafka's client software named, are in test_kafka_brokers.py.)"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sparkraft_cmd
from test_scram_processes import _formatted, running
from test_security_processes import ok, refused

sys.path.insert(0, str(Path(__file__).parent.parent / "console"))

pytestmark = pytest.mark.slow

ALICE_SECRET, MALLORY_SECRET = "alice-audit-secret-4711", "mallory-audit-secret-0815"


def _topic(cp, action: str, name: str, config) -> None:
    args = ("topics", action, "--topic", name) + (("--partitions", "1", "--replication-factor", "1")
                                                  if action == "create" else ())
    ok(cp, *args, config=config)


@pytest.fixture
def secured(controller_processes, tmp_path):
    """Mutual TLS: users known by their client certificate and, on the same listener, SCRAM users
    (whose devices show a certificate too; their principal is the one they log in as)."""
    yield from running(_formatted(controller_processes, tmp_path, **{"ssl.client.auth": "required"}))


def scram_user(cp, name: str, password: str):
    return cp.pki.client_config(f"{name}-scram", protocol="SASL_SSL", mechanism="SCRAM-SHA-512", username=name,
                                password=password, keystore=cp.pki.keystore(f"{name}-device"))


def test_who_did_what_is_recorded_verified_and_never_a_secret(secured, tmp_path):
    cp = secured
    for name, secret in (("alice", ALICE_SECRET), ("mallory", MALLORY_SECRET)):
        ok(cp, "configs", "alter", "--entity-type", "users", "--entity-name", name, "--add-config",
           f"SCRAM-SHA-512=[password={secret}]")
    for user in ("alice", "carol"):
        for op in ("CREATE", "ALTER_CONFIGS", "DELETE", "DESCRIBE"):
            ok(cp, "acls", "--add", "--allow-principal", f"User:{user}", "--operation", op, "--topic", f"{user}-",
               "--resource-pattern-type", "PREFIXED")
    alice, mallory = scram_user(cp, "alice", ALICE_SECRET), scram_user(cp, "mallory", MALLORY_SECRET)
    carol = cp.pki.client_config("carol", keystore=cp.pki.keystore("carol"))  # mutual TLS: no password
    _topic(cp, "create", "alice-1", alice)
    ok(cp, "configs", "alter", "--entity-type", "topics", "--entity-name", "alice-1", "--add-config",
       "retention.ms=86400000", config=alice)
    _topic(cp, "create", "alice-2", alice)
    _topic(cp, "delete", "alice-1", alice)
    _topic(cp, "create", "carol-1", carol)
    ok(cp, "configs", "alter", "--entity-type", "topics", "--entity-name", "carol-1", "--add-config",
       "cleanup.policy=compact", config=carol)
    _topic(cp, "delete", "carol-1", carol)
    refused(cp, "topics", "create", "--topic", "mallory-1", "--partitions", "1", "--replication-factor", "1",
            config=mallory, error="TOPIC_AUTHORIZATION_FAILED")
    leader = cp.wait_leader().leader_id
    cp.kill(leader)
    cp.wait_leader(timeout=60, exclude=(leader,))
    _topic(cp, "create", "alice-3", alice)  # acknowledged by the new active controller
    cp.start([leader])

    wh = tmp_path / "wh"
    job = subprocess.run(sparkraft_cmd("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse", str(wh),
                                       "--checkpoint", str(tmp_path / "ck"), "--available-now", "--command-config",
                                       str(cp.admin)), capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr[-3000:]

    def audit(*args: str) -> list[dict]:
        out = subprocess.run(sparkraft_cmd("audit", "--warehouse", str(wh), "--json", *args), capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    entries = audit()
    by = {(e["principal"], e["request"], tuple(e["resources"]), e["outcome"]) for e in entries}
    for want in (("User:alice", "CreateTopics", ("TOPIC:alice-1",), "done"),
                 ("User:alice", "IncrementalAlterConfigs", ("TOPIC:alice-1",), "done"),
                 ("User:alice", "CreateTopics", ("TOPIC:alice-2",), "done"),
                 ("User:alice", "DeleteTopics", ("TOPIC:alice-1",), "done"),
                 ("User:alice", "CreateTopics", ("TOPIC:alice-3",), "done"),
                 ("User:carol", "CreateTopics", ("TOPIC:carol-1",), "done"),
                 ("User:carol", "IncrementalAlterConfigs", ("TOPIC:carol-1",), "done"),
                 ("User:carol", "DeleteTopics", ("TOPIC:carol-1",), "done"),
                 ("User:mallory", "CreateTopics", ("TOPIC:mallory-1",), "denied"),
                 ("User:admin", "AlterUserScramCredentials", ("USER:alice",), "done"),
                 ("User:admin", "CreateAcls", ("TOPIC:alice-",), "done")):
        assert want in by, (want, sorted(by))
    alters = [e for e in entries if e["request"] == "IncrementalAlterConfigs"]
    assert alters[0]["changes"] == ["retention.ms=86400000"] and alters[0]["client_host"] == "127.0.0.1"
    (denied,) = audit("--outcome", "denied")
    assert denied["principal"] == "User:mallory" and "may not CREATE topic mallory-1" in denied["error_message"]
    assert [e["request"] for e in audit("--principal", "User:alice", "--resource", "TOPIC:alice-1")] == [
        "CreateTopics", "IncrementalAlterConfigs", "DeleteTopics"]

    # each entry that says done wrote its records, just before it
    from deltalake import DeltaTable

    records = {r["offset"]: r for r in DeltaTable(str(wh / "records")).to_pyarrow_table(
        columns=["offset", "type", "data"]).to_pylist()}
    for e in entries:
        if e["request"] in ("CreateTopics", "DeleteTopics") and e["outcome"] == "done":
            kinds = {records[o]["type"] for o in range(e["first_offset"], e["offset"])}
            assert kinds & {"TOPIC_RECORD", "REMOVE_TOPIC_RECORD"}, e
    verified = subprocess.run(sparkraft_cmd("audit", "--warehouse", str(wh), "--verify"), capture_output=True,
                              text=True, timeout=120)
    assert verified.returncode == 0 and "verifies" in verified.stdout, verified.stderr

    # no password anywhere: the Delta files, the controllers' log segments and snapshots, their output
    places = [p for p in wh.rglob("*") if p.is_file()] + [p for i in cp.voters for p in cp.partition_dir(i).rglob("*")
                                                          if p.is_file()] + [cp.output(i) for i in cp.voters]
    for path in places:
        data = path.read_bytes()
        for secret in (ALICE_SECRET, MALLORY_SECRET):
            assert secret.encode() not in data, f"{secret} in {path}"
    assert len(places) > 20

    # the CLI's table, and a bad filter, as a person sees them
    table = subprocess.run(sparkraft_cmd("audit", "--warehouse", str(wh), "--principal", "User:mallory"),
                           capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "denied" in table.stdout and "mallory-1" in table.stdout
    wrong = subprocess.run(sparkraft_cmd("audit", "--warehouse", str(wh), "--since", "last week"),
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1 and "is not an ISO 8601 time" in wrong.stderr

    # the controllers' own log says the same to whoever may DESCRIBE the cluster, and no more to others
    def from_the_log(*args: str, config=cp.admin):
        return subprocess.run(sparkraft_cmd("audit", "--bootstrap-controller", cp.bootstrap(), "--command-config",
                                            str(config), *args), capture_output=True, text=True, timeout=120)

    logged = from_the_log("--json", "--principal", "User:carol")
    assert logged.returncode == 0, logged.stderr
    assert [e["request"] for e in json.loads(logged.stdout)] == ["CreateTopics", "IncrementalAlterConfigs",
                                                                 "DeleteTopics"]
    assert "verifies" in from_the_log("--verify").stdout
    stranger = from_the_log("--json", config=mallory)
    assert stranger.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in stranger.stderr, stranger.stderr
    assert stranger.stderr.count("\n") == 1 and MALLORY_SECRET not in stranger.stderr

    # a user without permission cannot revert the cluster (reading its state needs CLUSTER_ACTION)
    cut = json.loads(subprocess.run(sparkraft_cmd("sql", "SELECT min(\"offset\") AS o FROM snapshots", "--warehouse",
                                                  str(wh), "--json"), capture_output=True, text=True,
                                    timeout=120).stdout)[0]["o"]
    topics_before = sorted(json.loads(ok(cp, "topics", "list", "--json")))
    denied = subprocess.run(sparkraft_cmd("revert", "--warehouse", str(wh), "--to-offset", str(cut), "--execute",
                                          "--allow-topic-deletion", "--bootstrap-controller", cp.bootstrap(),
                                          "--command-config", str(mallory)), capture_output=True, text=True,
                            timeout=120)
    assert denied.returncode == 1 and denied.stderr.count("\n") == 1, denied.stderr
    assert "CLUSTER_AUTHORIZATION_FAILED" in denied.stderr and MALLORY_SECRET not in denied.stderr
    assert sorted(json.loads(ok(cp, "topics", "list", "--json"))) == topics_before

    # the console says the same, and shows no secret either
    from test_console_server import Console

    console = Console(wh)
    try:
        status, page, _ = console.get("/audit?principal=User%3Acarol")
        assert status == 200 and page.count('<tr data-outcome="done">') == 3 and "127.0.0.1" in page, page[-3000:]
        status, topic, _ = console.get("/topics/alice-2")
        assert status == 200 and re.search(r'<table id="history">.*User:alice.*CreateTopics', topic, re.S)
        for text in (page, topic, console.get("/audit")[1]):
            assert ALICE_SECRET not in text and MALLORY_SECRET not in text
    finally:
        console.close()
