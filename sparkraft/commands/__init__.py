"""Command groups of the ``sparkraft`` CLI, one module each (storage, controller, quorum...), and the
helpers they share (this module): parsers, options, the controller client, signal handling.

A group module has ``register(subparsers)``: it adds its group parser and, for each command,
calls ``add_command``. Modules import heavy things (gRPC, Spark) inside their handlers, so
``sparkraft --help`` stays fast. A handler takes the parsed args and returns an exit code (None
means 0); bad input is raised, not printed: ``sparkraft.cli`` turns it into one stderr line.
"""
from __future__ import annotations

import argparse
import signal
from typing import Callable

from sparkraft.logging_setup import LEVELS

Handler = Callable[[argparse.Namespace], "int | None"]


def common_options() -> argparse.ArgumentParser:
    """Flags every parser accepts, before or after the command (SUPPRESS keeps an earlier value)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks for errors")
    common.add_argument("--log-level", type=str.upper, choices=LEVELS, default=argparse.SUPPRESS,
                        help="log level (default: $SPARKRAFT_LOG_LEVEL, else WARNING or INFO)")
    common.add_argument("--command-config", metavar="FILE", default=argparse.SUPPRESS,
                        help="client security settings, Kafka's keys: security.protocol, ssl.truststore.location, "
                             "ssl.keystore.location, sasl.mechanism, sasl.username, sasl.password")
    return common


def client_security(args: argparse.Namespace):
    """The ClientSecurity of ``--command-config`` (PLAINTEXT without it); ValueError on a bad file."""
    from quorum.security.client import ClientSecurity

    return ClientSecurity.from_command_config(getattr(args, "command_config", None))


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-controller`` and ``--timeout``, as every controller-facing command takes them."""
    parser.add_argument("--bootstrap-controller", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                        help="any controllers of the quorum (down or standby ones are fine)")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="how long to look for the active controller (default 15)")


def client(args: argparse.Namespace):
    """A ControllerClient for ``--bootstrap-controller``, ``--timeout`` and ``--command-config``."""
    from quorum.rpc.controller_client import ControllerClient

    return ControllerClient(args.bootstrap_controller, timeout=args.timeout, security=client_security(args))


class signals:
    """While the ``with`` block runs: SIGTERM and SIGINT call ``stop(signal name)``, SIGHUP calls
    ``reopen()`` (rotated key files are read again), as a server process takes them."""

    def __init__(self, stop: Callable[[str], None], reopen: Callable[[], None]):
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


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    """``--storage-option KEY=VALUE`` for a command that opens a warehouse (delta_tables/storage.py)."""
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an object store option for the warehouse (e.g. AWS_ENDPOINT_URL=http://host:9000), "
                             "beside the AWS_* environment variables (repeatable)")


def add_cluster_option(parser: argparse.ArgumentParser) -> None:
    """``--cluster NAME``: on a fleet's warehouse (materialize --sources), one cluster's tables."""
    parser.add_argument("--cluster", metavar="NAME", help="on a fleet's warehouse: the cluster whose tables to use")


def cluster_warehouse(args: argparse.Namespace) -> str:
    """``--warehouse``, or with ``--cluster`` that cluster's warehouse in the fleet's; one line
    when ``--warehouse`` is a fleet's and no cluster is named, or the fleet has no such cluster."""
    from delta_tables.fleet import cluster_of, is_fleet

    fleet = is_fleet(args.warehouse)
    if getattr(args, "cluster", None):
        if not fleet:
            raise ValueError(f"--cluster names a cluster of a fleet: {args.warehouse} is one cluster's warehouse")
        return cluster_of(args.warehouse, args.cluster)
    if fleet:
        raise ValueError(f"{args.warehouse} is a fleet's warehouse: name the cluster with --cluster NAME")
    return args.warehouse


def apply_storage_options(args: argparse.Namespace) -> None:
    """Set the process's storage options from ``--storage-option`` (before any warehouse is opened)."""
    given = getattr(args, "storage_option", None)
    if given:
        from delta_tables import storage

        storage.set_options(storage.parse_options(given))


_COMMON = common_options()


def add_group(subparsers, name: str, help: str):
    """A command group (``sparkraft storage``); returns the subparsers to add commands to."""
    parser = subparsers.add_parser(name, help=help, description=help, parents=[_COMMON])
    commands = parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)
    return commands


def add_command(subparsers, name: str, help: str, run: Handler, log_default: str = "WARNING",
                waits_for_quorum: bool = False) -> argparse.ArgumentParser:
    """A runnable command; long-running processes pass ``log_default="INFO"``. ``waits_for_quorum``:
    a server that waits for its quorum to start however long that takes (controllers, brokers);
    every other command is a client, and says at once when nothing listens (quorum/rpc/nothing_listens.py)."""
    parser = subparsers.add_parser(name, help=help, description=help, parents=[_COMMON])
    parser.set_defaults(run=run, log_default=log_default, command_parser=parser, waits_for_quorum=waits_for_quorum)
    return parser
