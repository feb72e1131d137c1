"""``sparkraft cluster unregister --id N``: take a broker out of the cluster's metadata, as
``kafka-cluster.sh unregister`` does for a broker that is gone for good (a decommissioned host):
its leaderships move and it leaves every ISR, as on fencing, and it is no longer listed. A broker
that is still running registers again on its next heartbeat, as in Kafka.

``sparkraft cluster unregister-controller --id N`` (``kafka-cluster.sh unregister-controller``,
metadata.version 4.4-IV2): remove the registration of a controller taken out of the quorum; one
still running registers again.
"""
from __future__ import annotations

import argparse

from sparkraft.commands import add_bootstrap, add_command, add_group, client


def register(subparsers) -> None:
    commands = add_group(subparsers, "cluster", "cluster-wide operations on brokers")
    unregister = add_command(commands, "unregister", "unregister a broker that is gone for good", run_unregister)
    unregister.add_argument("--id", type=int, required=True, metavar="N", help="the broker's id")
    add_bootstrap(unregister)
    controller = add_command(commands, "unregister-controller", "unregister a controller taken out of the quorum",
                             run_unregister_controller)
    controller.add_argument("--id", type=int, required=True, metavar="N", help="the controller's id")
    add_bootstrap(controller)


def run_unregister(args: argparse.Namespace) -> None:
    with client(args) as c:
        c.unregister_broker(args.id)
    print(f"Broker {args.id} is no longer registered.")


def run_unregister_controller(args: argparse.Namespace) -> None:
    with client(args) as c:
        c.unregister_controller(args.id)
    print(f"Controller {args.id} is no longer registered.")
