"""A broker's process, assembled: its metadata image (cache, a given newer source, or the log; then
following it), registration and heartbeats, ISR expansion for the partitions it leads, its Kafka
listeners, its metrics; and on ``stop`` a controlled shutdown and its cache written. The CLI
(``sparkraft broker start``), combined mode (controller_process.py), the tests and the benchmarks
run a broker through :class:`BrokerProcess`."""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable, Optional

from quorum.broker.isr_expansion import IsrExpansion
from quorum.broker.lifecycle import BrokerLifecycle
from quorum.broker.metadata_client import BrokerMetadataClient
from quorum.controller.api import BrokerEndpoint
from quorum.kafka.listeners import KafkaListeners
from quorum.kafka.quorum_answers import RemoteQuorum
from quorum.log.meta_properties import META_PROPERTIES_FILE, check_storage, random_uuid
from quorum.metrics.registry import Registry
from quorum.metrics.server import MetricsServer
from quorum.metrics.sources import broker_metrics
from quorum.rpc.controller_client import ControllerClient
from quorum.rpc.convert import format_endpoint
from quorum.rpc.raft_client import RaftClient

log = logging.getLogger("sparkraft.broker")


def broker_endpoints(config) -> tuple:
    """The broker listeners it registers: its ``listeners`` but the controller listeners."""
    skip = set(config.controller_listener_names or ())
    return tuple(BrokerEndpoint(name, host, port, config.security_protocol(name))
                 for name, (host, port) in (config.listeners or {}).items() if name not in skip)


def controllers_of(config) -> str:
    """The controllers a node reaches the quorum through: its static voters or its bootstrap servers."""
    addresses = list(config.voters.values()) if config.voters else list(config.bootstrap_servers or ())
    return ",".join(format_endpoint(h, p) for h, p in addresses)


