"""A controller's process, assembled: its node (a ControllerNode; a bare RaftNode with
``raft_only``), its Kafka listeners (its controller listeners after the first), its metrics; and,
with ``process.roles=broker,controller`` (Kafka's combined mode), the broker on top of it
(:class:`CombinedProcess`). The CLI (``sparkraft controller start``, ``broker start``), the tests
and the benchmarks run controllers through these; signals stay the CLI's."""
from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Callable, Optional

from quorum.config import NodeConfig
from quorum.controller.core import ControllerCore
from quorum.controller.settings import ControllerSettings
from quorum.errors import Errors, SparkraftError
from quorum.kafka.controller_apis import ControllerKafkaListeners
from quorum.metrics.registry import Registry
from quorum.metrics.server import MetricsServer
from quorum.metrics.sources import controller_metrics, raft_metrics
from quorum.migration.driver import MigrationDriver
from quorum.node.broker_process import BrokerProcess, controllers_of
from quorum.node.controller_node import ControllerNode
from quorum.node.local_first import LocalFirstController
from quorum.node.raft_node import RaftNode
from quorum.node.refusal_reports import RefusalReports
from quorum.raft.settings import RaftSettings
from quorum.rpc.controller_client import ControllerClient
from quorum.rpc.controller_service import ControllerService
from quorum.rpc.controller_wire import controller_handlers
from quorum.rpc.raft_client import RaftClient
from quorum.rpc.sasl_service import SaslService
from quorum.snapshot.files import read_bootstrap_metadata
from quorum.snapshot.retention import Retention

log = logging.getLogger("sparkraft.controller")


def new_controller_node(node_id: int, voters, listen, log_dir, raft_settings=None, controller_settings_=None,
                        **raft_kw) -> ControllerNode:
    """A RaftNode serving both the Raft and the Controller gRPC services (and the wire) on
    ``listen``, and its ControllerCore, as one ControllerNode (not started)."""
    service, sasl = ControllerService(), SaslService()
    raft = RaftNode(node_id, voters, listen, log_dir, raft_settings or RaftSettings(),
                    servicers=(service.add_to_server, sasl.add_to_server),
                    wire_handlers=controller_handlers(service), **raft_kw)
    try:
        core = ControllerCore(node_id, raft.cluster_id, controller_settings_ or ControllerSettings())
        node = ControllerNode(raft, core)
    except BaseException:
        raft.shutdown(graceful=False)
        raise
    service.attach(node)
    sasl.attach(node.security)
    return node


def controller_node(config: NodeConfig) -> ControllerNode:
    """The ControllerNode a controller's properties describe (not started): its listeners, storage,
    retention and snapshots, security, limits, and a migration driver on a migrating quorum."""
    listen = config.controller_listener
    if listen is None or not (config.voters or config.bootstrap_servers):
        raise SparkraftError(Errors.INVALID_REQUEST, "a controller needs process.roles=controller, "
                             "controller.quorum.voters or .bootstrap.servers and a controller listener")
    settings = replace(config.controller_settings(), bootstrap_records=read_bootstrap_metadata(config.log_dir))
    node = new_controller_node(config.node_id, config.voters or {}, listen, config.log_dir, config.raft_settings(),
                               settings, segment_bytes=config.log_segment_bytes,
                               retention=Retention.from_config(config), bootstrap=config.bootstrap_servers or (),
                               listener_name=config.controller_listener_name, auto_join=config.auto_join_enable,
                               security=config.node_security(config.controller_listener_name),
                               wire_port=config.wire_port if config.wire_port >= 0 else None,
                               limits=config.connection_limits(), more_listeners=config.more_controller_listeners())
    node.snapshots.max_bytes = config.log_max_record_bytes_between_snapshots
    interval = config.log_max_snapshot_interval_ms
    node.snapshots.interval_s = interval / 1000 if interval else None
    if config.zookeeper_metadata_migration_enable:
        node.migration = MigrationDriver(node, config.zookeeper_connect, config.zookeeper_session_timeout_ms)
    client_security = config.node_security(config.controller_listener_name).client
    node.refusal_reports = RefusalReports(config.node_id, lambda: ControllerClient(
        controllers_of(config), timeout=10.0, rpc_timeout=5.0, security=client_security))
    return node


