"""What each Controller request needs to be allowed, as Kafka's brokers and controller check it:
each request's rule is a ``Needs`` in its registry row (quorum/controller/registry.py), carried
out here.

``refusal(security, caller, request, topic_name)`` is None when the caller may make the request,
else the SparkraftError it is answered with (TOPIC_AUTHORIZATION_FAILED naming the topics, or
CLUSTER_AUTHORIZATION_FAILED), before anything reaches the controller: a denied request changes
nothing. A request naming several topics is refused whole if any of them is denied.

| request | needs |
|---|---|
| CreateTopics | CREATE on the cluster, or CREATE on each topic |
| DeleteTopics | DELETE on each topic |
| CreatePartitions | ALTER on each topic |
| IncrementalAlterConfigs | ALTER_CONFIGS on each topic and group; on the cluster for broker and cluster configs |
| DescribeConfigs | DESCRIBE_CONFIGS likewise |
| DescribeTopics | DESCRIBE on each topic (ListTopics lists only those: ``visible_topics``) |
| ElectLeaders, AlterPartitionReassignments, UnregisterBroker, UpdateFeatures, CreateAcls, DeleteAcls, FinalizeMigration | ALTER on the cluster |
| AlterClientQuotas | ALTER_CONFIGS on the cluster |
| DescribeClientQuotas | DESCRIBE_CONFIGS on the cluster |
| DescribeAcls, ListPartitionReassignments, DescribeMigration, DescribeLogHolds | DESCRIBE on the cluster |
| AlterUserScramCredentials | ALTER on the cluster |
| DescribeUserScramCredentials | DESCRIBE on the cluster |
| RegisterBroker, BrokerHeartbeat, AlterPartition, AllocateProducerIds | CLUSTER_ACTION on the cluster, or the broker's own principal for its own id |
| RegisterController, RecordRefusal | CLUSTER_ACTION on the cluster, or the controller's own principal for its own id |
| HoldLog | CLUSTER_ACTION on the cluster (what reading the log needs) |
| DescribeCluster, DescribeFeatures | nothing (Kafka answers features in ApiVersions to anyone) |
"""
from __future__ import annotations

from typing import Callable, Optional

from quorum.controller import registry
from quorum.errors import Errors, SparkraftError
from quorum.security.authorizer import cluster_action, group_action, topic_action
from quorum.security.node_security import NodeSecurity
from quorum.security.principal import Caller

TopicName = Callable[[str], Optional[str]]  # topic id -> name, for DeleteTopics by id

def _topic_refusal(security: NodeSecurity, caller: Caller, operation: str, names) -> Optional[SparkraftError]:
    denied = sorted({n for n in names if not security.allows(caller, topic_action(operation, n))})
    if not denied:
        return None
    return SparkraftError(Errors.TOPIC_AUTHORIZATION_FAILED, f"{caller.principal} may not {operation} topic"
                          f"{'s' if len(denied) > 1 else ''} {', '.join(denied[:5])}"
                          f"{' and more' if len(denied) > 5 else ''}")


def _cluster_refusal(security: NodeSecurity, caller: Caller, operation: str,
                     what: str) -> Optional[SparkraftError]:
    if security.allows(caller, cluster_action(operation)):
        return None
    return SparkraftError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                          f"{caller.principal} may not {what} (needs {operation} on the cluster)")


def refusal(security: NodeSecurity, caller: Caller, request, topic_name: TopicName) -> Optional[SparkraftError]:
    """None if ``caller`` may make ``request``; else the error it gets. The rule is the request's
    row in the registry (quorum/controller/registry.py), carried out by ``_BY_NEED``."""
    if security.authorizer is None or security.is_super_user(caller):
        return None
    row = registry.BY_TYPE.get(type(request))
    if row is None:
        return SparkraftError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                              f"{type(request).__name__} has no authorization rule; refused")
    return _BY_NEED[row.needs.kind](security, caller, request, row.needs, topic_name)


def _needs_cluster(security, caller, request, needs: registry.Needs, topic_name) -> Optional[SparkraftError]:
    return _cluster_refusal(security, caller, needs.operation, type(request).__name__.removesuffix("Request"))


def _needs_broker(security, caller, request, needs, topic_name) -> Optional[SparkraftError]:
    if security.is_broker(caller, request.broker_id):
        return None
    return _cluster_refusal(security, caller, "CLUSTER_ACTION", f"act for broker {request.broker_id}")


def _needs_controller(security, caller, request, needs, topic_name) -> Optional[SparkraftError]:
    if security.is_voter(caller, request.controller_id):
        return None
    return _cluster_refusal(security, caller, "CLUSTER_ACTION", f"act for controller {request.controller_id}")


