"""A bounded fuzz run of every RPC's decoding and handling: protobuf requests with arbitrary field
values (extreme integers, empty, long and non-ASCII strings, repeated fields of any length) built
from the messages' own descriptors.

- Every controller request goes through the servicer's conversion and the controller core: the
  answer is a reply or a Kafka error (SparkraftError), never another exception, and a refused
  request leaves the image as it was.
- Every Raft request goes through the conversion and the Raft core, from a peer that is or is not
  the sender it names: the core answers or refuses, never raises, and never moves its epoch past
  what the bounds allow.
"""
from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quorum.errors import SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2, raft_pb2
from quorum.log.election_state import ElectionState
from quorum.log.memory_log import MemoryLog
from quorum.raft.core import RaftCore
from quorum.raft.limits import MAX_EPOCH, MAX_EPOCH_JUMP
from quorum.rpc import controller_convert as cc
from quorum.rpc import convert
from quorum.snapshot.memory_store import MemorySnapshotStore

sys.path.insert(0, str(Path(__file__).parent / "controller"))
from controller_helpers import controller, create  # noqa: E402

INTS = st.one_of(st.sampled_from([0, 1, -1, 2, 3, 4, 101, 2 ** 31 - 1, -(2 ** 31)]),
                 st.integers(-(2 ** 31), 2 ** 31 - 1))
LONGS = st.one_of(INTS, st.sampled_from([2 ** 63 - 1, -(2 ** 63)]))
STRINGS = st.one_of(st.sampled_from(["", "t", "orders", "coll.x", "coll_x", "retention.ms", "cleanup.policy",
                                     "PLAINTEXT", "TOPIC", "BROKER", "user", "ip", "x" * 300, "ünï", "\x00"]),
                    st.text(max_size=40))
SCALARS = {
    F.TYPE_INT32: INTS, F.TYPE_SINT32: INTS, F.TYPE_UINT32: st.integers(0, 2 ** 32 - 1),
    F.TYPE_INT64: LONGS, F.TYPE_SINT64: LONGS, F.TYPE_UINT64: st.integers(0, 2 ** 64 - 1),
    F.TYPE_BOOL: st.booleans(), F.TYPE_STRING: STRINGS, F.TYPE_BYTES: st.binary(max_size=64),
    F.TYPE_DOUBLE: st.floats(allow_nan=True, allow_infinity=True), F.TYPE_FLOAT: st.floats(width=32),
}


def message_of(descriptor, depth: int = 0):
    """A strategy for instances of a protobuf message type, from its descriptor."""
    fields = {}
    for f in descriptor.fields:
        if f.type == F.TYPE_MESSAGE:
            if depth > 3:
                continue
            value = message_of(f.message_type, depth + 1)
        elif f.type == F.TYPE_ENUM:
            value = st.sampled_from([v.number for v in f.enum_type.values] + [999])
        else:
            value = SCALARS[f.type]
        fields[f.name] = st.lists(value, max_size=4) if f.is_repeated else value
    cls = descriptor._concrete_class

    @st.composite
    def build(draw):
        m = cls()
        for name, strategy in fields.items():
            if draw(st.booleans()):
                continue  # left unset
            value = draw(strategy)
            if isinstance(value, list):
                getattr(m, name).extend(value)
            elif hasattr(value, "SerializeToString"):
                getattr(m, name).CopyFrom(value)
            else:
                setattr(m, name, value)
        return m
    return build()


CONTROLLER_REQUESTS = st.one_of(*[message_of(getattr(controller_pb2, f"{name}Request").DESCRIPTOR)
                                  for name in cc.METHODS])


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(CONTROLLER_REQUESTS)
def test_every_controller_request_gets_a_reply_or_a_kafka_error(request_pb):
    c, _ = controller(3)
    create(c, "orders", 3, 2)
    try:
        request = cc.request_from_proto(request_pb)
    except (ValueError, TypeError):
        return  # the servicer answers INVALID_REQUEST
    before = c.core.image
    try:
        reply = c.request(request)
    except SparkraftError:
        assert c.core.image.same_metadata(before), "a refused request changed the image"
        return
    cc.reply_to_proto(cc.method_of(request), reply)  # and the answer converts back


# Raft requests: arbitrary protobufs through the decoder, and decoded messages whose fields sit
# near the node's own state (its epoch 3, its voters, its log end 2), where the rules are subtle.
EPOCHS = st.sampled_from([0, 2, 3, 4, 5, 3 + MAX_EPOCH_JUMP, 4 + MAX_EPOCH_JUMP, MAX_EPOCH, -1])
IDS = st.sampled_from([1, 2, 3, -1, 7])
OFFSETS = st.sampled_from([0, 1, 2, 3, 1 << 40, -1])
CID = "fuzz-cluster-000000000"
NEAR = st.one_of(
    st.builds(raft_pb2.VoteRequest, cluster_id=st.just(CID), epoch=EPOCHS, candidate_id=IDS, last_epoch=EPOCHS,
              last_offset=OFFSETS, pre_vote=st.booleans()),
    st.builds(raft_pb2.BeginQuorumEpochRequest, cluster_id=st.just(CID), epoch=EPOCHS, leader_id=IDS),
    st.builds(raft_pb2.EndQuorumEpochRequest, cluster_id=st.just(CID), epoch=EPOCHS, leader_id=IDS,
              preferred_successors=st.lists(IDS, max_size=3)),
    st.builds(raft_pb2.FetchRequest, cluster_id=st.just(CID), epoch=EPOCHS, replica_id=IDS, fetch_offset=OFFSETS,
              last_fetched_epoch=EPOCHS, max_wait_ms=st.just(0), max_bytes=st.sampled_from([0, 1, 1 << 20])),
)
RAFT_REQUESTS = st.one_of(NEAR, *[message_of(getattr(raft_pb2, name).DESCRIPTOR) for name in (
    "VoteRequest", "BeginQuorumEpochRequest", "EndQuorumEpochRequest", "FetchRequest", "FetchSnapshotRequest")])


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(RAFT_REQUESTS, st.sampled_from([1, 2, 3, -1, 7, None]), st.sampled_from(["Follower", "Leader"]),
       st.booleans())
def test_every_raft_request_is_answered_or_refused_never_raised(request_pb, src, role, right_cluster):
    """``src`` None: the peer is who the message says (what the driver lets through most)."""
    cid = CID
    if right_cluster:
        request_pb.cluster_id = cid
    try:
        msg = convert.from_proto(request_pb)
    except (ValueError, TypeError):
        return
    if src is None:
        src = convert.request_source(msg)
    log = MemoryLog()
    log.append_as_leader([b"a", b"b"], 3, 0)
    log.flush()
    election = ElectionState(3, 1 if role == "Leader" else 2, None)
    core = RaftCore(1, (1, 2, 3), cid, log, election, 0, snapshots=MemorySnapshotStore())
    core.receive(src, 42, msg, 10)  # must not raise
    while core.has_ready():
        rd = core.ready()
        if rd.flush:
            core.log.flush()
        core.advance(rd, 10)
    assert 0 <= core.epoch <= MAX_EPOCH and core.epoch <= 3 + MAX_EPOCH_JUMP
    assert core.high_watermark <= core.log.end_offset
