"""``sparkraft topics create|alter|delete|describe|list``: topics through the active controller
(kafka-topics). ``alter --partitions N`` adds partitions (Kafka's CreatePartitions: a topic never
loses partitions), placed on the brokers as a new topic's are.

Writes go to the active controller wherever ``--bootstrap-controller`` points; reads may be answered
by any controller (the newest answer is preferred). ``describe --json`` prints
``{"name", "topic_id", "partitions": [{"partition", "leader", "replicas", "isr", "leader_epoch"}],
"configs": {...}}`` and ``list --json`` a list of names (DESIGN §10). A rejected request (invalid
name, no partitions, replication factor above the number of brokers, unknown config) prints one
line starting with Kafka's error name, exits 1 and changes nothing.
"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from sparkraft.commands import add_bootstrap, add_command, add_group, client

if TYPE_CHECKING:
    from quorum.controller.api import TopicDescription


def register(subparsers) -> None:
    commands = add_group(subparsers, "topics", "create, alter, delete, describe and list topics")

    create = add_command(commands, "create", "create a topic", run_create)
    create.add_argument("--topic", required=True, metavar="T", help="the topic's name")
    create.add_argument("--partitions", type=int, required=True, metavar="N",
                        help="number of partitions; -1 takes the controller's default (num.partitions, 1), "
                             "as in Kafka")
    create.add_argument("--replication-factor", type=int, required=True, metavar="R",
                        help="replicas per partition (at most the number of registered brokers); -1 takes the "
                             "controller's default (default.replication.factor, 1), as in Kafka")
    create.add_argument("--config", action="append", default=[], metavar="K=V",
                        help="a topic config; repeat for several")
    add_bootstrap(create)

    alter = add_command(commands, "alter", "add partitions to a topic", run_alter)
    alter.add_argument("--topic", required=True, metavar="T")
    alter.add_argument("--partitions", type=int, required=True, metavar="N",
                       help="the topic's new number of partitions (more than it has: partitions are never "
                            "removed, as in Kafka)")
    add_bootstrap(alter)

    delete = add_command(commands, "delete", "delete a topic", run_delete)
    delete.add_argument("--topic", required=True, metavar="T")
    add_bootstrap(delete)

    describe = add_command(commands, "describe", "describe a topic: partitions, leaders, ISR, configs",
                           run_describe)
    describe.add_argument("--topic", required=True, metavar="T")
    describe.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(describe)

    list_ = add_command(commands, "list", "list topic names", run_list)
    list_.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(list_)


def parse_config_pairs(items: list[str]) -> list[tuple[str, str]]:
    """``K=V`` strings as pairs; INVALID_CONFIG for one without ``=`` or with an empty key."""
    from quorum.errors import Errors, SparkraftError

    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SparkraftError(Errors.INVALID_CONFIG, f"invalid config {item!r}: expected KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    return pairs


def run_create(args: argparse.Namespace) -> None:
    configs = parse_config_pairs(args.config)
    with client(args) as c:
        c.create_topic(args.topic, args.partitions, args.replication_factor, configs)
    print(f"Created topic {args.topic}.")


def run_alter(args: argparse.Namespace) -> None:
    with client(args) as c:
        c.create_partitions(args.topic, args.partitions)
    print(f"Topic {args.topic} has {args.partitions} partitions now.")


def run_delete(args: argparse.Namespace) -> None:
    with client(args) as c:
        c.delete_topic(args.topic)
    print(f"Deleted topic {args.topic}.")


def description_json(d: "TopicDescription") -> dict:
    """The contract's JSON form of a topic (DESIGN §10)."""
    return {
        "name": d.name,
        "topic_id": d.topic_id,
        "partitions": [{"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
                        "isr": list(p.isr), "leader_epoch": p.leader_epoch}
                       for p in sorted(d.partitions, key=lambda p: p.partition)],
        "configs": dict(sorted(d.configs.items())),
    }


def format_header(d: "TopicDescription") -> str:
    """The topic's line, as kafka-topics --describe prints it."""
    rf = len(d.partitions[0].replicas) if d.partitions else 0
    configs = ",".join(f"{k}={v}" for k, v in sorted(d.configs.items()))
    count = d.partition_count if d.partition_count >= 0 else len(d.partitions)
    return (f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {count}\t"
            f"ReplicationFactor: {rf}\tConfigs: {configs}")


def format_partitions(d: "TopicDescription") -> str:
    return "\n".join(
        f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
        f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
        f"LeaderEpoch: {p.leader_epoch}" for p in sorted(d.partitions, key=lambda p: p.partition))


def format_description(d: "TopicDescription") -> str:
    """As kafka-topics --describe prints it."""
    return "\n".join(part for part in (format_header(d), format_partitions(d)) if part)


def run_describe(args: argparse.Namespace) -> None:
    """Printed a page of partitions at a time as the controller answers them (a topic of a million
    partitions starts printing at once, and the command never holds it all)."""
    with client(args) as c:
        for i, page in enumerate(c.describe_topic_pages(args.topic)):
            if args.json:
                head = description_json(page)
                parts = head.pop("partitions")
                if i == 0:  # the contract's object, written as it arrives
                    text = json.dumps(head)
                    print(text[:-1] + ', "partitions": [', end="")
                print(("" if i == 0 else ", ") + ", ".join(json.dumps(p) for p in parts) if parts else "", end="")
            else:
                if i == 0:
                    print(format_header(page))
                if page.partitions:
                    print(format_partitions(page))
    if args.json:
        print("]}")


def run_list(args: argparse.Namespace) -> None:
    with client(args) as c:
        names = list(c.list_topics())
    if args.json:
        print(json.dumps(names))
    elif names:
        print("\n".join(names))
