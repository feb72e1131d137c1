"""Descriptions of a committed metadata image, as the controller's read requests return them.
Pure functions of the image: any controller answers reads from what it has replayed."""
from __future__ import annotations

from typing import Optional

from quorum.controller import api, configs_control
from quorum.errors import Errors, SparkraftError
from quorum.metadata.image import MetadataImage


def describe_topic(image: MetadataImage, name: str, first_partition: int = 0,
                   limit: Optional[int] = None) -> api.TopicDescription:
    """The topic with its partitions ``first_partition`` up to ``limit`` of them (all if None):
    partition ids run from 0, so a page costs its own size, not the topic's."""
    topic = image.topics.topic_by_name(name)
    if topic is None:
        raise SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    count = len(topic.partitions)
    if first_partition < 0:
        raise SparkraftError(Errors.INVALID_REQUEST, f"first partition {first_partition} is negative")
    end = count if limit is None else min(count, first_partition + max(1, limit))
    parts = []
    for pid in range(first_partition, end):
        p = topic.partitions.get(pid)
        if p is not None:
            parts.append(api.PartitionDescription(pid, p.leader, p.replicas, p.isr, p.leader_epoch,
                                                  p.partition_epoch))
    configs = dict(image.configs.configs(configs_control.ConfigResource(configs_control.TOPIC, name)))
    return api.TopicDescription(name, topic.topic_id, tuple(parts), configs, count,
                                end if end < count else 0)


def describe_cluster(image: MetadataImage, cluster_id: str, controller_id: Optional[int],
                     offset: int, reported: Optional[dict[int, int]] = None) -> api.ClusterDescription:
    """Every registered broker, in id order, as of ``offset``, with the metadata offset it last
    ``reported`` in a heartbeat (the active controller's memory; -1 where unknown)."""
    reported = reported or {}
    brokers = tuple(
        api.BrokerDescription(b.broker_id, b.fenced, b.in_controlled_shutdown, b.broker_epoch, b.rack,
                              tuple(api.BrokerEndpoint(e.name, e.host, e.port, e.security_protocol_name)
                                    for e in b.endpoints), b.incarnation_id, reported.get(b.broker_id, -1))
        for b in (image.cluster.brokers[i] for i in image.cluster.broker_ids()))
    return api.ClusterDescription(cluster_id, controller_id, offset, brokers)
