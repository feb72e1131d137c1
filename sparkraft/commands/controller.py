"""``sparkraft controller start``: run one controller (a voter of the metadata quorum) in the foreground.

The process runs a :class:`~quorum.node.controller_node.ControllerNode`: the Raft service and the
Controller service share one gRPC server on the controller listener; when this node leads the
quorum it is the active controller and answers brokers and admin tools.

With ``process.roles=broker,controller`` it runs the broker too (combined mode; see
``sparkraft.commands.broker.run_combined``).

SIGTERM or SIGINT stops it cleanly: a leader resigns with EndQuorumEpoch (so a successor is
elected at once) and the process exits 0. Bad config, an unformatted or foreign log directory, or
a busy port exit 1 with one line on stderr before anything else is logged.
"""
from __future__ import annotations

import argparse
import logging
import signal
import threading

from sparkraft.commands import add_command, add_group

log = logging.getLogger("sparkraft.controller")


def register(subparsers) -> None:
    commands = add_group(subparsers, "controller", "run a controller: a voter of the metadata quorum")
    start = add_command(commands, "start", "run a controller in the foreground until SIGTERM or SIGINT",
                        run_start, log_default="INFO", waits_for_quorum=True)
    start.add_argument("-c", "--config", required=True, metavar="FILE", help="the controller's properties file")
    start.add_argument("--raft-only", action="store_true",
                       help="run only the Raft quorum, no metadata controller, and accept raw Append RPCs "
                            "(for benchmarks and tests of the replicated log)")


def run_start(args: argparse.Namespace) -> int:
    from quorum.config import ConfigError, load_config
    from quorum.node.controller_node import ControllerNode

    config = load_config(args.config)
    if not config.is_controller:
        raise ConfigError(f"{args.config}: process.roles must include 'controller' to start a controller")
    if config.is_broker:
        if args.raft_only:
            raise ConfigError(f"{args.config}: --raft-only runs no metadata controller, so no broker either "
                              f"(process.roles=broker,controller)")
        from sparkraft.commands.broker import broker_endpoints, run_combined

        if not broker_endpoints(config):
            raise ConfigError(f"{args.config}: listeners has no broker listener to register")
        return run_combined(config)
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum, _frame) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    if args.raft_only:
        from quorum.node import RaftNode

        node = RaftNode.from_config(config, raw_appends=True)
    else:
        node = ControllerNode.from_config(config)
    raft = node if args.raft_only else node.raft
    kafka = None if args.raft_only else _kafka_listeners(config, node)

    def reload_tls(*_) -> None:
        raft.reload_tls()
        if kafka is not None:
            kafka.reload_tls()

    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, reload_tls)
    metrics = None
    try:
        if config.metrics_listener:
            from quorum.metrics.registry import Registry
            from quorum.metrics.server import MetricsServer
            from quorum.metrics.sources import controller_metrics, raft_metrics

            registry = Registry()
            if args.raft_only:
                raft_metrics(registry, node)
            else:
                controller_metrics(registry, node)
            metrics = MetricsServer(*config.metrics_listener, registry).start()
        node.start()
        if kafka is not None:
            kafka.start(threading.Event())
        while not stop.is_set():
            if node.wait_stopped(0.2):
                break
    except BaseException:
        if kafka is not None:
            kafka.stop()
        node.shutdown(graceful=False)
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if node.fatal_error is not None:
        if kafka is not None:
            kafka.stop()
        node.shutdown(graceful=False)
        raise node.fatal_error
    log.info("Controller %d stopping (%s)", config.node_id, received[0] if received else "stopped")
    if kafka is not None:
        kafka.stop()
    node.shutdown(graceful=True)
    if metrics is not None:
        metrics.stop()
    return 0


def _kafka_listeners(config, node):
    """The controller's Kafka listeners (its controller listeners after the first; None if it has
    none), with the clients they reach the quorum through (both follow the leader)."""
    from quorum.kafka.controller_apis import ControllerKafkaListeners
    from quorum.node.local_first import LocalFirstController
    from quorum.rpc.controller_client import ControllerClient
    from quorum.rpc.raft_client import RaftClient
    from sparkraft.commands.broker import controllers_of

    if not config.more_controller_listeners():
        return None
    bootstrap = controllers_of(config)
    security = config.node_security(config.controller_listener_name).client
    return ControllerKafkaListeners(
        config, node, node.raft.cluster_id,
        forwarding=LocalFirstController(node, ControllerClient(bootstrap, timeout=30.0, rpc_timeout=10.0,
                                                               security=security)),
        raft=RaftClient(bootstrap, timeout=30.0, cluster_id=node.raft.cluster_id, security=security))
