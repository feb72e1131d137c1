"""The ``sparkraft.v1.Raft`` gRPC service of a node: thin, as the servicer of a sans-I/O core should be.

Each handler converts the protobuf request, hands it to the node's event loop and waits, bounded by
the call's deadline, for the answer; then converts back. Nothing here touches the core directly.

- Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot go to the core (which checks the cluster id) and
  come back as its response for the request's correlation id.
- DescribeQuorum is answered from the leader's view; a non-leader answers NOT_LEADER_OR_FOLLOWER
  with the leader's id and endpoint if it knows them, so a tool pointed at any node finds the leader.
- Append proposes the records as one batch and answers once they are committed.

DescribeQuorum and Append accept an empty cluster id (command-line tools do not know it); a
different non-empty one is INCONSISTENT_CLUSTER_ID. A node that is not running (not started yet or
stopping) answers UNAVAILABLE.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from typing import Callable, Optional

import grpc

from quorum.errors import Errors, NodeNotRunningError, NotLeaderError, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.log.voter_set import Endpoint, ReplicaKey, Voter
from quorum.rpc import convert, request_actions
from quorum.rpc.deadline import time_left
from quorum.rpc.ports import RaftPort
from quorum.security.principal import Caller

log = logging.getLogger(__name__)



class RefusalLog:
    """Logs refused impersonations at most once per LOG_EVERY_S per claimed voter, with a count, so
    a flood of forged requests cannot flood the log."""

    LOG_EVERY_S = 10.0

    def __init__(self, node_id: int):
        self.node_id = node_id
        self._seen: dict[int, tuple[float, int]] = {}  # claimed voter -> (last logged, refused since)
        self._lock = threading.Lock()

    def note(self, kind: str, claimed: int, peer: str, why: str) -> None:
        now = time.monotonic()
        with self._lock:
            last, count = self._seen.get(claimed, (float("-inf"), 0))
            if now - last < self.LOG_EVERY_S:
                self._seen[claimed] = (last, count + 1)
                return
            self._seen[claimed] = (now, 0)
        log.warning("Node %d refused %s from %s as voter %d: %s%s", self.node_id, kind, peer, claimed, why,
                    f" ({count} more refused since the last report)" if count else "")


class RaftService(raft_pb2_grpc.RaftServicer):
    def __init__(self, node: RaftPort):
        """``node``: the RaftNode (quorum/node/raft_node.py) whose core answers."""
        self._node = node

    def WireEndpoint(self, request, context):
        return raft_pb2.WireEndpointResponse(port=self._node.wire_port)

    def VerifyPeer(self, request, context):
        proof = self._node.identities.prove(request.cluster_id, request.node_id, request.nonce)
        if proof is None:
            return raft_pb2.VerifyPeerResponse(error=int(Errors.INVALID_REQUEST))
        return raft_pb2.VerifyPeerResponse(proof=proof)

    # -- the Raft RPCs: straight to the core -----------------------------------------------
    def Vote(self, request, context):
        return self._to_core(request, context)

    def BeginQuorumEpoch(self, request, context):
        return self._to_core(request, context)

    def EndQuorumEpoch(self, request, context):
        return self._to_core(request, context)

    def Fetch(self, request, context):
        return self._to_core(request, context)

    def FetchSnapshot(self, request, context):
        return self._to_core(request, context)

    def _to_core(self, request, context):
        if not self._node.running:  # before any identity check: a node still probing its cluster id
            context.abort(grpc.StatusCode.UNAVAILABLE, "node is not running")  # must not log refusals
        msg = convert.from_proto(request)
        refusal = self._principal_refusal(type(msg).__name__.removesuffix("Request"), convert.request_source(msg),
                                          context)
        if refusal is None:
            refusal = self._node.identities.refusal(convert.request_source(msg), context.invocation_metadata())
        if refusal is not None:
            self._node.refusals.note(type(msg).__name__, convert.request_source(msg), context.peer(), refusal)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f"{type(msg).__name__} refused: {refusal}")
        try:
            future = self._node.submit_request(msg)
            response = future.result(timeout=time_left(context))
        except concurrent.futures.TimeoutError:
            future.cancel()
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "no answer from the Raft core in time")
        except (NodeNotRunningError, concurrent.futures.CancelledError) as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e) or "node is stopping")
        proto = convert.to_proto(response)
        if isinstance(proto, raft_pb2.FetchResponse) and proto.leader_id >= 0:
            proto.leader_endpoint = self._node.endpoint_of(proto.leader_id)
        return proto

    def _caller(self, context) -> Caller:
        try:
            return self._node.security.caller(context)
        except SparkraftError as e:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, str(e))

    def _authorized(self, refusal, context, *args):
        """``refusal(security, caller, *args)``, where an authorizer decides; None (allowed) without
        one, and then the caller is not worked out at all (Append is a benchmark's hot path)."""
        security = self._node.security
        if security.authorizer is None:
            return None
        return refusal(security, self._caller(context), *args)

    def _principal_refusal(self, kind: str, claimed: int, context) -> Optional[str]:
        security = self._node.security
        if not security.mutual_tls:
            return None
        return request_actions.raft_refusal(security, self._caller(context), kind, claimed, self._node.voters)

    # -- voter changes (KIP-853) -----------------------------------------------------------
    def AddRaftVoter(self, request, context):
        voter, refusal = _voter_of(request, "AddRaftVoter")
        if refusal is not None:
            return refusal
        return self._change_voters(request, context, lambda core, now: core.add_voter(voter, now))

    def UpdateRaftVoter(self, request, context):
        voter, refusal = _voter_of(request, "UpdateRaftVoter")
        if refusal is not None:
            return refusal
        return self._change_voters(request, context, lambda core, now: core.update_voter(voter, now))

    def RemoveRaftVoter(self, request, context):
        key = ReplicaKey(request.voter_id, request.voter_directory_id or None)
        return self._change_voters(request, context, lambda core, now: core.remove_voter(key, now))

    def _change_voters(self, request, context, change):
        node = self._node
        denied = self._authorized(request_actions.voter_change_refusal, context, request.voter_id)
        if denied is not None:
            return raft_pb2.VoterChangeResponse(error=int(denied.error), error_message=denied.message)
        if request.cluster_id and request.cluster_id != node.cluster_id:
            return raft_pb2.VoterChangeResponse(error=int(Errors.INCONSISTENT_CLUSTER_ID), error_message=(
                f"this node is in cluster {node.cluster_id}, not {request.cluster_id}"))
        future = None
        try:
            future = node.change_voters(change)
            future.result(timeout=time_left(context))
        except NotLeaderError as e:
            leader = dict(leader_id=-1 if e.leader_id is None else e.leader_id,
                          leader_endpoint=node.endpoint_of(e.leader_id))
            if future is not None and future.epoch is not None:  # appended, then the leadership moved: it may still take effect
                return raft_pb2.VoterChangeResponse(error=int(Errors.REQUEST_TIMED_OUT), error_message=(
                    f"the voter change was appended in epoch {future.epoch} but leadership moved before it "
                    f"committed; it may take effect or not: see 'sparkraft quorum describe'"), **leader)
            return raft_pb2.VoterChangeResponse(error=int(e.error), error_message=e.message, **leader)
        except SparkraftError as e:
            return raft_pb2.VoterChangeResponse(error=int(e.error), error_message=e.message, leader_id=node.node_id)
        except (NodeNotRunningError, concurrent.futures.CancelledError) as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e) or "node is stopping")
        except concurrent.futures.TimeoutError:
            return raft_pb2.VoterChangeResponse(error=int(Errors.REQUEST_TIMED_OUT), error_message=(
                "the voter change was appended but not committed in time; see 'sparkraft quorum describe'"))
        return raft_pb2.VoterChangeResponse(leader_id=node.node_id)

    # -- tools -----------------------------------------------------------------------------
    def DescribeQuorum(self, request, context):
        node = self._node
        denied = self._authorized(request_actions.describe_quorum_refusal, context)
        if denied is not None:
            return convert.describe_error(denied.error, denied.message, node.cluster_id)
        if request.cluster_id and request.cluster_id != node.cluster_id:
            return convert.describe_error(Errors.INCONSISTENT_CLUSTER_ID,
                                          f"this node is in cluster {node.cluster_id}, not {request.cluster_id}",
                                          node.cluster_id)
        try:
            desc = node.describe_quorum(timeout=time_left(context))
        except NotLeaderError as e:
            return convert.describe_error(e.error, e.message, node.cluster_id, e.leader_id, e.epoch,
                                          node.endpoint_of(e.leader_id))
        except (NodeNotRunningError, concurrent.futures.CancelledError) as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e) or "node is stopping")
        except concurrent.futures.TimeoutError:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "no answer from the Raft core in time")
        desc = dataclasses.replace(desc, voters=tuple(dataclasses.replace(v, endpoints=node.endpoints_of(v.replica_id))
                                                      for v in desc.voters))
        return convert.describe_response(desc, node.cluster_id)

    def Append(self, request, context):
        call = begin_append(self._node, request, lambda: self._caller(context), wire=False)
        if not isinstance(call, PendingAppend):
            return call
        done, _ = concurrent.futures.wait([call.future], timeout=time_left(context))
        if not done:
            return call.timed_out()
        try:
            return call.answer(call.future)
        except NodeNotRunningError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))


