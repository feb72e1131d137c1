"""The audit trail in the controller (quorum/controller/audit.py): an entry per admin request,
allowed or refused, in the batch of the records it explains; a broker's own requests only when
they change metadata; the controller's own decisions attributed to it; never a secret; refusals
alike summarised; the entries one hash chain, which a changed entry breaks."""
from __future__ import annotations

from controller_helpers import controller, create, heartbeat, metadata_written

from quorum.controller import api, registry
from quorum.controller.audit import REFUSALS_SUMMARISED_S, AuditContext, verify
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.records import decode_record

ALICE = AuditContext("User:alice", "10.0.0.7", "CONTROLLER", ("apache-kafka-java", "4.4.0"))


def entries(c, since: int = 0) -> list[tuple[int, pb.AuditRecord]]:
    return [(b.base_offset + i, m) for b in c.log if not b.control for i, r in enumerate(b.records)
            if b.base_offset + i >= since and isinstance(m := decode_record(r).message, pb.AuditRecord)]


def request(c, req, context=ALICE):
    op = c.core.handle(req, c.now, context)
    c.propose(op)
    return op


def test_an_admin_write_is_audited_after_its_records_in_its_batch():
    c, _ = controller(1)
    start = c.end_offset
    request(c, api.CreateTopicsRequest((api.CreatableTopic("orders", 2, 1, configs=(("retention.ms", "1000"),)),)))
    (batch,) = [b for b in c.log if b.base_offset >= start]
    kinds = [type(decode_record(r).message).__name__ for r in batch.records]
    assert kinds[-1] == "AuditRecord" and kinds[:-1].count("PartitionRecord") == 2
    ((offset, e),) = entries(c, start)
    assert (e.principal, e.client_host, e.listener, e.client_software_name, e.client_software_version) == (
        "User:alice", "10.0.0.7", "CONTROLLER", "apache-kafka-java", "4.4.0")
    assert (e.request, list(e.resources), e.error_code, e.record_count) == ("CreateTopics", ["TOPIC:orders"], 0,
                                                                               len(batch.records) - 1)
    assert "retention.ms=1000" in e.changes


def test_a_refusal_is_audited_and_changes_no_metadata():
    c, _ = controller(1)
    create(c, "t")
    before, start = c.core.image, c.end_offset
    op = request(c, api.DeleteTopicsRequest(("nope",)))
    assert op.error is None and op.reply[0].error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    ((_, e),) = entries(c, start)
    assert e.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.value and e.record_count == 0
    assert c.core.image.same_metadata(before)
    e2 = c.core.refused(None, api.UpdateFeaturesRequest((("metadata.version", 1),)), None, 0)
    assert e2.error is None and not e2.batches  # a request the registry does not know: nothing to audit


def test_a_brokers_heartbeat_is_audited_only_when_it_changes_something():
    c, epochs = controller(2)
    start = c.end_offset
    heartbeat(c, 0, epochs[0])  # nothing changes
    assert entries(c, start) == []
    heartbeat(c, 0, epochs[0], want_shutdown=True)  # a controlled shutdown
    ((_, e),) = entries(c, start)
    assert e.request == "BrokerHeartbeat" and list(e.resources) == ["BROKER:0"]


def test_secrets_never_appear():
    c, _ = controller(1)
    start = c.end_offset
    request(c, api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("BROKER", ""), (
        api.AlterableConfig("listener.name.internal.ssl.keystore.password", "SET", "hunter2-keystore"),
        api.AlterableConfig("sasl.jaas.config", "SET", "password=\"hunter2-jaas\""))),)))
    request(c, api.AlterUserScramCredentialsRequest(upsertions=(api.ScramCredentialUpsertion(
        "bob", "SCRAM-SHA-256", 8192, b"salt-salt-salt-salt", b"salted-password-bytes-32-long!!!"),)))
    text = b"".join(e.SerializeToString() for _, e in entries(c, start))
    for secret in (b"hunter2", b"salt-salt", b"salted-password"):
        assert secret not in text
    assert b"(sensitive)" in text and b"bob SCRAM-SHA-256 iterations=8192" in text


