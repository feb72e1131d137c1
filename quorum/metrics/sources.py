"""Which metrics each process serves, read from where the numbers live (DESIGN §10's names are the
contract; the rest follow Prometheus' conventions: units in the name, ``_total`` on counters).

Each metric's help text names the Kafka metric it maps to (its JMX name, or Kafka's Raft metric
group and name), so an operator's Kafka dashboards translate one for one. Where Kafka has a rate
or an average (``append-records-rate``, ``AvgIdleRatio``), the metric here is the counter that
Prometheus' ``rate()`` turns into it. No metric has a per-partition label: a scrape costs the same
at 2,000,000 partitions as at 10 (per-broker and per-voter labels only).
"""
from __future__ import annotations

import concurrent.futures
import shutil
import threading
import time
from typing import Callable, Optional

from quorum.metrics.registry import Histogram, Registry, histogram

RAFT = "kafka.server:type=raft-metrics,name="
CONTROLLER = "kafka.controller:type=KafkaController,name="
LOADER = "kafka.server:type=MetadataLoader,name="
SNAPSHOTS = "kafka.server:type=SnapshotEmitter,name="
BROKER = "kafka.server:type=broker-metadata-metrics,name="


def commit_latency() -> Histogram:
    return histogram("sparkraft_raft_commit_latency_seconds", "From a proposal on the leader to its commit.",
                     kafka=f"{RAFT}commit-latency-avg, commit-latency-max")


def election_latency() -> Histogram:
    return histogram("sparkraft_raft_election_latency_seconds", "From losing the leader to knowing the next one.",
                     kafka=f"{RAFT}election-latency-avg, election-latency-max")


# sparkraft_raft_current_state as a number (Prometheus gauges are numbers): Kafka's state names.
STATE_CODES = {"Unstarted": 0, "Unattached": 1, "Voted": 2, "Prospective": 3, "Candidate": 4, "Follower": 5,
               "Leader": 6, "Resigned": 7}
# sparkraft_controller_broker_registration_state: Kafka's BrokerRegistrationState values
REGISTRATION_STATES = {"unregistered": -1, "fenced": 10, "controlled shutdown": 20, "active": 30}


class _PerScrape:
    """One computation shared by the gauges of one scrape (they are read one after another): what
    must be asked of the controller's loop is asked once, not once per gauge."""

    def __init__(self, compute: Callable[[], dict], ttl_s: float = 0.25):
        self.compute, self.ttl_s = compute, ttl_s
        self._lock = threading.Lock()
        self._value: Optional[dict | Exception] = None
        self._at = 0.0

    def __call__(self, key: str):
        with self._lock:
            now = time.monotonic()
            if self._value is None or now - self._at > self.ttl_s:
                try:
                    self._value = self.compute()
                except Exception as e:  # cannot answer now (a follower, a node stopping): no samples
                    self._value = e
                self._at = time.monotonic()  # from the answer: a slow one is not asked again by the next gauge
            if isinstance(self._value, Exception):
                raise self._value
            return self._value[key]


class _LastAnswer:
    """What the controller's loop answers, or, while it is busy with one long operation (fencing a
    broker that leads 70,000 of 2,000,000 partitions takes seconds), its last answer: a scrape
    then takes ``patience_s``, not as long as the operation."""

    def __init__(self, ask: Callable[[], "concurrent.futures.Future"], patience_s: float = 0.5):
        self.ask, self.patience_s = ask, patience_s
        self._last: Optional[dict] = None

    def __call__(self) -> dict:
        try:
            self._last = self.ask().result(self.patience_s)
        except concurrent.futures.TimeoutError:
            if self._last is None:
                raise
        return self._last