@dataclasses.dataclass(eq=False)
class PendingAppend:
    """A raw Append proposed to the Raft core, whatever the transport: ``answer(future)`` once its
    proposal is done (NodeNotRunningError: the transport's UNAVAILABLE), ``timed_out()`` if the
    caller's deadline passes first. Either gives back the client slot it holds."""

    node: RaftPort
    future: concurrent.futures.Future
    count: int
    release: Callable[[], None]

    def answer(self, future: concurrent.futures.Future) -> raft_pb2.AppendResponse:
        self.release()
        try:
            last = future.result(timeout=0)
        except NotLeaderError as e:
            return convert.append_error(e.error, e.message, e.leader_id, e.epoch, self.node.endpoint_of(e.leader_id))
        except SparkraftError as e:
            return convert.append_error(e.error, e.message)
        except concurrent.futures.CancelledError:
            raise NodeNotRunningError("node is stopping") from None
        epoch = future.epoch if future.epoch is not None else self.node.status().epoch
        return convert.append_response(last - self.count + 1, last, epoch, self.node.node_id)

    def timed_out(self) -> raft_pb2.AppendResponse:
        self.future.cancel()
        self.release()
        return convert.append_error(Errors.REQUEST_TIMED_OUT, "not committed before the deadline; "
                                    "the records may still be committed")


