"""Before a node runs Raft it asks the other voters whether they share its cluster id: storage
formatted for another cluster must fail at start with one clear error, not vote in a stranger's
elections."""
from __future__ import annotations

from typing import Mapping

import grpc

from quorum.config import HostPort
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.rpc.convert import format_endpoint
from quorum.rpc.peer_client import CHANNEL_OPTIONS
from quorum.security.client import PLAINTEXT, ClientSecurity

CLUSTER_PROBE_S = 0.5  # how long to wait for the other voters' answers


def majority_elsewhere(voters: Mapping[int, HostPort], others: Mapping[int, str]) -> bool:
    """More voters than a majority can spare say they are in another cluster."""
    return len(others) > len(voters) - (len(voters) // 2 + 1)


def probe_cluster_id(node_id: int, cluster_id: str, voters: Mapping[int, HostPort], log_dir,
                     security: ClientSecurity = PLAINTEXT) -> None:
    """Raise INCONSISTENT_CLUSTER_ID if a majority of the voters say they are in another cluster;
    voters that do not answer in CLUSTER_PROBE_S count for nothing."""
    others = [v for v in voters if v != node_id]
    if not others:
        return
    channels, calls = [], {}
    request = raft_pb2.DescribeQuorumRequest(cluster_id=cluster_id)
    for v in others:
        ch = security.channel(format_endpoint(*voters[v]), options=CHANNEL_OPTIONS)
        channels.append(ch)
        calls[v] = raft_pb2_grpc.RaftStub(ch).DescribeQuorum.future(request, timeout=CLUSTER_PROBE_S)
    theirs: dict[int, str] = {}
    for v, call in calls.items():
        try:
            resp = call.result()
        except grpc.RpcError:
            continue
        if resp.error == Errors.INCONSISTENT_CLUSTER_ID:
            theirs[v] = resp.cluster_id
    for ch in channels:
        ch.close()
    if majority_elsewhere(voters, theirs):
        raise foreign_cluster_error(cluster_id, theirs, log_dir)


def foreign_cluster_error(cluster_id: str, theirs: Mapping[int, str], log_dir) -> SparkraftError:
    ids = ", ".join(str(v) for v in sorted(theirs))
    others = sorted({c for c in theirs.values() if c})
    return SparkraftError(
        Errors.INCONSISTENT_CLUSTER_ID,
        f"{log_dir} belongs to cluster {cluster_id} but voters {ids} are in cluster "
        f"{', '.join(others) or 'another one'}; this node was formatted for another cluster")