def raft_metrics(registry: Registry, node, snapshots=None) -> None:
    """A RaftNode's election and replication state, its log's disk, commit and election latency (and
    its controller's snapshots, if given)."""
    codes = ", ".join(f"{code}={name}" for name, code in STATE_CODES.items())
    status = node.status
    registry.gauge("sparkraft_raft_current_state", f"This node's Raft state ({codes}).",
                   lambda: STATE_CODES.get(status().state, -1), kafka=f"{RAFT}current-state")
    registry.gauge("sparkraft_raft_current_leader", "The leader's node id, -1 if none is known.",
                   lambda: -1 if status().leader_id is None else status().leader_id, kafka=f"{RAFT}current-leader")
    registry.gauge("sparkraft_raft_current_epoch", "The current leader epoch.", lambda: status().epoch,
                   kafka=f"{RAFT}current-epoch")
    registry.gauge("sparkraft_raft_high_watermark", "The first offset not known to be committed.",
                   lambda: status().high_watermark, kafka=f"{RAFT}high-watermark")
    registry.gauge("sparkraft_raft_log_end_offset", "One past the last offset in this node's log.",
                   lambda: status().log_end_offset, kafka=f"{RAFT}log-end-offset")
    registry.gauge("sparkraft_raft_log_start_offset", "First offset this node's log holds (below it: a snapshot).",
                   lambda: status().log_start_offset)
    registry.counter("sparkraft_raft_appended_records_total", "Records this node appended to the log as leader.",
                     lambda: node.core.records_appended, kafka=f"{RAFT}append-records-rate (its rate)")
    registry.counter("sparkraft_raft_fetched_records_total", "Records this node fetched from the leader.",
                     lambda: node.core.records_fetched, kafka=f"{RAFT}fetch-records-rate (its rate)")
    registry.gauge("sparkraft_raft_voters", "Voters in the quorum's current voter set.",
                   lambda: len(node.core.voter_history.latest))
    registry.gauge("sparkraft_raft_unknown_voter_connections", "Voters this node has no address for.",
                   lambda: sum(1 for v in node.core.voter_history.latest.values()
                               if v.key.id != node.node_id and v.key.id not in node.addresses.voters),
                   kafka=f"{RAFT}number-unknown-voter-connections")
    quorum = _PerScrape(lambda: _quorum_view(node))
    registry.gauge("sparkraft_raft_voters_caught_up", "On the leader: voters (itself included) that reached its "
                   "log end within the fetch timeout. Fewer than a majority: commits stall.",
                   lambda: quorum("caught_up"))
    registry.gauge("sparkraft_raft_voter_lag_records", "On the leader: records each voter's log lacks of its own.",
                   lambda: quorum("lag"), label="voter")
    registry.gauge("sparkraft_raft_voter_caught_up_age_seconds", "On the leader: since each voter last reached its "
                   "log end (a healthy one does at every fetch; one that has not since this leader began: since "
                   "then).", lambda: quorum("caught_up_age"), label="voter")
    registry.gauge("sparkraft_raft_log_dir_free_bytes", "Free space on the disk of the metadata log's directory.",
                   lambda: shutil.disk_usage(node.log_dir).free)
    registry.gauge("sparkraft_raft_log_dir_capacity_bytes", "Size of the disk of the metadata log's directory.",
                   lambda: shutil.disk_usage(node.log_dir).total)
    registry.counter("sparkraft_snapshot_fetched_total", "Snapshots downloaded from the leader (FetchSnapshot).",
                     lambda: status().snapshots_fetched)
    registry.histogram(node.commit_latency)
    registry.histogram(node.election_latency)
    registry.gauge("sparkraft_snapshot_latest_offset", "End offset of the newest snapshot, -1: none yet.",
                   lambda: -1 if snapshots is None else snapshots.latest_offset)
    registry.gauge("sparkraft_snapshot_latest_bytes", "Size of the newest snapshot, 0: none yet.",
                   lambda: 0 if snapshots is None else snapshots.latest_bytes,
                   kafka=f"{SNAPSHOTS}LatestSnapshotGeneratedBytes")
    registry.gauge("sparkraft_snapshot_age_seconds", "Since the newest snapshot was written (none yet: no sample).",
                   lambda: None if snapshots is None or snapshots.latest_at is None
                   else max(0.0, time.time() - snapshots.latest_at), kafka=f"{SNAPSHOTS}LatestSnapshotGeneratedAgeMs")
    registry.gauge("sparkraft_snapshot_lag_records", "Committed records not in the newest snapshot: what a restart "
                   "replays from the log.",
                   lambda: status().high_watermark - max(0, -1 if snapshots is None else snapshots.latest_offset))


