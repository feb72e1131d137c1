"""``sparkraft configs alter|describe``: dynamic configs of topics, brokers and the cluster, and users'
SCRAM credentials (kafka-configs).

``--entity-type topics`` needs ``--entity-name TOPIC``; ``brokers`` takes a broker id (without one,
the cluster-wide broker default); ``cluster`` takes no name; ``users`` takes a user name and the
configs ``SCRAM-SHA-256=[password=...,iterations=N]`` and ``SCRAM-SHA-512=[...]`` (see
scram_specs.py); describing users shows mechanisms and iterations, never salts or keys. ``--add-config k=v,k2=[a,b]`` sets keys
(square brackets keep commas inside one value, as in Kafka), ``--delete-config k,k2`` removes them;
both in one incremental alter, applied atomically. ``describe`` shows the dynamic configs (with
``--all``, every known key, defaults included, as kafka-configs does); ``--json`` prints a list of
``{"name", "value", "source"}`` (DESIGN §10).
"""
from __future__ import annotations

import argparse
import json

from sparkraft.commands import add_command, add_group
from sparkraft.commands.topics import add_bootstrap, client

ENTITY_TYPES = ("topics", "brokers", "cluster", "users")


def register(subparsers) -> None:
    commands = add_group(subparsers, "configs", "alter and describe dynamic configs")
    alter = add_command(commands, "alter", "set or delete configs of a topic, a broker or the cluster", run_alter)
    _entity_options(alter)
    alter.add_argument("--add-config", metavar="K=V[,K=V...]", help="configs to set")
    alter.add_argument("--delete-config", metavar="K[,K...]", help="configs to delete")
    add_bootstrap(alter)
    describe = add_command(commands, "describe", "show the configs of a topic, a broker or the cluster",
                           run_describe)
    _entity_options(describe)
    describe.add_argument("--all", action="store_true",
                          help="also list every known key at its default (DEFAULT_CONFIG)")
    describe.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(describe)


def _entity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entity-type", required=True, choices=ENTITY_TYPES)
    parser.add_argument("--entity-name", metavar="N", help="topic name, broker id or user name")


def resource_of(entity_type: str, name: "str | None"):
    """The ConfigResourceKey for the command line's entity; INVALID_REQUEST if it makes no sense."""
    from quorum.controller.api import ConfigResourceKey
    from quorum.errors import Errors, SparkraftError

    if entity_type == "topics":
        if not name:
            raise SparkraftError(Errors.INVALID_REQUEST, "--entity-type topics needs --entity-name TOPIC")
        return ConfigResourceKey("TOPIC", name)
    if entity_type == "brokers":
        if name and not name.isdigit():
            raise SparkraftError(Errors.INVALID_REQUEST, f"--entity-name for brokers must be a broker id, not {name!r}")
        return ConfigResourceKey("BROKER", name or "")
    if name:
        raise SparkraftError(Errors.INVALID_REQUEST, "--entity-type cluster takes no --entity-name")
    return ConfigResourceKey("CLUSTER", "")


def split_configs(text: str) -> list[str]:
    """Split on commas outside square brackets: ``a=1,b=[x,y]`` -> ``['a=1', 'b=[x,y]']``."""
    items, current, depth = [], [], 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def alterations(add: "str | None", delete: "str | None"):
    from quorum.controller.api import AlterableConfig
    from quorum.errors import Errors, SparkraftError

    ops = []
    for item in split_configs(add or ""):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SparkraftError(Errors.INVALID_CONFIG, f"invalid config {item!r}: expected KEY=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        ops.append(AlterableConfig(key.strip(), "SET", value))
    for key in split_configs(delete or ""):
        ops.append(AlterableConfig(key, "DELETE"))
    if not ops:
        raise SparkraftError(Errors.INVALID_REQUEST, "nothing to alter: give --add-config and/or --delete-config")
    return ops


def _describe_name(entity_type: str, name: "str | None") -> str:
    if entity_type == "topics":
        return f"topic {name}"
    if entity_type == "brokers":
        return f"broker {name}" if name else "the default broker"
    return "the cluster"


def run_alter(args: argparse.Namespace) -> None:
    if args.entity_type == "users":
        return _alter_user(args)
    resource = resource_of(args.entity_type, args.entity_name)
    ops = alterations(args.add_config, args.delete_config)
    with client(args) as c:
        c.alter_configs(resource, ops)
    print(f"Completed updating config for {_describe_name(args.entity_type, args.entity_name)}.")


def run_describe(args: argparse.Namespace) -> None:
    if args.entity_type == "users":
        return _describe_users(args)
    resource = resource_of(args.entity_type, args.entity_name)
    with client(args) as c:
        entries = c.describe_configs(resource)
    rows = [{"name": e.name, "value": None if e.sensitive else e.value, "source": e.source}
            for e in sorted(entries, key=lambda e: e.name) if args.all or e.source != "DEFAULT_CONFIG"]
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'All' if args.all else 'Dynamic'} configs for {_describe_name(args.entity_type, args.entity_name)} are:")
    for r in rows:
        print(f"  {r['name']}={'' if r['value'] is None else r['value']} ({r['source']})")


