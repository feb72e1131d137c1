"""The controller's reads: each answered from the committed image (``image``), on the active
controller and on standbys alike, as of ``read_offset``. A role ControllerCore takes on."""
from __future__ import annotations

from typing import Optional

from quorum.controller import (
    acls_control,
    api,
    configs_control,
    features_control,
    quotas_control,
    reads,
    reassign_control,
    scram_control,
)
from quorum.errors import Errors


class CommittedReads:
    """Needs ``image`` (the committed MetadataImage), ``cluster_id``, ``read_offset`` and ``sessions``."""

    def list_topics(self) -> list[str]:
        return self.image.topics.topic_names()

    def describe_topic(self, name: str, first_partition: int = 0,
                       limit: Optional[int] = None) -> api.TopicDescription:
        return reads.describe_topic(self.image, name, first_partition, limit)

    def describe_cluster(self, controller_id: Optional[int] = None) -> api.ClusterDescription:
        return reads.describe_cluster(self.image, self.cluster_id, controller_id, self.read_offset,
                                      self.sessions.reported_offsets)

    def describe_configs(self, req: api.DescribeConfigsRequest
                         ) -> list[tuple[api.ConfigResourceKey, Errors, str, list[api.ConfigEntry]]]:
        return [configs_control.describe(self.image, key) for key in req.resources]

    def describe_client_quotas(self, req: api.DescribeClientQuotasRequest) -> tuple[api.ClientQuotaEntry, ...]:
        return quotas_control.describe(self.image, req)

    def describe_features(self) -> api.FeaturesDescription:
        return features_control.describe(self.image, self.read_offset)

    def list_reassignments(self, req: api.ListPartitionReassignmentsRequest
                           ) -> tuple[api.OngoingReassignment, ...]:
        return reassign_control.ongoing(self.image, req)

    def describe_acls(self, filter: api.AclBinding) -> list[api.AclBinding]:
        return acls_control.describe(self.image, filter)

    def describe_user_scram_credentials(self, req: api.DescribeUserScramCredentialsRequest
                                        ) -> tuple[api.UserScramCredentials, ...]:
        return scram_control.describe(self.image, req)
