"""``sparkraft broker start``: run a broker's cluster membership in the foreground.

The broker (``process.roles=broker``) finds the controllers through ``controller.quorum.voters``
or ``controller.quorum.bootstrap.servers``. It first loads its metadata image (the newest of its
cache in ``metadata.log.dir`` from the last run and, with ``--warehouse``, the latest consistent cut
of the Delta tables; else the log from offset 0) and follows the committed log
as an observer (:mod:`quorum.broker.metadata_client`); then it registers its ``listeners`` as
endpoints with its ``broker.rack`` and a fresh incarnation id, and heartbeats every
``broker.heartbeat.interval.ms`` with the offset its image has reached, so it is unfenced once it
has caught up. As the leader of partitions it brings caught-up replicas back into their ISRs
(:mod:`quorum.broker.isr_expansion`). Once its image has its own registration it answers Kafka
clients on those listeners (:mod:`quorum.kafka`): Metadata and the describe requests from its image,
admin requests forwarded to the active controller. SIGTERM or SIGINT performs a controlled shutdown (its partition leaderships move to
other brokers first, bounded by ``broker.session.timeout.ms``), writes the cache and exits 0.

The cluster id comes from ``metadata.log.dir/meta.properties`` if the directory was formatted
(``sparkraft storage format``), else from the controllers. The broker serves no data: no Produce, no Fetch.

With ``process.roles=broker,controller`` (Kafka's combined mode, as its quickstart runs it) the same
command, or ``sparkraft controller start``, runs the controller node and the broker in one process
(:func:`run_combined`).
"""
from __future__ import annotations

import argparse
import logging
import signal
import threading

from sparkraft.commands import add_command, add_group, add_storage_options

log = logging.getLogger("sparkraft.broker")

def register(subparsers) -> None:
    commands = add_group(subparsers, "broker", "run a broker: registers and heartbeats with the controllers")
    start = add_command(commands, "start", "run a broker in the foreground until SIGTERM or SIGINT",
                        run_start, log_default="INFO", waits_for_quorum=True)
    start.add_argument("-c", "--config", required=True, metavar="FILE", help="the broker's properties file")
    start.add_argument("--warehouse", metavar="URI",
                       help="the Delta warehouse of `sparkraft materialize`: bootstrap from its latest consistent cut "
                            "when that is newer than the broker's cache")
    add_storage_options(start)


def broker_endpoints(config) -> tuple:
    from quorum.controller.api import BrokerEndpoint

    skip = set(config.controller_listener_names or ())
    return tuple(BrokerEndpoint(name, host, port, config.security_protocol(name))
                 for name, (host, port) in (config.listeners or {}).items() if name not in skip)


def controllers_of(config) -> str:
    from quorum.rpc.convert import format_endpoint

    addresses = list(config.voters.values()) if config.voters else list(config.bootstrap_servers or ())
    return ",".join(format_endpoint(h, p) for h, p in addresses)


def run_start(args: argparse.Namespace) -> int:
    from quorum.config import ConfigError, load_config

    config = load_config(args.config)
    if not config.is_broker:
        raise ConfigError(f"{args.config}: process.roles must include 'broker' to start a broker")
    if not broker_endpoints(config):
        raise ConfigError(f"{args.config}: listeners has no broker listener to register")
    if config.is_controller:
        return run_combined(config, args.warehouse)
    broker = BrokerRuntime(config, args.warehouse)
    with _signals(broker.stop, broker.reopen):
        broker.run()
    return 0


class _signals:
    """SIGTERM/SIGINT call ``stop``, SIGHUP ``reopen``, while the ``with`` block runs."""

    def __init__(self, stop, reopen):
        self.stop, self.reopen, self.previous = stop, reopen, {}

    def __enter__(self):
        def on_signal(signum, _frame) -> None:
            self.stop(signal.Signals(signum).name)

        self.previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        self.previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda *_: self.reopen())
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def run_combined(config, warehouse=None) -> int:
    """``process.roles=broker,controller`` (Kafka's combined mode): the controller node, then the
    broker on top of it in the same process. A stop performs the broker's controlled shutdown first
    (its leaderships move while the quorum still has this voter), then the controller's clean stop
    (a leader resigns)."""
    from quorum.node.controller_node import ControllerNode

    node = ControllerNode.from_config(config)
    broker = BrokerRuntime(config, warehouse)

    def reopen() -> None:
        node.raft.reload_tls()
        broker.reopen()

    with _signals(broker.stop, reopen):
        node.start()
        log.info("Node %d runs combined (process.roles=broker,controller): the controller is up; the "
                 "broker follows", config.node_id)
        try:
            broker.run(stopped_with=lambda: node.fatal_error is not None or node.wait_stopped(0))
        except BaseException:
            node.shutdown(graceful=False)
            raise
    if node.fatal_error is not None:
        node.shutdown(graceful=False)
        raise node.fatal_error
    node.shutdown(graceful=True)
    log.info("Node %d stopped (broker and controller)", config.node_id)
    return 0


class BrokerRuntime:
    """A broker's whole life in this process: its metadata image (cache, Delta cut or the log, then
    following), registration and heartbeats, ISR expansion for the partitions it leads, metrics, and
    on ``stop`` a controlled shutdown and its cache written."""

    def __init__(self, config, warehouse=None):
        from quorum.rpc.controller_client import ControllerClient

        self.config = config
        self.warehouse = warehouse
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
        from pathlib import Path

        from quorum.broker.isr_expansion import IsrExpansion
        from quorum.broker.lifecycle import BrokerLifecycle
        from quorum.broker.metadata_client import BrokerMetadataClient
        from quorum.kafka.listeners import KafkaListeners
        from quorum.kafka.quorum_answers import RemoteQuorum
        from quorum.log.meta_properties import META_PROPERTIES_FILE, check_storage, random_uuid
        from quorum.rpc.controller_client import ControllerClient
        from quorum.rpc.raft_client import RaftClient

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
            source = None
            if self.warehouse:
                from delta_tables.bootstrap import image_from_cut

                source = lambda: image_from_cut(self.warehouse)  # noqa: E731
            metadata = self.metadata = BrokerMetadataClient(
                controllers_of(config), cluster_id, cache_dir=config.log_dir, bootstrap_source=source,
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
                from quorum.metrics.registry import Registry
                from quorum.metrics.server import MetricsServer
                from quorum.metrics.sources import broker_metrics

                registry = Registry()
                broker_metrics(registry, metadata, lifecycle)
                metrics_server = MetricsServer(*config.metrics_listener, registry).start()
            if stop.is_set():
                lifecycle.stop()
            log.info("Broker %d starting: cluster %s, endpoints %s, rack %s, controllers %s%s", config.node_id,
                     cluster_id, ",".join(f"{e.name}://{e.host}:{e.port}" for e in endpoints),
                     config.broker_rack or "none", controllers_of(config),
                     f", warehouse {self.warehouse}" if self.warehouse else "")
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