def begin_append(node: RaftPort, request, caller: Callable[[], Caller], wire: bool):
    """Start a raw Append on either transport: the response at once (a refusal), or a
    :class:`PendingAppend`. ``caller()`` is the transport's authenticated caller, asked only where an
    authorizer decides (Append is a benchmark's hot path). Refused: a caller without ALTER on the
    cluster, another cluster's request, a metadata controller's log (it holds metadata records
    only), no records, no free client slot."""
    security = node.security
    if security.authorizer is not None:
        denied = request_actions.voter_change_refusal(security, caller(), -1)
        if denied is not None:
            return convert.append_error(denied.error, denied.message)
    if request.cluster_id and request.cluster_id != node.cluster_id:
        return convert.append_error(Errors.INCONSISTENT_CLUSTER_ID,
                                    f"this node is in cluster {node.cluster_id}, not {request.cluster_id}")
    if not node.raw_appends:
        return convert.append_error(
            Errors.INVALID_REQUEST, "this node takes no raw Append: a metadata controller's log holds only "
            "metadata records; raw Append is served by `sparkraft controller start --raft-only` (benchmarks, tests)")
    if not request.records:
        return convert.append_error(Errors.INVALID_REQUEST, "Append needs at least one record")
    records = list(request.records)
    try:
        release = node.hold_client_slot(wire)
    except SparkraftError as e:
        return convert.append_error(e.error, e.message)
    future = node.propose(records)
    future.add_done_callback(lambda f: release())
    return PendingAppend(node, future, len(records), release)


def _voter_of(request, call: str) -> tuple[Optional[Voter], Optional[raft_pb2.VoterChangeResponse]]:
    """The voter an AddRaftVoter or UpdateRaftVoter request names, or the refusal of a malformed one."""
    if not request.voter_directory_id or not request.listeners or request.voter_id < 0:
        return None, raft_pb2.VoterChangeResponse(error=int(Errors.INVALID_REQUEST), error_message=(
            f"{call} needs the voter's id, directory id and at least one listener"))
    if any(not 0 < lst.port < 65536 or not lst.host or not lst.name for lst in request.listeners):
        return None, raft_pb2.VoterChangeResponse(error=int(Errors.INVALID_REQUEST),
                                                  error_message="a listener needs a name, a host and a port 1..65535")
    return Voter(ReplicaKey(request.voter_id, request.voter_directory_id),
                 tuple(Endpoint(lst.name, lst.host, lst.port) for lst in request.listeners)), None