def _needs_create_topics(security, caller, request, needs, topic_name) -> Optional[SparkraftError]:
    if security.allows(caller, cluster_action("CREATE")):
        return None
    return _topic_refusal(security, caller, "CREATE", [t.name for t in request.topics])


def _needs_topics(security, caller, request, needs: registry.Needs, topic_name) -> Optional[SparkraftError]:
    names = needs.names(request) + [topic_name(i) or i for i in (needs.ids(request) if needs.ids else ())]
    return _topic_refusal(security, caller, needs.operation, names)


def _needs_configs(security, caller, request, needs: registry.Needs, topic_name) -> Optional[SparkraftError]:
    operation = needs.operation
    resources = needs.resources(request)
    topics = [r.name for r in resources if r.type == "TOPIC"]
    groups = sorted({r.name for r in resources if r.type == "GROUP"})
    if len(topics) + sum(r.type == "GROUP" for r in resources) < len(resources):
        denied = _cluster_refusal(security, caller, operation, f"{operation.lower().replace('_', ' ')} of "
                                  f"brokers or the cluster")
        if denied is not None:
            return denied
    denied_groups = [g for g in groups if not security.allows(caller, group_action(operation, g))]
    if denied_groups:
        return SparkraftError(Errors.GROUP_AUTHORIZATION_FAILED, f"{caller.principal} may not {operation} group"
                              f"{'s' if len(denied_groups) > 1 else ''} {', '.join(denied_groups[:5])}")
    return _topic_refusal(security, caller, operation, topics)


def _needs_nothing(security, caller, request, needs, topic_name) -> Optional[SparkraftError]:
    return None


# Needs.kind -> how it is checked (a test checks that every kind has one); ``listed``'s answer is cut
# to what the caller may see (visible_topics)
_BY_NEED = {"cluster": _needs_cluster, "broker": _needs_broker, "controller": _needs_controller,
            "create_topics": _needs_create_topics, "topics": _needs_topics, "configs": _needs_configs,
            "nothing": _needs_nothing, "listed": _needs_nothing}


def visible_topics(security: NodeSecurity, caller: Caller, names) -> tuple[str, ...]:
    """The topics of a ListTopics answer that ``caller`` may see (DESCRIBE), as Kafka's Metadata."""
    if security.authorizer is None or security.is_super_user(caller):
        return tuple(names)
    return tuple(n for n in names if security.allows(caller, topic_action("DESCRIBE", n)))


# -- the Raft listener ------------------------------------------------------------------------------
def raft_refusal(security: NodeSecurity, caller: Caller, kind: str, claimed: int,
                 voters) -> Optional[str]:
    """Why a Raft request (``kind``: Vote, Fetch, ...) from ``caller`` claiming node ``claimed`` is
    refused on this node's listener, or None. Under mutual TLS (where a principal proves a node):

    - a request naming voter N as its sender comes only from voter N's principal;
    - Vote and the epoch RPCs come only from some controller's principal;
    - an observer's Fetch or FetchSnapshot from a controller's or a broker's principal, a super user,
      or a principal with CLUSTER_ACTION on the cluster (the streaming source, a log reader).
    Without mutual TLS voters are proven by their listener address instead (peer_identity.py)."""
    if not security.mutual_tls:
        return None
    if claimed in voters:
        if security.is_voter(caller, claimed):
            return None
        return f"{caller.principal} is not voter {claimed}'s principal ({security.voter_principal})"
    fetch = kind in ("Fetch", "FetchSnapshot")
    node_id = security.node_id_of(caller)
    if node_id is not None and security.is_voter(caller, node_id):
        return None  # a controller: fetching as an observer, or asking as a non-voter (the core refuses that)
    if fetch and (node_id is not None or security.is_super_user(caller) or (
            security.authorizer is not None and security.allows(caller, cluster_action("CLUSTER_ACTION")))):
        return None
    return (f"{caller.principal} is neither a controller's nor a broker's principal "
            f"({security.voter_principal}, {security.broker_principal})"
            + (" nor allowed CLUSTER_ACTION" if fetch else ""))


def voter_change_refusal(security: NodeSecurity, caller: Caller, voter_id: int) -> Optional[SparkraftError]:
    """AddRaftVoter, UpdateRaftVoter, RemoveRaftVoter: ALTER on the cluster, or the voter's own
    principal for a change of itself (auto-join, a moved endpoint)."""
    if security.is_voter(caller, voter_id) or security.authorizer is None or security.is_super_user(caller):
        return None
    return _cluster_refusal(security, caller, "ALTER", f"change voter {voter_id}")


def describe_quorum_refusal(security: NodeSecurity, caller: Caller) -> Optional[SparkraftError]:
    if security.authorizer is None or security.is_super_user(caller) or security.node_id_of(caller) is not None:
        return None
    return _cluster_refusal(security, caller, "DESCRIBE", "describe the quorum")
