"""The controller's read requests (``api.READ_REQUESTS``), answered on its thread from the core's
replayed state: any controller answers reads, from what it has committed and replayed. One
function per request type, found through ``READS``, checked complete at import."""
from __future__ import annotations

from typing import Any, Callable, Optional

from quorum.controller.api import (
    READ_REQUESTS,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeFeaturesRequest,
    DescribeMigrationRequest,
    DescribeTopicsRequest,
    DescribeUserScramCredentialsRequest,
    ListPartitionReassignmentsRequest,
    ListTopicsRequest,
    MigrationDescription,
)
from quorum.controller.core import ControllerCore
from quorum.errors import Errors, SparkraftError

# Most partitions one DescribeTopics answer holds per topic: a topic of a million partitions is
# described in pages, each answered in a fraction of a second (Limits in the README).
PARTITION_PAGE = 10_000


def _list_topics(core: ControllerCore, request: ListTopicsRequest, leader_id: Optional[int]) -> tuple[str, ...]:
    return tuple(sorted(core.list_topics()))


def _describe_topics(core: ControllerCore, request: DescribeTopicsRequest, leader_id: Optional[int]) -> tuple:
    """Each topic's description (one page of its partitions) or its error, in the order asked."""
    out: list = []
    page = min(request.partition_limit or PARTITION_PAGE, PARTITION_PAGE)
    for name in request.names:
        try:
            d = core.describe_topic(name, request.first_partition, page)
        except SparkraftError as e:
            out.append(SparkraftError(e.error, e.message, name=name))
            continue
        if d is None:
            out.append(SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist",
                                      name=name))
        else:
            out.append(d)
    return tuple(out)


def _describe_cluster(core: ControllerCore, request: DescribeClusterRequest, leader_id: Optional[int]):
    return core.describe_cluster(leader_id)


def _describe_acls(core: ControllerCore, request: DescribeAclsRequest, leader_id: Optional[int]) -> tuple:
    return tuple(core.describe_acls(request.filter))


def _describe_configs(core: ControllerCore, request: DescribeConfigsRequest, leader_id: Optional[int]) -> tuple:
    return tuple(core.describe_configs(request))


def _describe_scram(core: ControllerCore, request: DescribeUserScramCredentialsRequest,
                    leader_id: Optional[int]) -> tuple:
    return core.describe_user_scram_credentials(request)


def _list_reassignments(core: ControllerCore, request: ListPartitionReassignmentsRequest,
                        leader_id: Optional[int]) -> tuple:
    return core.list_reassignments(request)


def _describe_features(core: ControllerCore, request: DescribeFeaturesRequest, leader_id: Optional[int]):
    return core.describe_features()


def _describe_quotas(core: ControllerCore, request: DescribeClientQuotasRequest, leader_id: Optional[int]):
    return core.describe_client_quotas(request)


def _describe_migration(core: ControllerCore, request: DescribeMigrationRequest, leader_id: Optional[int]):
    """The log's half (the state); the active controller's node adds its driver's (controller_node.py)."""
    return MigrationDescription(core.image.features.zk_migration_state_name)


READS: dict[type, Callable[[ControllerCore, Any, Optional[int]], Any]] = {
    ListTopicsRequest: _list_topics,
    DescribeTopicsRequest: _describe_topics,
    DescribeClusterRequest: _describe_cluster,
    DescribeAclsRequest: _describe_acls,
    DescribeConfigsRequest: _describe_configs,
    DescribeUserScramCredentialsRequest: _describe_scram,
    ListPartitionReassignmentsRequest: _list_reassignments,
    DescribeFeaturesRequest: _describe_features,
    DescribeClientQuotasRequest: _describe_quotas,
    DescribeMigrationRequest: _describe_migration,
}
assert set(READS) == set(READ_REQUESTS), "a read request has no answer"
