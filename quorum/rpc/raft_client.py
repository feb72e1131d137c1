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

import threading
import time
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Union

import grpc

from quorum.config import HostPort, parse_host_port
from quorum.errors import Errors, SparkraftError
from quorum.raft.messages import ReplicaDescription
from quorum.rpc import convert
from quorum.rpc.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.rpc.peer_client import CHANNEL_OPTIONS

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


class RaftClient:
    def __init__(self, bootstrap: Bootstrap, timeout: float = 15.0, rpc_timeout: float = 2.0,
                 cluster_id: str = "", backoff: float = 0.05):
        self.servers = parse_bootstrap(bootstrap)
        self.timeout = timeout  # for a whole call, retries included
        self.rpc_timeout = rpc_timeout  # for one attempt
        self.cluster_id = cluster_id  # "" = accept whatever cluster the servers are in
        self.backoff = backoff
        self._leader: Optional[str] = None  # endpoint that last answered as leader
        self._stubs: dict[str, tuple[grpc.Channel, raft_pb2_grpc.RaftStub]] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- the calls -------------------------------------------------------------------------
    def describe_quorum(self) -> QuorumInfo:
        resp = self._call_leader("DescribeQuorum", raft_pb2.DescribeQuorumRequest(cluster_id=self.cluster_id))
        d = convert.description_from_proto(resp)
        return QuorumInfo(resp.cluster_id, d.leader_id, d.leader_epoch, d.high_watermark, d.voters, d.observers)

    def append(self, records: Sequence[bytes]) -> tuple[int, int]:
        """Append ``records`` as one batch; returns (base offset, last offset) once committed."""
        if not records:
            raise ValueError("append needs at least one record")
        resp = self._call_leader("Append", raft_pb2.AppendRequest(cluster_id=self.cluster_id,
                                                                  records=list(records)))
        return resp.base_offset, resp.last_offset

    @property
    def leader_endpoint(self) -> Optional[str]:
        return self._leader

    def close(self) -> None:
        """Close the channels; a call still running fails, later calls raise ValueError."""
        with self._lock:
            self._closed = True
            stubs, self._stubs = list(self._stubs.values()), {}
        for channel, _ in stubs:
            channel.close()

    def __enter__(self) -> "RaftClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- leader discovery and retries ------------------------------------------------------
    def _stub(self, target: str) -> raft_pb2_grpc.RaftStub:
        with self._lock:
            if self._closed:
                raise ValueError("the RaftClient is closed")
            entry = self._stubs.get(target)
            if entry is None:
                channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
                entry = self._stubs[target] = (channel, raft_pb2_grpc.RaftStub(channel))
            return entry[1]

    def _candidates(self) -> list[str]:
        first = [self._leader] if self._leader else []
        return first + [s for s in self.servers if s != self._leader]

    def _call_leader(self, method: str, request):
        deadline = time.monotonic() + self.timeout
        unreachable: dict[str, str] = {}  # target -> why, for the final error
        answered: Optional[str] = None  # the last refusal, if any server answered
        redirects = 0
        while True:
            redirected = False
            for target in self._candidates():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    resp = getattr(self._stub(target), method)(request, timeout=min(self.rpc_timeout, left))
                except grpc.RpcError as e:
                    unreachable[target] = f"{e.code().name}: {e.details()}" if e.code() else str(e)
                    if self._leader == target:
                        self._leader = None
                    continue
                unreachable.pop(target, None)
                error = convert.error_from_code(resp.error)
                if error is Errors.NONE:
                    self._leader = target
                    return resp
                if error not in _RETRIABLE:
                    raise SparkraftError(error, resp.error_message or f"{method} failed at {target}")
                answered = f"{target} answered {error.name}: {resp.error_message}"
                hint = getattr(resp, "leader_endpoint", "")
                if self._leader == target:
                    self._leader = None
                if hint and hint != target and redirects < 3:
                    self._leader = hint  # ask the named leader next, at once
                    redirects += 1
                    redirected = True
                    break
            if time.monotonic() >= deadline:
                raise self._give_up(method, unreachable, answered)
            if not redirected:
                redirects = 0
                time.sleep(min(self.backoff, max(0.0, deadline - time.monotonic())))

    def _give_up(self, method: str, unreachable: dict[str, str], answered: Optional[str]) -> SparkraftError:
        servers = ",".join(self.servers)
        if answered is None:
            why = "; ".join(f"{t}: {w}" for t, w in unreachable.items())
            return SparkraftError(Errors.NETWORK_EXCEPTION,
                                  f"no controller reachable at {servers} within {self.timeout:g}s ({why})")
        return SparkraftError(Errors.NOT_LEADER_OR_FOLLOWER,
                              f"{method}: no leader found via {servers} within {self.timeout:g}s (last: {answered})")