# -- users: SCRAM credentials -------------------------------------------------------------------
def _user_alteration(user: str, add: "str | None", delete: "str | None"):
    """The AlterUserScramCredentialsRequest for ``--add-config`` / ``--delete-config`` of a user."""
    from quorum.controller.api import AlterUserScramCredentialsRequest, ScramCredentialDeletion
    from quorum.errors import Errors, SparkraftError
    from quorum.security.scram import MECHANISMS
    from sparkraft.commands.scram_specs import parse_spec, upsertion

    def known(name: str) -> str:
        if name.strip().upper() not in MECHANISMS:
            raise SparkraftError(Errors.INVALID_CONFIG, f"users take only the configs {' and '.join(MECHANISMS)} "
                                                        f"here, not {name.strip()!r}")
        return name.strip().upper()

    upserts = []
    for item in split_configs(add or ""):
        known(item.partition("=")[0])
        m, values = parse_spec(item, ("password", "iterations"))
        upserts.append(upsertion(m, user, values))
    deletions = tuple(ScramCredentialDeletion(user, known(name)) for name in split_configs(delete or ""))
    if not upserts and not deletions:
        raise SparkraftError(Errors.INVALID_REQUEST, "nothing to alter: give --add-config and/or --delete-config")
    return AlterUserScramCredentialsRequest(deletions, tuple(upserts))


def _alter_user(args: argparse.Namespace) -> None:
    from quorum.errors import Errors, SparkraftError
    from sparkraft.commands import client_security

    if not args.entity_name:
        raise SparkraftError(Errors.INVALID_REQUEST, "--entity-type users needs --entity-name USER")
    request = _user_alteration(args.entity_name, args.add_config, args.delete_config)
    if request.upsertions and not client_security(args).tls:
        raise SparkraftError(Errors.INVALID_REQUEST, "setting a SCRAM credential needs a TLS connection (--command-config "
                                                     "with security.protocol=SSL or SASL_SSL): the salted password "
                                                     "must not cross the network in clear")
    with client(args) as c:
        (result,) = c.call(request)
    if result.error is not Errors.NONE:
        raise SparkraftError(result.error, result.message)
    print(f"Completed updating config for user {args.entity_name}.")


def _describe_users(args: argparse.Namespace) -> None:
    from quorum.controller.api import DescribeUserScramCredentialsRequest
    from quorum.errors import Errors, SparkraftError

    request = DescribeUserScramCredentialsRequest((args.entity_name,) if args.entity_name else ())
    with client(args) as c:
        results = c.call(request)
    for r in results:
        if r.error is not Errors.NONE and args.entity_name:
            raise SparkraftError(r.error, r.message)
    rows = [{"user": r.user, "name": mechanism, "value": f"iterations={iterations}", "source": "DYNAMIC_USER_CONFIG"}
            for r in results for mechanism, iterations in r.credentials]
    if args.json:
        print(json.dumps(rows))
        return
    for r in results:
        configs = ", ".join(f"{m}=iterations={i}" for m, i in r.credentials)
        print(f"SCRAM credential configs for user-principal '{r.user}' are {configs}")