def test_refusals_alike_are_summarised():
    """A client hammering the controllers with denied writes: its first refusal gets an entry, the
    others in the interval one entry counting them."""
    c, _ = controller(1)
    start = c.end_offset
    mallory = AuditContext("User:mallory", "10.6.6.6")
    delete = api.DeleteTopicsRequest(("x",))
    denied = SparkraftError(Errors.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    for _ in range(50):
        c.propose(c.core.refused(registry.row_of(delete), delete, denied, c.now, mallory))
    assert len(entries(c, start)) == 1  # the first; the other 49 counted
    c.now += int(REFUSALS_SUMMARISED_S * 1000) + 1
    for op in c.core.tick(c.now):
        c.propose(op)
    summaries = [e for _, e in entries(c, start) if e.occurrences > 1]
    assert len(summaries) == 1 and summaries[0].occurrences == 49 and summaries[0].principal == "User:mallory"
    assert verify(entries(c)) is None


def test_a_refusal_another_controller_answered_is_recorded_as_its_own_and_summarised_alike():
    """RecordRefusal (quorum/node/refusal_reports.py): the entry is the refused request's, with the
    reporting controller's view of who sent it; no entry of its own for the report."""
    c, _ = controller(1)
    start = c.end_offset
    report = api.RecordRefusalRequest(2, "User:bob", "10.0.0.9", "grpc", ("", ""), "", "AlterUserScramCredentials",
                                      ("USER:bob",), ("set bob SCRAM-SHA-256 iterations=8192",),
                                      Errors.INVALID_REQUEST.value, "carries secrets, taken only over TLS")
    for _ in range(5):
        c.request(report)
    ((_, e),) = entries(c, start)
    assert (e.principal, e.client_host, e.request, list(e.resources), e.error_code, e.record_count) == (
        "User:bob", "10.0.0.9", "AlterUserScramCredentials", ["USER:bob"], Errors.INVALID_REQUEST.value, 0)
    assert metadata_written(c, start) == 0
    c.now += int(REFUSALS_SUMMARISED_S * 1000) + 1
    for op in c.core.tick(c.now):
        c.propose(op)
    assert [e.occurrences for _, e in entries(c, start) if e.request == "AlterUserScramCredentials"] == [1, 4]
    assert verify(entries(c)) is None


def test_the_entries_form_one_chain_that_an_edit_breaks():
    c, _ = controller(1)
    for i in range(5):
        create(c, f"t{i}")
    trail = entries(c)
    assert len(trail) >= 5 and verify(trail) is None
    offset, changed = trail[2]
    tampered = pb.AuditRecord()
    tampered.CopyFrom(changed)
    tampered.principal = "User:someone-else"
    assert f"offset {offset}" in verify([*trail[:2], (offset, tampered), *trail[3:]])
    assert verify([*trail[:2], *trail[3:]]) is not None  # one removed


def test_what_a_forwarding_node_names_of_its_client_is_bounded():
    from quorum.controller.audit import MAX_NAME, software_of

    assert software_of("apache-kafka-java/4.4.0") == ("apache-kafka-java", "4.4.0")
    assert software_of("x" * 10_000 + "/" + "y" * 10_000) == ("x" * MAX_NAME, "y" * MAX_NAME)
    assert software_of("") == ("", "")


def test_with_the_trail_off_nothing_is_audited():
    """metadata.audit.enable=false: no entry for a write, a refusal or the controller's own decisions."""
    c, _ = controller(1, audit=False)
    start = c.end_offset
    create(c, "orders")
    delete = api.DeleteTopicsRequest(("nope",))
    c.propose(c.core.refused(registry.row_of(delete), delete, SparkraftError(
        Errors.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."), c.now, ALICE))
    c.now += 60_000  # the broker's session expires: fenced by the controller
    for op in c.core.tick(c.now):
        c.propose(op)
    assert entries(c, start) == [] and metadata_written(c, start) > 2
