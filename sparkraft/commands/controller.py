"""``sparkraft controller start``: run one controller (a voter of the metadata quorum) in the foreground.

The process runs a :class:`~quorum.node.controller_node.ControllerNode`: the Raft service and the
Controller service share one gRPC server on the controller listener; when this node leads the
quorum it is the active controller and answers brokers and admin tools.

With ``process.roles=broker,controller`` it runs the broker too (combined mode; see
``sparkraft.commands.broker.run_combined``). The process is assembled in
quorum/node/controller_process.py; this module parses the command and handles the signals.

SIGTERM or SIGINT stops it cleanly: a leader resigns with EndQuorumEpoch (so a successor is
elected at once) and the process exits 0. Bad config, an unformatted or foreign log directory, or
a busy port exit 1 with one line on stderr before anything else is logged.
"""
from __future__ import annotations

import argparse
import logging
import threading

from sparkraft.commands import add_command, add_group, signals

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
    from quorum import failpoints
    from quorum.config import ConfigError, load_config
    from quorum.node.broker_process import broker_endpoints
    from quorum.node.controller_process import ControllerProcess

    config = load_config(args.config)
    failpoints.announce()
    if not config.is_controller:
        raise ConfigError(f"{args.config}: process.roles must include 'controller' to start a controller")
    if config.is_broker:
        if args.raft_only:
            raise ConfigError(f"{args.config}: --raft-only runs no metadata controller, so no broker either "
                              f"(process.roles=broker,controller)")
        from sparkraft.commands.broker import run_combined

        if not broker_endpoints(config):
            raise ConfigError(f"{args.config}: listeners has no broker listener to register")
        return run_combined(config)
    stop = threading.Event()
    received: list[str] = []

    def on_stop(why: str) -> None:
        received.append(why)
        stop.set()

    built: list[ControllerProcess] = []  # (a SIGHUP before it is built has nothing to reload)
    with signals(on_stop, lambda: [p.reload_tls() for p in built]):
        process = ControllerProcess(config, raft_only=args.raft_only)
        built.append(process)
        process.start()
        process.run_until(stop)
    log.info("Controller %d stopping (%s)", config.node_id, received[0] if received else "stopped")
    process.close(graceful=True)
    return 0
