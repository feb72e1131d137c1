"""Per-partition results written as bytes read back as the results protobuf would have written."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller import api
from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.rpc.controller_convert import partition_results_bytes, reply_from_proto, reply_to_proto

results = st.lists(st.builds(
    api.ElectLeadersResult,
    st.builds(api.TopicPartition, st.text(min_size=1, max_size=12), st.integers(0, 3_000_000)),
    st.sampled_from(list(Errors)), st.text(max_size=20)), max_size=50)


@settings(max_examples=300, deadline=None)
@given(results)
def test_the_bytes_are_the_results_field_protobuf_writes(reply):
    expected = pb.ElectLeadersResponse()
    for r in reply:
        m = expected.results.add()
        m.partition.topic, m.partition.partition = r.partition.topic, r.partition.partition
        if r.error is not Errors.NONE:
            m.error, m.error_message = int(r.error), r.message
    parsed = pb.ElectLeadersResponse()
    parsed.MergeFromString(partition_results_bytes(tuple(reply)))
    assert parsed == expected


def test_an_election_answer_reads_back_whole():
    reply = (api.ElectLeadersResult(api.TopicPartition("orders", 0)),
             api.ElectLeadersResult(api.TopicPartition("orders", 7), Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                                    "The preferred leader was not available."),
             api.ElectLeadersResult(api.TopicPartition("ünïcode", 300), Errors.UNKNOWN_SERVER_ERROR, "-1 is a code"))
    for method in ("ElectLeaders", "AlterPartitionReassignments"):
        assert reply_from_proto(method, reply_to_proto(method, reply)) == reply


# results as the controller makes them: a message only with an error
answers = st.lists(st.one_of(
    st.builds(api.ElectLeadersResult,
              st.builds(api.TopicPartition, st.sampled_from(["a", "b", "ünï"]), st.integers(0, 3_000_000))),
    st.builds(api.ElectLeadersResult,
              st.builds(api.TopicPartition, st.sampled_from(["a", "b", "ünï"]), st.integers(0, 3_000_000)),
              st.sampled_from([e for e in Errors if e is not Errors.NONE]), st.text(max_size=20))), max_size=60)


@settings(max_examples=300, deadline=None)
@given(answers)
def test_partition_results_are_the_results_they_were_made_of(reply):
    held = api.PartitionResults(reply)
    assert held == tuple(reply) and tuple(reply) == held and list(held) == reply
    assert len(held) == len(reply)
    assert held.failures() == [r for r in reply if r.error is not Errors.NONE]
    assert all(held[i] == reply[i] and held[i - len(reply)] == reply[i] for i in range(len(reply)))
    assert held[1:3] == tuple(reply[1:3]) and list(reversed(held)) == reply[::-1]
    for beyond in (len(reply), -len(reply) - 1):
        with pytest.raises(IndexError):
            held[beyond]
    # a run per stretch of one topic's successes, each failure on its own
    for run in held.runs():
        assert (type(run) is tuple and run[1]) or run.error is not Errors.NONE


@settings(max_examples=300, deadline=None)
@given(answers)
def test_both_forms_of_the_answer_read_back_whole(reply):
    held = api.PartitionResults(reply)
    by_topic = reply_to_proto("ElectLeaders", held, results_by_topic=True)
    one_each = reply_to_proto("ElectLeaders", held)
    assert not any(r.more_partitions for r in one_each.results)  # what a client from before reads
    assert len(by_topic.results) == sum(1 for _ in held.runs())
    for m in (by_topic, one_each):  # through the bytes, as a client gets them
        decoded = reply_from_proto("ElectLeaders", pb.ElectLeadersResponse.FromString(m.SerializeToString()))
        assert decoded == tuple(reply)


def test_a_million_elections_answer_in_a_run_per_topic():
    reply = api.PartitionResults()
    for i in range(1_000_000):
        reply.run(f"t{i // 100:05d}").append(i % 100)
    m = reply_to_proto("ElectLeaders", reply, results_by_topic=True)
    assert len(m.results) == 10_000 and len(m.SerializeToString()) < 2_000_000  # 15 MB one by one
    decoded = reply_from_proto("ElectLeaders", m)
    assert len(decoded) == 1_000_000 and decoded == reply and not decoded.failures()


def test_an_empty_run_answers_nothing():
    reply = api.PartitionResults()
    reply.run("asked-for-but-empty")
    assert len(reply) == 0 and reply == () and not reply_to_proto("ElectLeaders", reply, results_by_topic=True).results


def test_the_client_asks_for_runs_and_an_older_one_gets_a_result_each():
    from quorum.rpc.controller_convert import request_to_proto
    assert request_to_proto(api.ElectLeadersRequest("PREFERRED", None)).results_by_topic
    older = pb.ElectLeadersRequest(election_type="PREFERRED", all_partitions=True)
    assert not older.results_by_topic  # so the service answers one result each (reply_to_proto's default)
