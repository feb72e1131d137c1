"""ControllerClient: what the CLI, brokers and tests use to call the controller quorum.

Give it any controllers (``"h:p,h:p"`` or ``[(host, port), ...]``); any of them may be down or a
standby. Like :class:`~quorum.rpc.raft_client.RaftClient`:

- **writes** (RegisterBroker, CreateTopics, IncrementalAlterConfigs...) try the last known active
  controller, then every bootstrap server in order; a NOT_CONTROLLER answer that names the active
  controller's endpoint is followed at once; NOT_CONTROLLER without a name, REQUEST_TIMED_OUT and
  unreachable servers are retried with a short backoff until the call's deadline;
- **reads** (ListTopics, DescribeTopics, DescribeCluster, DescribeConfigs, DescribeAcls) may be
  answered by any controller. A standby's answer names the active controller; the client then asks
  the active one too (its state is the newest: a write it acknowledged is always visible there)
  and falls back to the standby's answer if that fails.

Errors are :class:`~quorum.errors.SparkraftError` with one clear line: NETWORK_EXCEPTION when no
server answered, NOT_CONTROLLER when servers answered but none was active before the deadline, or
the controller's own error (INVALID_REPLICATION_FACTOR...). Per-item errors (one topic of a
CreateTopics) are in the reply, not raised; the convenience methods (``create_topic``...) raise them.

Writes are at-least-once across controller changes: a call whose first attempt timed out or lost
its controller may have been committed and is retried (then e.g. TOPIC_ALREADY_EXISTS).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterator, Optional, Sequence

import grpc

from quorum.controller import api, registry
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.gen.sparkraft.v1 import controller_pb2_grpc
from quorum.rpc import controller_convert as cc
from quorum.rpc.controller_wire import WIRE_METHODS
from quorum.rpc.leader_client import LeaderFollowingClient
from quorum.rpc.raft_client import Bootstrap, parse_bootstrap
from quorum.rpc.wire_methods import BY_NAME
from quorum.security.client import ClientSecurity
from quorum.security.principal import FORWARDED_HOST, FORWARDED_LISTENER, FORWARDED_PRINCIPAL, FORWARDED_SOFTWARE

_RETRIABLE = {Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT, Errors.NOT_LEADER_OR_FOLLOWER}
_RETRIABLE_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


class ControllerClient(LeaderFollowingClient):
    stub_class = controller_pb2_grpc.ControllerStub
    leader_noun = "active controller"
    no_leader_error = Errors.NOT_CONTROLLER
    retriable = frozenset(_RETRIABLE)
    retriable_codes = frozenset(_RETRIABLE_CODES)
    wire_methods = frozenset(WIRE_METHODS)  # a broker's register and heartbeats take the wire where there is one

    def __init__(self, bootstrap: Bootstrap, timeout: float = 15.0, rpc_timeout: float = 5.0,
                 backoff: float = 0.05, security: Optional[ClientSecurity] = None):
        super().__init__(parse_bootstrap(bootstrap), timeout, rpc_timeout, backoff, security)

    def response_error(self, resp) -> Optional[SparkraftError]:
        return cc.response_error(resp)

    def _attempt(self, target: str, method: str, request, deadline: float, metadata: tuple = ()):
        """A request forwarded for a Kafka client (``metadata`` naming it) goes on the wire too, in
        the ``Forward`` envelope, where the target's wire serves that."""
        named = dict(metadata)
        if metadata and set(named) <= {FORWARDED_PRINCIPAL, FORWARDED_HOST, FORWARDED_SOFTWARE, FORWARDED_LISTENER} \
                and self._on_wire(target, method, request) and (target, "Forward") not in self._not_on_wire:
            envelope = pb.ForwardedRequest(principal=named[FORWARDED_PRINCIPAL], host=named[FORWARDED_HOST],
                                           method=method, request=request.SerializeToString(),
                                           software=named.get(FORWARDED_SOFTWARE, ""),
                                           listener=named.get(FORWARDED_LISTENER, ""))
            resp = self._attempt_wire(target, "Forward", envelope, deadline)
            if resp is not None:
                return BY_NAME[method].response.FromString(resp.response)
        return super()._attempt(target, method, request, deadline, metadata)

    # -- generic ---------------------------------------------------------------------------
    def call(self, request, timeout: Optional[float] = None):
        """Send any controller request dataclass; returns the reply (controller_codecs.py: ``Codec.reply``)."""
        if not registry.is_read(request):
            return self.call_committed(request, timeout)[0]
        method = cc.method_of(request)
        return cc.reply_from_proto(method, self._read(method, cc.request_to_proto(request), timeout))

    def read_from(self, target: str, request, timeout: Optional[float] = None) -> tuple[Any, int]:
        """A read answered by the controller at ``target`` and no other (a standby is not left for
        the active controller): (its reply, the offset of the committed image it read). Raises
        its refusal (NOT_CONTROLLER from a standby still replaying) or grpc.RpcError."""
        method = cc.method_of(request)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        resp = self._attempt(target, method, cc.request_to_proto(request), deadline)
        error = cc.response_error(resp)
        if error is not None:
            raise error
        return cc.reply_from_proto(method, resp), resp.committed_offset

    def call_committed(self, request, timeout: Optional[float] = None,
                       on_behalf_of: Optional[tuple[str, str]] = None, context=None) -> tuple[Any, int]:
        """A write request: (its reply, the active controller's committed offset when it answered,
        at or past the request's records). A broker that forwarded a client's write waits for its
        own image to reach that offset before it answers (read-your-writes). ``on_behalf_of``:
        the (principal, host) of the client a broker forwards for (KIP-590); the controller
        authorizes that principal, if it trusts this caller to forward."""
        method = cc.method_of(request)
        metadata = () if on_behalf_of is None else (
            (FORWARDED_PRINCIPAL, on_behalf_of[0]), (FORWARDED_HOST, on_behalf_of[1]))
        if on_behalf_of is not None and context is not None:  # the client's software and listener, for the audit
            metadata += ((FORWARDED_SOFTWARE, "/".join(context.software)), (FORWARDED_LISTENER, context.listener))
        resp = self._call_leader(method, cc.request_to_proto(request), timeout, metadata)
        return cc.reply_from_proto(method, resp), resp.committed_offset

    # -- brokers ---------------------------------------------------------------------------
    def register_broker(self, request: api.RegisterBrokerRequest) -> api.RegisterBrokerReply:
        return self.call(request)

    def broker_heartbeat(self, request: api.BrokerHeartbeatRequest, timeout: Optional[float] = None
                         ) -> api.BrokerHeartbeatReply:
        return self.call(request, timeout)

    def unregister_broker(self, broker_id: int) -> None:
        self.call(api.UnregisterBrokerRequest(broker_id))

    def unregister_controller(self, controller_id: int) -> None:
        self.call(api.UnregisterControllerRequest(controller_id))

    # -- topics ----------------------------------------------------------------------------
    def create_topics(self, topics: Sequence[api.CreatableTopic], validate_only: bool = False
                      ) -> tuple[api.CreateTopicResult, ...]:
        return self.call(api.CreateTopicsRequest(tuple(topics), validate_only))

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: Sequence[tuple[str, str]] = (), validate_only: bool = False) -> api.CreateTopicResult:
        """Create one topic; raises its error (TOPIC_ALREADY_EXISTS...)."""
        (result,) = self.create_topics([api.CreatableTopic(name, partitions, replication_factor,
                                                           configs=tuple(configs))], validate_only)
        _raise_item(result.error, result.message)
        return result

    def delete_topics(self, names: Sequence[str]) -> tuple[api.TopicResult, ...]:
        return self.call(api.DeleteTopicsRequest(tuple(names)))

    def delete_topic(self, name: str) -> api.TopicResult:
        (result,) = self.delete_topics([name])
        _raise_item(result.error, result.message)
        return result

    def create_partitions(self, name: str, count: int) -> api.TopicResult:
        (result,) = self.call(api.CreatePartitionsRequest((api.PartitionCountUpdate(name, count),)))
        _raise_item(result.error, result.message)
        return result

    def list_topics(self) -> tuple[str, ...]:
        return self.call(api.ListTopicsRequest())

    def describe_topics(self, names: Sequence[str], first_partition: int = 0, partition_limit: int = 0) -> tuple:
        """One TopicDescription, or SparkraftError (not raised), per name: a page of each topic's
        partitions (see ``describe_topic_pages`` for all of them)."""
        return self.call(api.DescribeTopicsRequest(tuple(names), first_partition, partition_limit))

    def describe_topic_pages(self, name: str, partition_limit: int = 0) -> Iterator[api.TopicDescription]:
        """The topic a page of partitions at a time, as the controller pages them: a topic of a
        million partitions costs each call a bounded answer. Raises its error."""
        first = 0
        while True:
            (d,) = self.describe_topics([name], first, partition_limit)
            if isinstance(d, SparkraftError):
                raise d
            yield d
            if not d.next_partition or d.next_partition <= first:
                return
            first = d.next_partition

    def describe_topic(self, name: str) -> api.TopicDescription:
        """The whole topic (every page of its partitions)."""
        pages = list(self.describe_topic_pages(name))
        return dataclasses.replace(pages[-1], partitions=tuple(p for page in pages for p in page.partitions),
                                   next_partition=0)

    def elect_leaders(self, election_type: str = "PREFERRED",
                      partitions: Optional[Sequence[api.TopicPartition]] = None) -> tuple:
        return self.call(api.ElectLeadersRequest(election_type, None if partitions is None else tuple(partitions)))

    def alter_reassignments(self, partitions) -> tuple[api.ElectLeadersResult, ...]:
        """``partitions``: [(TopicPartition, target replicas or None to cancel), ...]."""
        return self.call(api.AlterPartitionReassignmentsRequest(
            tuple(api.ReassignablePartition(tp, None if r is None else tuple(r)) for tp, r in partitions)))

    def list_reassignments(self, partitions=None) -> tuple[api.OngoingReassignment, ...]:
        """The reassignments in flight (of ``partitions``, or all)."""
        return self.call(api.ListPartitionReassignmentsRequest(None if partitions is None else tuple(partitions)))

    def alter_partition(self, request: api.AlterPartitionRequest) -> tuple[api.AlterPartitionResult, ...]:
        return self.call(request)

    # -- configs ---------------------------------------------------------------------------
    def incremental_alter_configs(self, resources, validate_only: bool = False) -> tuple[api.AlterConfigsResult, ...]:
        """``resources``: [(ConfigResourceKey, [AlterableConfig, ...]), ...]."""
        return self.call(api.IncrementalAlterConfigsRequest(
            tuple((key, tuple(ops)) for key, ops in resources), validate_only))

    def alter_configs(self, resource: api.ConfigResourceKey, ops: Sequence[api.AlterableConfig]) -> None:
        """Alter one resource; raises its error (INVALID_CONFIG...)."""
        (result,) = self.incremental_alter_configs([(resource, ops)])
        _raise_item(result.error, result.message)

    def describe_configs(self, resource: api.ConfigResourceKey) -> tuple[api.ConfigEntry, ...]:
        """One resource's config entries; raises its error (UNKNOWN_TOPIC_OR_PARTITION...)."""
        ((_, error, message, entries),) = self.call(api.DescribeConfigsRequest((resource,)))
        _raise_item(error, message)
        return entries

    # -- the rest --------------------------------------------------------------------------
    def describe_cluster(self, timeout: Optional[float] = None) -> api.ClusterDescription:
        return self.call(api.DescribeClusterRequest(), timeout)

    def update_features(self, updates: Sequence[tuple[str, int]]) -> tuple[api.ItemResult, ...]:
        return self.call(api.UpdateFeaturesRequest(tuple(updates)))

    def alter_client_quotas(self, alterations: Sequence[api.ClientQuotaAlteration]) -> tuple[api.ItemResult, ...]:
        return self.call(api.AlterClientQuotasRequest(tuple(alterations)))

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> api.ProducerIdsBlock:
        return self.call(api.AllocateProducerIdsRequest(broker_id, broker_epoch))

    def create_acls(self, bindings: Sequence[api.AclBinding]) -> tuple[api.ItemResult, ...]:
        return self.call(api.CreateAclsRequest(tuple(bindings)))

    def delete_acls(self, filters: Sequence[api.AclBinding]) -> tuple:
        return self.call(api.DeleteAclsRequest(tuple(filters)))

    def describe_acls(self, filter: api.AclBinding) -> tuple[api.AclBinding, ...]:
        return self.call(api.DescribeAclsRequest(filter))

    # -- reads -----------------------------------------------------------------------------
    def _read(self, method: str, request, timeout: Optional[float]):
        waited = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + waited
        unreachable: dict[str, str] = {}
        login_refused: dict[str, SparkraftError] = {}
        answered: Optional[str] = None  # the last retriable refusal, for the final error
        notice_at = self._notice_at()
        while True:
            for target in self._candidates():
                if time.monotonic() >= deadline:
                    break
                try:
                    resp = self._attempt(target, method, request, deadline)
                except SparkraftError as e:
                    answered = self._note_login_refused(target, e, login_refused) or answered
                    continue
                except grpc.RpcError as e:
                    unreachable[target] = self._unreachable(target, method, e)
                    continue
                self._failed_until.pop(target, None)
                error = cc.response_error(resp)
                if error is not None and error.error not in _RETRIABLE:
                    raise error
                if error is not None:
                    answered = f"{target} answered {error}"
                    continue
                hint = resp.leader_endpoint
                if hint and hint != target:
                    # A standby answered: prefer the active controller's (newest) answer.
                    try:
                        newer = self._attempt(hint, method, request, deadline)
                    except (grpc.RpcError, SparkraftError):
                        return resp
                    if cc.response_error(newer) is None:
                        self._leader = hint
                        return newer
                    return resp
                if hint == target:
                    self._leader = target
                return resp
            if time.monotonic() >= deadline:
                raise self._give_up(method, unreachable, answered, waited)
            if self._nothing_listens(started, unreachable, answered):
                self._raise_nothing_listens(started, unreachable)
            notice_at = self._maybe_notify(notice_at, waited, answered, unreachable)
            time.sleep(min(self.backoff, max(0.0, deadline - time.monotonic())))


def _raise_item(error: Errors, message: str) -> None:
    if error is not Errors.NONE:
        raise SparkraftError(error, message)
