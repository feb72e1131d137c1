"""``sparkraft features describe | upgrade | downgrade``: finalized feature levels, as ``kafka-features.sh``.

- ``describe`` prints, per feature this controller supports, its supported range and finalized
  level, as Kafka does (``--json``: a list of objects with the same fields).
- ``upgrade (--metadata VERSION | --feature NAME=LEVEL)...`` raises levels. ``--feature
  kraft.version=1`` turns a static quorum (``controller.quorum.voters``) dynamic: the Raft leader
  writes the voters, with the directory ids they fetch with, into the log, after which ``quorum
  add-controller`` and ``remove-controller`` work. A level a registered broker does not support is
  refused.
- ``downgrade (--metadata VERSION | --feature NAME=LEVEL)... [--unsafe]`` lowers them. A downgrade
  that would drop metadata the lower level cannot express (a reassignment in flight below
  metadata.version 2, eligible leader replicas below 3 or with eligible.leader.replicas.version 0)
  is refused unless ``--unsafe``; then the controller rewrites what must change and the command
  prints what was dropped.

``--dry-run`` validates without changing anything. Each feature gets one line; a refused one says
why (Kafka's error name) and the command exits 1.
"""
from __future__ import annotations

import argparse
import json

from sparkraft.commands import add_bootstrap, add_command, add_group, client


def register(subparsers) -> None:
    commands = add_group(subparsers, "features",
                         "finalized feature levels (metadata.version, kraft.version, eligible.leader.replicas.version)")
    describe = add_command(commands, "describe", "each feature's supported range and finalized level", run_describe)
    describe.add_argument("--json", action="store_true", help="a JSON list")
    add_bootstrap(describe)
    for name, run, what in (("upgrade", run_upgrade, "raise feature levels, e.g. kraft.version=1 (a dynamic quorum)"),
                            ("downgrade", run_downgrade, "lower feature levels (--unsafe: even if metadata is lost)")):
        parser = add_command(commands, name, what, run)
        parser.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                            help=f"a feature and the level to {name} it to (repeatable)")
        parser.add_argument("--metadata", type=release_version, metavar="VERSION",
                            help="the metadata.version: Kafka's name (4.4-IV2; 3.9 for its newest level) or level")
        if name == "downgrade":
            parser.add_argument("--unsafe", action="store_true",
                                help="drop what the lower levels cannot express (reassignments in flight, ELR)")
        parser.add_argument("--dry-run", action="store_true", help="validate only; change nothing")
        add_bootstrap(parser)


def parse_updates(features: list[str], metadata: int | None) -> list[tuple[str, int]]:
    """``NAME=LEVEL`` arguments (and ``--metadata``) as (name, level); ValueError naming a bad one."""
    updates = []
    for text in features:
        name, eq, level = text.partition("=")
        if not eq or not name.strip() or not level.strip().isdigit():
            raise ValueError(f"--feature {text!r} is not NAME=LEVEL (a level is a number >= 0)")
        updates.append((name.strip(), int(level)))
    if metadata is not None:
        updates.append(("metadata.version", metadata))
    if not updates:
        raise ValueError("name at least one --feature NAME=LEVEL or --metadata VERSION")
    return updates


def run_describe(args: argparse.Namespace) -> int:
    from quorum.controller import api

    with client(args) as c:
        d = c.call(api.DescribeFeaturesRequest())
    finalized = dict(d.finalized)
    rows = [{"feature": name, "supported_min_version": lo, "supported_max_version": hi,
             "finalized_version_level": finalized.get(name, 0), "epoch": d.epoch}
            for name, lo, hi in sorted(d.supported, key=lambda s: (s[0] != "metadata.version", s[0]))]
    if args.json:
        print(json.dumps(rows))
        return 0
    from quorum.metadata.versions import release

    for r in rows:
        shown = release if r["feature"] == "metadata.version" else str  # Kafka's names, as kafka-features prints
        print(f"Feature: {r['feature']}\tSupportedMinVersion: {shown(r['supported_min_version'])}\t"
              f"SupportedMaxVersion: {shown(r['supported_max_version'])}\tFinalizedVersionLevel: "
              f"{shown(r['finalized_version_level'])}\tEpoch: {r['epoch']}")
    return 0


def release_version(text: str) -> int:
    """A metadata.version argument: Kafka's name (3.9-IV0, or 3.9 for its newest) or a level number."""
    from quorum.errors import SparkraftError
    from quorum.metadata.versions import parse_level

    try:
        return parse_level(text)
    except SparkraftError as e:
        raise argparse.ArgumentTypeError(e.message) from None


def run_upgrade(args: argparse.Namespace) -> int:
    return _update(args, "UPGRADE", "upgraded")


def run_downgrade(args: argparse.Namespace) -> int:
    return _update(args, "UNSAFE_DOWNGRADE" if args.unsafe else "SAFE_DOWNGRADE", "downgraded")


def _update(args: argparse.Namespace, kind: str, done: str) -> int:
    from quorum.controller import api

    updates = parse_updates(args.feature, args.metadata)
    with client(args) as c:
        results = c.call(api.UpdateFeaturesRequest(tuple(updates), validate_only=args.dry_run, upgrade_type=kind))
    failed = False
    verb = done.removesuffix("d")
    for (name, level), r in zip(updates, results):
        if r.error.value == 0:
            said = f" ({r.message})" if r.message else ""
            print(f"{name} {'can be ' + done if args.dry_run else 'was ' + done} to {level}.{said}")
        else:
            failed = True
            print(f"Could not {verb} {name} to {level}. {r.error.name}: {r.message}")
    return 1 if failed else 0
