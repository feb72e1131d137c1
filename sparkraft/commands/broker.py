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
admin requests forwarded to the active controller. SIGTERM or SIGINT performs a controlled
shutdown (its partition leaderships move to other brokers first, bounded by
``broker.session.timeout.ms``), writes the cache and exits 0.

The cluster id comes from ``metadata.log.dir/meta.properties`` if the directory was formatted
(``sparkraft storage format``), else from the controllers. The broker serves no data: no Produce, no Fetch.

With ``process.roles=broker,controller`` (Kafka's combined mode, as its quickstart runs it) the same
command, or ``sparkraft controller start``, runs the controller node and the broker in one process
(:func:`run_combined`). The process is assembled in quorum/node/broker_process.py and
controller_process.py; this module parses the command and handles the signals.
"""
from __future__ import annotations

import argparse
import logging

from sparkraft.commands import add_command, add_group, add_storage_options, signals

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


def warehouse_source(warehouse):
    """The image of the warehouse's latest consistent cut, as a broker's bootstrap source (None: none)."""
    if not warehouse:
        return None
    from delta_tables.bootstrap import image_from_cut

    return lambda: image_from_cut(warehouse)


def run_start(args: argparse.Namespace) -> int:
    from quorum.config import ConfigError, load_config
    from quorum.node.broker_process import BrokerProcess, broker_endpoints

    config = load_config(args.config)
    if not config.is_broker:
        raise ConfigError(f"{args.config}: process.roles must include 'broker' to start a broker")
    if not broker_endpoints(config):
        raise ConfigError(f"{args.config}: listeners has no broker listener to register")
    if config.is_controller:
        return run_combined(config, args.warehouse)
    broker = BrokerProcess(config, warehouse_source(args.warehouse), args.warehouse or "")
    with signals(broker.stop, broker.reopen):
        broker.run()
    return 0


def run_combined(config, warehouse=None) -> int:
    """``process.roles=broker,controller`` (Kafka's combined mode): quorum/node/controller_process.py."""
    from quorum.node.controller_process import CombinedProcess

    combined = CombinedProcess(config, warehouse_source(warehouse), warehouse or "")
    with signals(combined.stop, combined.reopen):
        combined.run()
    return 0