def _quorum_view(node) -> dict:
    """The leader's DescribeQuorum, as the caught-up count and each voter's lag (a follower: none)."""
    info = node.describe_quorum(timeout=1.0)
    leader_end = next((v.log_end_offset for v in info.voters if v.replica_id == info.leader_id), 0)
    now_ms, within_ms = node.now_ms(), node.core.settings.fetch_timeout_ms
    since_ms = int((node.leading_since or time.time()) * 1000)  # a voter not caught up this term: since it began

    def age_s(v) -> float:
        if v.replica_id == info.leader_id:
            return 0.0
        return max(0, now_ms - (v.last_caught_up_ms if v.last_caught_up_ms is not None else since_ms)) / 1000

    ages = {v.replica_id: age_s(v) for v in info.voters}
    return {"caught_up": sum(1 for v in info.voters if ages[v.replica_id] * 1000 <= within_ms),
            "lag": {v.replica_id: max(0, leader_end - v.log_end_offset) for v in info.voters}, "caught_up_age": ages}


def controller_metrics(registry: Registry, controller) -> None:
    """A ControllerNode's view of the cluster (its committed image, and its partition index, which
    follows the records it has handled: on the active controller, a few in flight ahead of the
    committed ones) and its own loop."""
    raft_metrics(registry, controller.raft, controller.snapshots)
    cluster = _PerScrape(_LastAnswer(controller.health))
    registry.gauge("sparkraft_controller_active_controller_count", "1 on the active controller, else 0.",
                   lambda: 1 if controller.is_active else 0, kafka=f"{CONTROLLER}ActiveControllerCount")
    registry.counter("sparkraft_controller_new_active_controllers_total", "Times this node became the active "
                     "controller.", lambda: controller.activations, kafka=f"{CONTROLLER}NewActiveControllersCount")
    for name, key, help, kafka in (
            ("active_broker_count", "active", "Registered brokers that are not fenced.", "ActiveBrokerCount"),
            ("fenced_broker_count", "fenced", "Registered brokers that are fenced.", "FencedBrokerCount"),
            ("controlled_shutdown_broker_count", "shutting", "Brokers in controlled shutdown.",
             "ControlledShutdownBrokerCount"),
            ("global_topic_count", "topics", "Topics.", "GlobalTopicCount"),
            ("global_partition_count", "partitions", "Partitions of all topics.", "GlobalPartitionCount"),
            ("offline_partitions_count", "offline", "Partitions without a leader.", "OfflinePartitionsCount"),
            ("preferred_replica_imbalance_count", "imbalanced", "Partitions not led by their preferred replica.",
             "PreferredReplicaImbalanceCount"),
            ("under_replicated_partition_count", "under_replicated", "Partitions whose ISR is smaller than their "
             "replicas.", None),
            ("under_min_isr_partition_count", "under_min_isr", "Partitions whose ISR is smaller than their topic's "
             "min.insync.replicas: producers with acks=all are refused.", None),
            ("metadata_version", "metadata_version", "The finalized metadata.version level (-1: none).",
             f"{LOADER}CurrentMetadataVersion")):
        registry.gauge(f"sparkraft_controller_{name}", help, lambda k=key: cluster(k),
                       kafka=kafka if kafka is None or kafka.startswith("kafka.") else f"{CONTROLLER}{kafka}")
    states = ", ".join(f"{code}={name}" for name, code in REGISTRATION_STATES.items())
    registry.gauge("sparkraft_controller_broker_registration_state", f"Each registered broker's state ({states}).",
                   lambda: {b: REGISTRATION_STATES[state] for b, state in cluster("registration").items()},
                   label="broker", kafka=f"{CONTROLLER}BrokerRegistrationState")
    registry.gauge("sparkraft_controller_broker_heartbeat_age_seconds", "On the active controller: since each "
                   "broker's last heartbeat.", lambda: cluster("heartbeat_age"), label="broker",
                   kafka=f"{CONTROLLER}TimeSinceLastHeartbeatReceivedMs")
    registry.counter("sparkraft_controller_timed_out_broker_heartbeats_total", "Brokers fenced because their "
                     "session expired.", lambda: controller.core.timed_out_heartbeats,
                     kafka=f"{CONTROLLER}TimedOutBrokerHeartbeatCount")
    registry.gauge("sparkraft_controller_last_applied_record_offset", "The last committed offset this controller "
                   "applied (the seed's MetadataOffset).", lambda: controller.core.last_committed_offset,
                   kafka=f"{CONTROLLER}LastAppliedRecordOffset")
    registry.counter("sparkraft_controller_committed_records_total", "Records committed and applied (its rate: "
                     "the seed's MetadataCommitRate).", lambda: controller.core.last_committed_offset + 1,
                     kafka=f"{CONTROLLER}LastCommittedRecordOffset (+1)")
    registry.gauge("sparkraft_controller_last_applied_record_timestamp_seconds", "When the leader appended the last "
                   "applied record (Unix time).", lambda: _seconds(controller.core.last_committed_append_ms),
                   kafka=f"{CONTROLLER}LastAppliedRecordTimestamp")
    registry.gauge("sparkraft_controller_last_applied_record_lag_seconds", "Since the leader appended the last "
                   "applied record.", lambda: _age_s(controller.core.last_committed_append_ms),
                   kafka=f"{CONTROLLER}LastAppliedRecordLagMs")
    registry.counter("sparkraft_controller_event_queue_idle_seconds_total", "Time no thread was handling the "
                     "controller's work (its rate: the controller's idle ratio).", lambda: controller.idle_s,
                     kafka="kafka.controller:type=ControllerEventManager,name=AvgIdleRatio (its rate)")
    registry.counter("sparkraft_controller_metadata_errors_total", "Committed batches this controller could not "
                     "apply.", lambda: controller.replay_errors, kafka=f"{CONTROLLER}MetadataErrorCount")


