"""``sparkraft revert --warehouse W (--to-offset N | --to-time T) [--only DOMAINS] [--json]
[--plan-out FILE] [--execute [FILE]] ...``: bring a cluster's metadata back to a past cut
(docs/use/revert.md).

Without ``--execute`` it is a dry run: the plan (delta_tables/revert.py), from the newest cut to the
target cut, as the admin operations it would make and what cannot be restored, and ``--plan-out``
saves it. ``--execute FILE`` applies exactly that saved plan (``--execute`` alone: the plan made
now), through ``--bootstrap-controller`` (sparkraft's controllers) or, for an Apache Kafka cluster
materialised with ``--source kafka``, ``--bootstrap-server`` (Kafka's Admin API; the log is read
from Kafka's controllers at ``--bootstrap-controller``): sparkraft/revert/execute.py.
"""
from __future__ import annotations

import argparse
import sys

from sparkraft.commands import (
    add_cluster_option,
    add_command,
    add_storage_options,
    client_security,
    cluster_warehouse,
)


def register(subparsers) -> None:
    parser = add_command(subparsers, "revert", "bring the cluster's metadata back to a past cut (a dry run "
                         "unless --execute)", run_revert)
    parser.add_argument("--warehouse", required=True, metavar="URI")
    add_storage_options(parser)
    to = parser.add_mutually_exclusive_group()
    to.add_argument("--to-offset", type=int, metavar="N", help="the newest cut at or below offset N")
    to.add_argument("--to-time", metavar="T", help="the newest cut whose records were all appended at or before T "
                    "(ISO 8601, e.g. 2026-11-29T08:00:00Z; no zone: UTC)")
    parser.add_argument("--only", metavar="DOMAINS", help="a comma-separated choice of topics, configs, acls, "
                        "quotas, users, features (default: all of them)")
    parser.add_argument("--json", action="store_true", help="the plan as JSON")
    parser.add_argument("--plan-out", metavar="FILE", help="save the plan, to review it and --execute it")
    parser.add_argument("--execute", nargs="?", const="", metavar="FILE",
                        help="apply the plan saved in FILE (without FILE: the plan made now)")
    parser.add_argument("--allow-topic-deletion", action="store_true", help="let --execute delete topics")
    parser.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                        help="the cluster's controllers (--execute): sparkraft's, or Apache Kafka's to read its log")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="an Apache Kafka broker (--execute on a cluster materialised with --source kafka)")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="how long to look for the active controller")
    add_cluster_option(parser)
    parser.add_argument("--verify-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="how long --execute waits for the streaming job's cut to verify the result (0: not)")


def run_revert(args: argparse.Namespace) -> int:
    from delta_tables.bootstrap import image_from_cut
    from delta_tables.cut import latest_cut
    from delta_tables.revert import DOMAINS, Plan, plan

    args.warehouse = cluster_warehouse(args)
    domains = tuple(d.strip() for d in args.only.split(",") if d.strip()) if args.only else DOMAINS
    if args.execute:  # a saved plan: its own target and domains
        if args.to_offset is not None or args.to_time or args.only:
            raise ValueError("--execute FILE applies the saved plan as it is: leave out --to-offset, --to-time "
                             "and --only")
        with open(args.execute) as f:
            chosen = Plan.from_json(f.read())
        target_cut = latest_cut(args.warehouse, chosen.to_offset)
        if target_cut.offset != chosen.to_offset:
            raise ValueError(f"the plan's target cut at offset {chosen.to_offset} is not in {args.warehouse}")
        target = image_from_cut(args.warehouse, target_cut)[0]
    else:
        target_cut = _target_cut(args)
        newest = latest_cut(args.warehouse)
        target = image_from_cut(args.warehouse, target_cut)[0]
        chosen = plan(image_from_cut(args.warehouse, newest)[0], target, domains, newest.offset, target_cut.offset)
        if args.plan_out:
            with open(args.plan_out, "w") as f:
                f.write(chosen.to_json() + "\n")
        if args.execute is None:
            _show(chosen, args)
            return 0
    return _execute(args, chosen, target)


def _target_cut(args: argparse.Namespace):
    from delta_tables.cut import cut_at_time, latest_cut, parse_time

    if args.to_time:
        return cut_at_time(args.warehouse, parse_time(args.to_time))
    if args.to_offset is None:
        raise ValueError("say where to go back to: --to-offset N or --to-time T")
    return latest_cut(args.warehouse, args.to_offset)


def _show(p, args: argparse.Namespace) -> None:
    if args.json:
        print(p.to_json())
        return
    print(f"Revert to the cut at offset {p.to_offset} (from the newest cut, at offset {p.from_offset}); "
          f"domains: {', '.join(p.domains)}.")
    for i, step in enumerate(p.steps, 1):
        print(f"  {i}. {step.describe()}")
    if not p.steps:
        print("  Nothing to do: the chosen domains are as they were at the target cut.")
    if p.cannot:
        print("Cannot be restored:")
        for c in p.cannot:
            print(f"  - {c.what}: {c.reason}")
    saved = args.plan_out or "FILE"
    print(f"Dry run: nothing applied. Apply it with --execute {saved}"
          + ("" if args.plan_out else " after saving it with --plan-out FILE") + ".")


def _execute(args: argparse.Namespace, p, target) -> int:
    from sparkraft.revert import execute

    if not args.bootstrap_controller:
        raise ValueError("--execute needs --bootstrap-controller (sparkraft's controllers, or Apache Kafka's with "
                         "--bootstrap-server)")
    execute.refuse_unallowed(p, args.allow_topic_deletion)
    with _admin(args) as admin:
        execute.recheck(p, admin, target)
        print(f"Re-checked against {admin.name}: nothing in {', '.join(p.domains)} changed since the plan "
              f"(from offset {p.from_offset}).")
        outcome = execute.apply(p, admin, lambda done, total: print(f"  {done} of {total} steps", file=sys.stderr)
                                if total >= 100 and done % 500 == 0 else None)
    for step, error in outcome.failed:
        print(f"Refused: {step.describe()}: {error}")
    print(f"Applied {len(outcome.applied)} of {len(p.steps)} steps" + (
        f"; refused {len(outcome.failed)}, not tried {len(outcome.not_tried)} (a new plan covers only what "
        f"remains)" if outcome.failed else "") + ".")
    if outcome.failed:
        return 1
    if args.verify_timeout <= 0 or not p.steps:
        return 0
    left = execute.verify(args.warehouse, p, target, outcome.committed, args.verify_timeout)
    if left is None:
        print(f"Not verified: no cut reached offset {outcome.committed} within {args.verify_timeout:g} s (is the "
              f"streaming job running?).")
        return 0
    if left:
        print("Differs from the target still:")
        for line in left:
            print(f"  {line}")
        return 1
    print(f"Verified: the tables' newest cut equals the target's in {', '.join(p.domains)}.")
    return 0


def _admin(args: argparse.Namespace):
    from sparkraft.commands import client

    if args.bootstrap_server:
        from sparkraft.revert.kafka_admin import KafkaAdmin

        return KafkaAdmin(args.bootstrap_server, args.bootstrap_controller, client_security(args), args.timeout)
    from sparkraft.revert.sparkraft_admin import SparkraftAdmin

    return SparkraftAdmin(client(args), args.bootstrap_controller, client_security(args))
