"""Which metrics each process serves (DESIGN §10 names), read from where the numbers live."""
from __future__ import annotations

from quorum.metrics.registry import Histogram, Registry, histogram

def commit_latency() -> Histogram:
    return histogram("sparkraft_raft_commit_latency_seconds", "From a proposal on the leader to its commit.")


def election_latency() -> Histogram:
    return histogram("sparkraft_raft_election_latency_seconds", "From losing the leader to knowing the next one.")


# sparkraft_raft_current_state as a number (Prometheus gauges are numbers): Kafka's state names.
STATE_CODES = {"Unstarted": 0, "Unattached": 1, "Voted": 2, "Prospective": 3, "Candidate": 4, "Follower": 5,
               "Leader": 6, "Resigned": 7}


def raft_metrics(registry: Registry, node, snapshots=None) -> None:
    """A RaftNode's election and replication state, commit and election latency (and its
    controller's snapshots, if given)."""
    codes = ", ".join(f"{code}={name}" for name, code in STATE_CODES.items())
    registry.gauge("sparkraft_raft_current_state", f"This node's Raft state ({codes}).",
                   lambda: STATE_CODES.get(node.status().state, -1))
    registry.gauge("sparkraft_raft_current_leader", "The leader's node id, -1 if none is known.",
                   lambda: -1 if node.status().leader_id is None else node.status().leader_id)
    registry.gauge("sparkraft_raft_current_epoch", "The current leader epoch.", lambda: node.status().epoch)
    registry.gauge("sparkraft_raft_high_watermark", "The first offset not known to be committed.",
                   lambda: node.status().high_watermark)
    registry.gauge("sparkraft_raft_log_end_offset", "One past the last offset in this node's log.",
                   lambda: node.status().log_end_offset)
    registry.gauge("sparkraft_raft_log_start_offset", "First offset this node's log holds (below it: a snapshot).",
                   lambda: node.status().log_start_offset)
    registry.counter("sparkraft_snapshot_fetched_total", "Snapshots downloaded from the leader (FetchSnapshot).",
                     lambda: node.status().snapshots_fetched)
    registry.histogram(node.commit_latency)
    registry.histogram(node.election_latency)
    registry.gauge("sparkraft_snapshot_latest_offset", "End offset of the newest snapshot, -1: none yet.",
                   lambda: -1 if snapshots is None else snapshots.latest_offset)
    registry.gauge("sparkraft_snapshot_latest_bytes", "Size of the newest snapshot, 0: none yet.",
                   lambda: 0 if snapshots is None else snapshots.latest_bytes)


def controller_metrics(registry: Registry, controller) -> None:
    """A ControllerNode's view of the cluster, from its committed image."""
    raft_metrics(registry, controller.raft, controller.snapshots)

    def image():
        return controller.call(lambda core: core.image).result(5)

    registry.gauge("sparkraft_controller_active_broker_count", "Registered brokers that are not fenced.",
                   lambda: sum(1 for b in image().cluster.brokers.values() if not b.fenced))
    registry.gauge("sparkraft_controller_fenced_broker_count", "Registered brokers that are fenced.",
                   lambda: sum(1 for b in image().cluster.brokers.values() if b.fenced))
    registry.gauge("sparkraft_controller_global_partition_count", "Partitions of all topics.",
                   lambda: image().topics.partition_count())
    registry.gauge("sparkraft_controller_offline_partitions_count", "Partitions without a leader.",
                   lambda: sum(1 for t in image().topics.by_id.values() for p in t.partitions.values()
                               if p.leader == -1))
    registry.gauge("sparkraft_controller_active", "1 on the active controller, else 0.",
                   lambda: 1 if controller.is_active else 0)


def broker_metrics(registry: Registry, metadata, lifecycle=None) -> None:
    """A broker's metadata client (and lifecycle, if given)."""
    registry.gauge("sparkraft_broker_last_applied_record_offset", "The last metadata offset this broker applied.",
                   lambda: metadata.applied_offset)
    registry.gauge("sparkraft_broker_metadata_lag", "Committed records this broker has not applied yet.",
                   lambda: metadata.lag)
    registry.gauge("sparkraft_broker_bootstrap_offset", "The offset its image started from.",
                   lambda: metadata.stats.bootstrap_offset)
    registry.gauge("sparkraft_broker_bootstrap_seconds", "How long loading the starting image took.",
                   lambda: metadata.stats.bootstrap_seconds)
    for source in ("cache", "delta", "snapshot", "log"):
        registry.gauge(f"sparkraft_broker_bootstrapped_from_{source}", f"1 if the image started from {source}.",
                       lambda s=source: 1 if metadata.stats.bootstrap_source == s else 0)
    registry.counter("sparkraft_broker_snapshots_fetched_total",
                     "Snapshots downloaded because the quorum's log started past this broker's image.",
                     lambda: metadata.stats.snapshots_fetched)
    if lifecycle is not None:
        registry.gauge("sparkraft_broker_fenced", "1 while the controller has this broker fenced.",
                       lambda: 1 if lifecycle.state.fenced else 0)


