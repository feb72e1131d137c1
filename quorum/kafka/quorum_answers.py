"""The KRaft quorum's requests in Kafka's protocol: DescribeQuorum (KIP-595; a broker answers it
too, from the quorum's leader, as Kafka's brokers forward it), AddRaftVoter and RemoveRaftVoter
(KIP-853, a controller's). ``ctx.quorum`` reaches the leader: controller_apis.QuorumSide on a
controller, :class:`RemoteQuorum` on a broker; ``ctx`` is the listener's apis.KafkaContext.
"""
from __future__ import annotations

from typing import Callable, Optional

from quorum.errors import Errors, SparkraftError
from quorum.kafka.codec import topic_id_text, topic_uuid
from quorum.kafka_log.topic import METADATA_TOPIC
from quorum.security.authorizer import cluster_action


class RemoteQuorum:
    """A broker's way to the quorum's leader: ``raft`` (a RaftClient). The broker still names
    itself as the controller its clients send writes to (it forwards them)."""

    def __init__(self, raft, broker_id: int):
        self.raft = raft
        self.broker_id = broker_id

    def describe_quorum(self):
        return self.raft.describe_quorum()

    def controller_id(self, listener: str) -> int:
        return self.broker_id


def _quorum_call(ctx, operation: str, call: Callable[[], object]):
    """``call()``'s result, or the error dict a Raft request answers with."""
    if ctx.quorum is None:
        return {"error_code": Errors.UNSUPPORTED_VERSION, "error_message": "this listener has no way to the quorum"}
    if not ctx.may(cluster_action(operation)):
        return {"error_code": Errors.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": f"{operation} on the cluster is not allowed"}
    try:
        return call()
    except SparkraftError as e:
        return {"error_code": e.error if e.error < 10_000 else Errors.UNKNOWN_SERVER_ERROR, "error_message": e.message}


def _replica(r) -> dict:
    return {"replica_id": r.replica_id, "replica_directory_id": topic_uuid(r.directory_id) if r.directory_id else None,
            "log_end_offset": r.log_end_offset,
            "last_fetch_timestamp": -1 if r.last_fetch_ms is None else r.last_fetch_ms,
            "last_caught_up_timestamp": -1 if r.last_caught_up_ms is None else r.last_caught_up_ms}


def describe_quorum(ctx, req, version: int) -> dict:
    asked = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        return {"error_code": Errors.INVALID_REQUEST,
                "error_message": f"DescribeQuorum describes {METADATA_TOPIC} partition 0 only", "topics": []}
    info = _quorum_call(ctx, "DESCRIBE", lambda: ctx.quorum.describe_quorum())
    if isinstance(info, dict):
        return {**info, "topics": []}
    partition = {"partition_index": 0, "error_code": Errors.NONE, "error_message": None, "leader_id": info.leader_id,
                 "leader_epoch": info.leader_epoch, "high_watermark": info.high_watermark,
                 "current_voters": [_replica(v) for v in info.voters],
                 "observers": [_replica(o) for o in info.observers]}
    nodes = [{"node_id": v.replica_id, "listeners": [{"name": e.name, "host": e.host, "port": e.port}
                                                      for e in v.endpoints]} for v in info.voters]
    return {"error_code": Errors.NONE, "error_message": None,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}], "nodes": nodes}


def _check_cluster(ctx, req) -> Optional[dict]:
    if req.cluster_id and req.cluster_id != ctx.cluster_id:
        return {"error_code": Errors.INCONSISTENT_CLUSTER_ID,
                "error_message": f"this quorum is cluster {ctx.cluster_id}, not {req.cluster_id}"}
    return None


def add_raft_voter(ctx, req, version: int) -> dict:
    refused = _check_cluster(ctx, req)
    if refused is not None:
        return refused
    listeners = [(lst.name, lst.host, lst.port) for lst in req.listeners]
    done = _quorum_call(ctx, "ALTER", lambda: ctx.quorum.raft.add_voter(
        req.voter_id, topic_id_text(req.voter_directory_id), listeners))
    return done if isinstance(done, dict) else {"error_code": Errors.NONE, "error_message": None}


def remove_raft_voter(ctx, req, version: int) -> dict:
    refused = _check_cluster(ctx, req)
    if refused is not None:
        return refused
    done = _quorum_call(ctx, "ALTER", lambda: ctx.quorum.raft.remove_voter(
        req.voter_id, topic_id_text(req.voter_directory_id)))
    return done if isinstance(done, dict) else {"error_code": Errors.NONE, "error_message": None}
