"""Per-partition results written as bytes read back as the results protobuf would have written."""
from __future__ import annotations

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