def kafka_listeners(config, node) -> Optional[ControllerKafkaListeners]:
    """The controller's Kafka listeners (on its one port, and its controller listeners after the
    first; None if it has neither), with the clients they reach the quorum through (both follow the
    leader)."""
    if not config.more_controller_listeners() and node.raft.shared_port is None:
        return None
    bootstrap = controllers_of(config)
    security = config.node_security(config.controller_listener_name).client
    return ControllerKafkaListeners(
        config, node, node.raft.cluster_id,
        forwarding=LocalFirstController(node, ControllerClient(bootstrap, timeout=30.0, rpc_timeout=10.0,
                                                               security=security)),
        raft=RaftClient(bootstrap, timeout=30.0, cluster_id=node.raft.cluster_id, security=security))


class ControllerProcess:
    """One controller: ``start``, then ``run_until(stop)`` returns when ``stop`` is set or the node
    stopped by itself; ``close`` stops it (a leader resigns first when ``graceful``). A node that
    failed raises its ``fatal_error`` from ``run_until`` after stopping everything."""

    def __init__(self, config, raft_only: bool = False):
        self.config = config
        self.node = RaftNode.from_config(config, raw_appends=True) if raft_only else controller_node(config)
        self.raft = self.node if raft_only else self.node.raft
        self.kafka = None if raft_only else kafka_listeners(config, self.node)
        self.refusal_reports = None if raft_only else self.node.refusal_reports
        self.metrics: Optional[MetricsServer] = None
        if config.metrics_listener:
            registry = Registry()
            (raft_metrics if raft_only else controller_metrics)(registry, self.node)
            self.metrics = MetricsServer(*config.metrics_listener, registry)

    def reload_tls(self) -> None:
        self.raft.reload_tls()
        if self.kafka is not None:
            self.kafka.reload_tls()

    def start(self) -> "ControllerProcess":
        try:
            if self.metrics is not None:
                self.metrics.start()
            self.node.start()
            if self.kafka is not None:
                self.kafka.start(threading.Event())
        except BaseException:
            self.close(graceful=False)
            raise
        return self

    def run_until(self, stop: threading.Event) -> None:
        while not stop.is_set():
            if self.node.wait_stopped(0.2):
                break
        if self.node.fatal_error is not None:
            self.close(graceful=False)
            raise self.node.fatal_error

    def close(self, graceful: bool = True) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        if self.refusal_reports is not None:
            self.refusal_reports.close()
        self.node.shutdown(graceful=graceful)
        if self.metrics is not None:
            self.metrics.stop()


class CombinedProcess:
    """``process.roles=broker,controller``: the controller node, then the broker on top of it in the
    same process. ``stop`` performs the broker's controlled shutdown first (its leaderships move
    while the quorum still has this voter), then the controller's clean stop (a leader resigns)."""

    def __init__(self, config, bootstrap_source: Optional[Callable[[], object]] = None, source_name: str = ""):
        self.config = config
        self.node = controller_node(config)
        self.broker = BrokerProcess(config, bootstrap_source, source_name)

    def stop(self, why: str = "stopped") -> None:
        self.broker.stop(why)

    def reopen(self) -> None:
        self.node.raft.reload_tls()
        self.broker.reopen()

    def run(self) -> None:
        """Until ``stop``, or until the controller fails (its error is raised)."""
        node = self.node
        node.start()
        log.info("Node %d runs combined (process.roles=broker,controller): the controller is up; the "
                 "broker follows", self.config.node_id)
        try:
            self.broker.run(stopped_with=lambda: node.fatal_error is not None or node.wait_stopped(0))
        except BaseException:
            node.shutdown(graceful=False)
            raise
        if node.fatal_error is not None:
            node.shutdown(graceful=False)
            raise node.fatal_error
        node.shutdown(graceful=True)
        log.info("Node %d stopped (broker and controller)", self.config.node_id)