def _seconds(ms: Optional[int]) -> Optional[float]:
    return None if ms is None else ms / 1000


def _level(version: Optional[int]) -> int:
    return -1 if version is None else version


def _age_s(ms: Optional[int]) -> Optional[float]:
    return None if ms is None else max(0.0, time.time() - ms / 1000)


def broker_metrics(registry: Registry, metadata, lifecycle=None) -> None:
    """A broker's metadata client (and lifecycle, if given)."""
    stats = metadata.stats
    registry.gauge("sparkraft_broker_last_applied_record_offset", "The last metadata offset this broker applied.",
                   lambda: metadata.applied_offset, kafka=f"{BROKER}last-applied-record-offset")
    registry.gauge("sparkraft_broker_last_applied_record_lag_seconds", "Since the leader appended the last record "
                   "this broker applied.", lambda: _age_s(stats.last_applied_append_ms),
                   kafka=f"{BROKER}last-applied-record-lag-ms")
    registry.gauge("sparkraft_broker_metadata_lag", "Committed records this broker has not applied yet.",
                   lambda: metadata.lag)
    registry.gauge("sparkraft_broker_metadata_version", "The metadata.version level of this broker's image "
                   "(-1: none).", lambda: _level(metadata.image.features.metadata_version),
                   kafka=f"{LOADER}CurrentMetadataVersion")
    registry.counter("sparkraft_broker_metadata_loader_idle_seconds_total", "Time the metadata loader waited for "
                     "records (its rate: the loader's idle ratio).",
                     lambda: max(0.0, time.monotonic() - stats.started - stats.apply_seconds),
                     kafka=f"{LOADER}AvgIdleRatio (its rate)")
    registry.gauge("sparkraft_broker_bootstrap_offset", "The offset its image started from.",
                   lambda: stats.bootstrap_offset)
    registry.gauge("sparkraft_broker_bootstrap_seconds", "How long loading the starting image took.",
                   lambda: stats.bootstrap_seconds)
    for source in ("cache", "delta", "snapshot", "log"):
        registry.gauge(f"sparkraft_broker_bootstrapped_from_{source}", f"1 if the image started from {source}.",
                       lambda s=source: 1 if stats.bootstrap_source == s else 0)
    registry.counter("sparkraft_broker_snapshots_fetched_total",
                     "Snapshots downloaded because the quorum's log started past this broker's image.",
                     lambda: stats.snapshots_fetched)
    if lifecycle is not None:
        registry.gauge("sparkraft_broker_fenced", "1 while the controller has this broker fenced.",
                       lambda: 1 if lifecycle.state.fenced else 0)
