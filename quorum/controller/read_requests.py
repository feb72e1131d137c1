"""Each read request's answer, on the controller's thread from the core's replayed state (any
controller answers reads, from what it has committed and replayed): the function a read's registry
row names (registry.py, ``RequestRow.read``). ``core`` is the ControllerCore (its CommittedReads
role: committed_reads.py); core.py imports the registry, so the type is not imported here."""
from __future__ import annotations

from typing import Optional

from quorum.controller.api import (
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
from quorum.errors import Errors, SparkraftError

# Most partitions one DescribeTopics answer holds per topic: a topic of a million partitions is
# described in pages, each answered in a fraction of a second (Limits in the README).
PARTITION_PAGE = 10_000


def list_topics(core, request: ListTopicsRequest, leader_id: Optional[int]) -> tuple[str, ...]:
    return tuple(sorted(core.list_topics()))


def describe_topics(core, request: DescribeTopicsRequest, leader_id: Optional[int]) -> tuple:
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


def describe_cluster(core, request: DescribeClusterRequest, leader_id: Optional[int]):
    return core.describe_cluster(leader_id)


def describe_acls(core, request: DescribeAclsRequest, leader_id: Optional[int]) -> tuple:
    return tuple(core.describe_acls(request.filter))


def describe_configs(core, request: DescribeConfigsRequest, leader_id: Optional[int]) -> tuple:
    return tuple(core.describe_configs(request))


def describe_scram(core, request: DescribeUserScramCredentialsRequest,
                    leader_id: Optional[int]) -> tuple:
    return core.describe_user_scram_credentials(request)


def list_reassignments(core, request: ListPartitionReassignmentsRequest,
                        leader_id: Optional[int]) -> tuple:
    return core.list_reassignments(request)


def describe_features(core, request: DescribeFeaturesRequest, leader_id: Optional[int]):
    return core.describe_features()


def describe_quotas(core, request: DescribeClientQuotasRequest, leader_id: Optional[int]):
    return core.describe_client_quotas(request)


def describe_migration(core, request: DescribeMigrationRequest, leader_id: Optional[int]):
    """The log's half (the state); the active controller's node adds its driver's (quorum/node/controller_extras.py)."""
    return MigrationDescription(core.image.features.zk_migration_state_name)
