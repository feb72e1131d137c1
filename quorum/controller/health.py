"""What the controller's metrics report of the cluster, computed on the controller's loop from its
image and its partition index (index.py keeps the counts, so this costs the brokers and the topics
with unhealthy partitions, never a walk over every partition)."""
from __future__ import annotations

from quorum.controller.configs_control import min_insync_replicas
from quorum.metadata.configs import TOPIC


def cluster_health(core, now_ms: int) -> dict:
    """Counts of brokers, topics and partitions by state; each broker's registration state (a name)
    and, on the active controller, the seconds since its last heartbeat."""
    image, index = core.image, core.index
    brokers, by_id = image.cluster.brokers, image.topics.by_id
    sessions = core.sessions if core.is_active else None  # the active controller's memory only
    version = image.features.metadata_version
    return {
        "active": sum(1 for b in brokers.values() if not b.fenced),
        "fenced": sum(1 for b in brokers.values() if b.fenced),
        "shutting": sum(1 for b in brokers.values() if b.in_controlled_shutdown),
        "topics": len(by_id),
        "partitions": image.topics.partition_count(),
        "offline": index.offline_count(),
        "imbalanced": index.imbalanced_count(),
        "under_replicated": index.under_replicated_count(),
        "under_min_isr": index.under_min_isr_count(lambda tid: min_insync_replicas(image, by_id[tid].name),
                                                   ceiling=_highest_min_isr(image)),
        "metadata_version": -1 if version is None else version,
        "registration": {b: "controlled shutdown" if r.in_controlled_shutdown else "fenced" if r.fenced else "active"
                         for b, r in brokers.items()},
        "heartbeat_age": {} if sessions is None else {b: max(0, now_ms - at) / 1000
                                                      for b, at in sessions.last_contact.items()},
    }


def _highest_min_isr(image) -> int:
    """The highest ``min.insync.replicas`` of any topic: the default's, or a topic's own setting
    (only topics with configs of their own are looked at)."""
    default = min_insync_replicas(image, "")  # no topic is named "": the cluster's, else Kafka's default
    own = (min_insync_replicas(image, r.name) for r, configs in image.configs.resources.items()
           if r.type == TOPIC and "min.insync.replicas" in configs)
    return max([default, *own])
