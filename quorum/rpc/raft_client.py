"""RaftClient: what the CLI, benchmarks and tests use to talk to a quorum from outside.

Give it any controllers (``"h:p,h:p"`` or ``[(host, port), ...]``); any of them may be down or a
follower. Each call tries the last known leader, then every bootstrap server in order, follows the
``leader_endpoint`` a follower names in NOT_LEADER_OR_FOLLOWER, and retries with a short backoff
until its deadline. It raises :class:`~quorum.errors.SparkraftError` with one clear line:
NETWORK_EXCEPTION when no server answered at all, NOT_LEADER_OR_FOLLOWER when servers answered but
none led before the deadline, or the server's own error (e.g. INCONSISTENT_CLUSTER_ID).

``append`` is at-least-once across leader changes: a call whose first attempt timed out or lost
its leader may have been committed and is retried, so its records can appear twice in the log.
The offsets it returns are always where the acknowledged copy was committed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Union

from quorum.config import HostPort, parse_host_port
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.raft.messages import ReplicaDescription
from quorum.rpc import convert
from quorum.rpc.leader_client import LeaderFollowingClient
from quorum.security.client import ClientSecurity

Bootstrap = Union[str, Sequence[Union[HostPort, str]]]

# Answers that mean "ask again, here or elsewhere"; anything else is the caller's problem.
_RETRIABLE = {Errors.NOT_LEADER_OR_FOLLOWER, Errors.REQUEST_TIMED_OUT, Errors.NOT_CONTROLLER,
              Errors.UNKNOWN_LEADER_EPOCH, Errors.FENCED_LEADER_EPOCH}


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """DescribeQuorum as a client sees it; replica timestamps are wall-clock ms (None: never)."""

    cluster_id: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]


def parse_bootstrap(bootstrap: Bootstrap) -> list[str]:
    """``HOST:PORT[,HOST:PORT...]`` (or a list of addresses) as gRPC targets; ValueError if malformed."""
    items: Iterable = bootstrap.split(",") if isinstance(bootstrap, str) else bootstrap
    targets = []
    for item in items:
        if isinstance(item, str):
            try:
                host, port = parse_host_port(item)
            except ValueError:
                raise ValueError(f"invalid controller address {item.strip()!r}: expected HOST:PORT") from None
        else:
            host, port = item
        target = convert.format_endpoint(host, int(port))
        if target not in targets:
            targets.append(target)
    if not targets:
        raise ValueError("no controller address given: expected HOST:PORT[,HOST:PORT...]")
    return targets


class RaftClient(LeaderFollowingClient):
    stub_class = raft_pb2_grpc.RaftStub
    retriable = frozenset(_RETRIABLE)
    wire_methods = frozenset({"Append"})

    def __init__(self, bootstrap: Bootstrap, timeout: float = 15.0, rpc_timeout: float = 2.0,
                 cluster_id: str = "", backoff: float = 0.05, security: Optional[ClientSecurity] = None):
        super().__init__(parse_bootstrap(bootstrap), timeout, rpc_timeout, backoff, security)
        self.cluster_id = cluster_id  # "" = accept whatever cluster the servers are in

    def response_error(self, resp) -> Optional[SparkraftError]:
        error = convert.error_from_code(resp.error)
        if error is Errors.NONE:
            return None
        return SparkraftError(error, resp.error_message or error.name)

    # -- the calls -------------------------------------------------------------------------
    def describe_quorum(self) -> QuorumInfo:
        resp = self._call_leader("DescribeQuorum", raft_pb2.DescribeQuorumRequest(cluster_id=self.cluster_id))
        d = convert.description_from_proto(resp)
        return QuorumInfo(resp.cluster_id, d.leader_id, d.leader_epoch, d.high_watermark, d.voters, d.observers)

    def add_voter(self, voter_id: int, directory_id: str, listeners: Sequence[tuple[str, str, int]]) -> None:
        """Add a caught-up observer to a dynamic quorum's voters; returns once committed. A leader that
        is not ready yet (the observer still catching up, another change pending) is asked again until
        the client's timeout."""
        try:
            self._call_leader("AddRaftVoter", raft_pb2.AddRaftVoterRequest(
                cluster_id=self.cluster_id, voter_id=voter_id, voter_directory_id=directory_id,
                listeners=[raft_pb2.Listener(name=n, host=h, port=p) for n, h, p in listeners]))
        except SparkraftError as e:
            if not (e.error is Errors.DUPLICATE_VOTER and self._applied_earlier(voter_id, directory_id, True)):
                raise

    def update_voter(self, voter_id: int, directory_id: str, listeners: Sequence[tuple[str, str, int]]) -> None:
        """Announce a voter's listeners to the leader (UpdateRaftVoter); returns once committed."""
        self._call_leader("UpdateRaftVoter", raft_pb2.UpdateRaftVoterRequest(
            cluster_id=self.cluster_id, voter_id=voter_id, voter_directory_id=directory_id,
            listeners=[raft_pb2.Listener(name=n, host=h, port=p) for n, h, p in listeners]))

    def remove_voter(self, voter_id: int, directory_id: str) -> None:
        """Remove a voter of a dynamic quorum; returns once committed."""
        try:
            self._call_leader("RemoveRaftVoter", raft_pb2.RemoveRaftVoterRequest(
                cluster_id=self.cluster_id, voter_id=voter_id, voter_directory_id=directory_id))
        except SparkraftError as e:
            if not (e.error is Errors.VOTER_NOT_FOUND and self._applied_earlier(voter_id, directory_id, False)):
                raise

    def _applied_earlier(self, voter_id: int, directory_id: str, voting: bool) -> bool:
        """After a voter change was refused as already done (DUPLICATE_VOTER, VOTER_NOT_FOUND): was it
        this call's own earlier attempt, whose answer the leader lost (a timeout, a leader change after
        it appended the change)? Only if there was such an attempt, and the voter set now is what the
        call asked for."""
        if not self.maybe_applied:
            return False
        voters = {(v.replica_id, v.directory_id) for v in self.describe_quorum().voters}
        return ((voter_id, directory_id) in voters) == voting

    def append(self, records: Sequence[bytes]) -> tuple[int, int]:
        """Append ``records`` as one batch; returns (base offset, last offset) once committed."""
        if not records:
            raise ValueError("append needs at least one record")
        resp = self._call_leader("Append", raft_pb2.AppendRequest(cluster_id=self.cluster_id,
                                                                  records=list(records)))
        return resp.base_offset, resp.last_offset