class BrokerProcess:
    """A broker's whole life in this process: its metadata image (cache, Delta cut or the log, then
    following), registration and heartbeats, ISR expansion for the partitions it leads, metrics, and
    on ``stop`` a controlled shutdown and its cache written."""

    def __init__(self, config, bootstrap_source: Optional[Callable[[], object]] = None, source_name: str = ""):
        """``bootstrap_source``: an image newer than the broker's cache to start from (the CLI's
        ``--warehouse``: the Delta tables' latest cut), named ``source_name`` in the log."""
        self.config = config
        self.bootstrap_source = bootstrap_source
        self.source_name = source_name
        self.security = config.node_security(None).client  # how this broker reaches the controllers
        self.client = ControllerClient(controllers_of(config),
                                       timeout=max(2.0, config.broker_heartbeat_interval_ms / 1000),
                                       rpc_timeout=2.0, security=self.security)
        self.stopping = threading.Event()
        self.received: list[str] = []
        self.lifecycle = None
        self.metadata = None
        self.kafka = None  # its Kafka-protocol listeners (quorum/kafka/)

    def stop(self, why: str = "stopped") -> None:
        """From a signal handler or another thread."""
        self.received.append(why)
        self.stopping.set()
        if self.lifecycle is not None:
            self.lifecycle.stop()

    def reopen(self) -> None:  # rotated key files: new connections read them again
        self.client.reopen()
        if self.metadata is not None:
            self.metadata.reopen()
        if self.kafka is not None:
            self.kafka.reload_tls()
        log.info("Broker %d: SIGHUP: TLS key material is read again for new connections", self.config.node_id)

    def run(self, stopped_with=None) -> None:
        """Until ``stop`` (or ``stopped_with()`` turns true: a combined node's controller failed)."""
        config, stop = self.config, self.stopping
        endpoints = broker_endpoints(config)
        cluster_id = ""
        if (Path(config.log_dir) / META_PROPERTIES_FILE).exists():
            cluster_id = check_storage(config.log_dir, config.node_id).cluster_id
        closing: list = []
        metrics_server = None
        try:
            while not cluster_id and not stop.is_set():
                try:
                    cluster_id = self.client.describe_cluster().cluster_id
                except Exception as e:  # controllers not up yet
                    log.info("Broker %d: no controller answers yet (%s)", config.node_id, e)
                    stop.wait(1.0)
            metadata = self.metadata = BrokerMetadataClient(
                controllers_of(config), cluster_id, cache_dir=config.log_dir, bootstrap_source=self.bootstrap_source,
                cache_interval_s=config.cache_interval_ms / 1000, security=self.security)
            metadata.start()
            log.info("Broker %d: metadata bootstrapped from %s at offset %d in %.2fs; following the log",
                     config.node_id, metadata.stats.bootstrap_source, metadata.stats.bootstrap_offset,
                     metadata.stats.bootstrap_seconds)
            lifecycle = self.lifecycle = BrokerLifecycle(
                self.client, config.node_id, cluster_id, random_uuid(), endpoints, config.broker_rack,
                config.broker_heartbeat_interval_ms, offset_source=lambda: metadata.applied_offset)
            # the ISRs of the partitions it leads: its own client, as heartbeats must never wait behind it
            isr_client = ControllerClient(controllers_of(config), timeout=10.0, rpc_timeout=5.0,
                                          security=self.security)
            closing.append(isr_client)
            expansion = IsrExpansion(config.node_id, isr_client, lambda: metadata.image,
                                     lambda _broker: lifecycle.state.broker_epoch)
            metadata.add_listener(expansion.on_update)
            threading.Thread(target=expansion.run, args=(stop,), name="isr-expansion", daemon=True).start()
            # Kafka clients: answered from the image, admin requests forwarded (their own controller client)
            kafka_client = ControllerClient(controllers_of(config), timeout=30.0, rpc_timeout=10.0,
                                            security=self.security)
            closing.append(kafka_client)
            raft_client = RaftClient(controllers_of(config), timeout=30.0, cluster_id=cluster_id,
                                     security=self.security)  # DescribeQuorum, from the quorum's leader
            closing.append(raft_client)
            self.kafka = KafkaListeners(config, endpoints, cluster_id, metadata, kafka_client,
                                        lambda: lifecycle.state.broker_epoch, stop,
                                        quorum=RemoteQuorum(raft_client, config.node_id)).start()
            if stopped_with is not None:
                threading.Thread(target=self._watch, args=(stopped_with,), name="combined-watch",
                                 daemon=True).start()
            if config.metrics_listener:
                registry = Registry()
                broker_metrics(registry, metadata, lifecycle)
                metrics_server = MetricsServer(*config.metrics_listener, registry).start()
            if stop.is_set():
                lifecycle.stop()
            log.info("Broker %d starting: cluster %s, endpoints %s, rack %s, controllers %s%s", config.node_id,
                     cluster_id, ",".join(f"{e.name}://{e.host}:{e.port}" for e in endpoints),
                     config.broker_rack or "none", controllers_of(config),
                     f", warehouse {self.source_name}" if self.source_name else "")
            lifecycle.run()
            log.info("Broker %d stopping (%s)", config.node_id, self.received[0] if self.received else "stopped")
            lifecycle.controlled_shutdown(timeout=max(5.0, config.broker_session_timeout_ms / 1000))
        finally:
            if self.kafka is not None:
                self.kafka.stop()
            if metrics_server is not None:
                metrics_server.stop()
            if self.metadata is not None:
                self.metadata.stop(save=True)  # the cache: a restart fetches only what it missed
                log.info("Broker %d: metadata at offset %d; %d records fetched since it started from %s",
                         config.node_id, self.metadata.applied_offset, self.metadata.stats.records_fetched,
                         self.metadata.stats.bootstrap_source)
            for extra in closing:
                extra.close()
            self.client.close()
        log.info("Broker %d stopped", config.node_id)

    def _watch(self, stopped_with) -> None:
        while not self.stopping.wait(0.2):
            if stopped_with():
                self.stop("the controller stopped")
                return
