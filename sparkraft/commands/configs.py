"""``sparkraft configs alter|describe``: dynamic configs of topics, brokers, the cluster and groups, and
users' SCRAM credentials and client quotas (kafka-configs).

``--entity-type topics`` needs ``--entity-name TOPIC``, ``groups`` a group id; ``brokers`` takes a broker id (without one,
the cluster-wide broker default); ``cluster`` takes no name; ``users`` takes a user name and the
configs ``SCRAM-SHA-256=[password=...,iterations=N]`` and ``SCRAM-SHA-512=[...]`` (see
scram_specs.py); describing users shows mechanisms and iterations, never salts or keys. Client
quotas, as Kafka's: ``--entity-type users|clients|ips`` with ``--entity-name N`` or
``--entity-default`` after each (``users`` then ``clients`` for a user's client), keys
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate`` (users, clients) and ``connection_creation_rate`` (ips). ``--add-config k=v,k2=[a,b]`` sets keys
(square brackets keep commas inside one value, as in Kafka), ``--delete-config k,k2`` removes them;
both in one incremental alter, applied atomically. ``describe`` shows the dynamic configs (with
``--all``, every known key, defaults included, as kafka-configs does); ``--json`` prints a list of
``{"name", "value", "source"}`` (DESIGN §10).
"""
from __future__ import annotations

import argparse
import json

from sparkraft.commands import add_bootstrap, add_command, add_group, client

ENTITY_TYPES = ("topics", "brokers", "cluster", "groups", "users", "clients", "ips")
QUOTA_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}  # the command's type -> the quota entity's
QUOTA_NAMES = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}  # as kafka-configs prints them
DEFAULT = object()  # --entity-default: the default entity of the type before it


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
    parser.add_argument("--entity-type", dest="entity_types", action="append", required=True, choices=ENTITY_TYPES,
                        help="repeat for a client quota of a user and a client id: --entity-type users "
                             "--entity-name U --entity-type clients --entity-name C")
    parser.add_argument("--entity-name", dest="entity_names", action="append", metavar="N",
                        help="topic name, broker id, group id, user, client id or IP, for the --entity-type before it")
    parser.add_argument("--entity-default", dest="entity_names", action="append_const", const=DEFAULT,
                        help="the default user, client id or IP (client quotas), for the --entity-type before it")


def _entities(args: argparse.Namespace) -> list[tuple[str, object]]:
    """[(entity type, name, DEFAULT or None)] pairing each --entity-type with the name after it."""
    from quorum.errors import Errors, SparkraftError

    names = list(args.entity_names or [])
    types = list(args.entity_types)
    if len(names) > len(types):
        raise SparkraftError(Errors.INVALID_REQUEST, "more --entity-name/--entity-default than --entity-type")
    names += [None] * (len(types) - len(names))
    pairs = list(zip(types, names))
    if len(pairs) > 1 and not all(t in QUOTA_TYPES for t in types):
        raise SparkraftError(Errors.INVALID_REQUEST, "only client quotas take several entity types "
                                                     "(users with clients)")
    if any(n is DEFAULT for t, n in pairs if t not in QUOTA_TYPES and t != "brokers"):
        raise SparkraftError(Errors.INVALID_REQUEST, "--entity-default is for brokers (the cluster-wide default), "
                                                     "users, clients and ips")
    args.entity_type, args.entity_name = pairs[0] if pairs[0][1] is not DEFAULT else (pairs[0][0], None)
    return pairs


def resource_of(entity_type: str, name: "str | None"):
    """The ConfigResourceKey for the command line's entity; INVALID_REQUEST if it makes no sense."""
    from quorum.controller.api import ConfigResourceKey
    from quorum.errors import Errors, SparkraftError

    if entity_type == "topics":
        if not name:
            raise SparkraftError(Errors.INVALID_REQUEST, "--entity-type topics needs --entity-name TOPIC")
        return ConfigResourceKey("TOPIC", name)
    if entity_type == "groups":
        if not name:
            raise SparkraftError(Errors.INVALID_REQUEST, "--entity-type groups needs --entity-name GROUP")
        return ConfigResourceKey("GROUP", name)
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
    if entity_type == "groups":
        return f"group {name}"
    if entity_type == "brokers":
        return f"broker {name}" if name else "the default broker"
    return "the cluster"


def run_alter(args: argparse.Namespace) -> None:
    pairs = _entities(args)
    if all(t in QUOTA_TYPES for t, _ in pairs):
        return _alter_quotas_and_users(args, pairs)
    resource = resource_of(args.entity_type, args.entity_name)
    ops = alterations(args.add_config, args.delete_config)
    with client(args) as c:
        c.alter_configs(resource, ops)
    print(f"Completed updating config for {_describe_name(args.entity_type, args.entity_name)}.")


def run_describe(args: argparse.Namespace) -> None:
    pairs = _entities(args)
    if all(t in QUOTA_TYPES for t, _ in pairs):
        return _describe_quotas_and_users(args, pairs)
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


# -- client quotas (users, clients, ips), and users' SCRAM credentials beside them ------------------
def _is_scram_key(key: str) -> bool:
    from quorum.security.scram import MECHANISMS

    return key.strip().upper() in MECHANISMS


def _entity_text(entity) -> str:
    """kafka-configs' words for a quota entity: user-principal 'alice', client-id 'app'."""
    return ", ".join(f"the default {QUOTA_NAMES[t]}" if n is None else f"{QUOTA_NAMES[t]} '{n}'" for t, n in entity)


def _alter_quotas_and_users(args: argparse.Namespace, pairs) -> None:
    from quorum.controller.api import AlterClientQuotasRequest, ClientQuotaAlteration
    from quorum.errors import Errors, SparkraftError

    adds = split_configs(args.add_config or "")
    deletes = split_configs(args.delete_config or "")
    scram = [a for a in adds if _is_scram_key(a.partition("=")[0])] + [d for d in deletes if _is_scram_key(d)]
    if scram:
        if len(pairs) != 1 or pairs[0][0] != "users" or pairs[0][1] in (None, DEFAULT):
            raise SparkraftError(Errors.INVALID_REQUEST, "SCRAM credentials are set for one named user "
                                                         "(--entity-type users --entity-name USER)")
        args.add_config = ",".join(a for a in adds if _is_scram_key(a.partition("=")[0])) or None
        args.delete_config = ",".join(d for d in deletes if _is_scram_key(d)) or None
        _alter_user(args)
    ops = []
    for item in adds:
        key, sep, value = item.partition("=")
        if _is_scram_key(key):
            continue
        if not sep or not key.strip():
            raise SparkraftError(Errors.INVALID_CONFIG, f"invalid config {item!r}: expected KEY=VALUE")
        try:
            ops.append((key.strip(), float(value)))
        except ValueError:
            raise SparkraftError(Errors.INVALID_CONFIG, f"Invalid value {value.strip()!r} for quota {key.strip()}: "
                                                        f"not a number") from None
    ops += [(key, None) for key in deletes if not _is_scram_key(key)]
    if not ops:
        if not scram:
            raise SparkraftError(Errors.INVALID_REQUEST, "nothing to alter: give --add-config and/or --delete-config")
        return None
    if any(n is None for _, n in pairs):
        raise SparkraftError(Errors.INVALID_REQUEST, "a client quota needs --entity-name or --entity-default "
                                                     "after each --entity-type")
    entity = tuple(sorted((QUOTA_TYPES[t], None if n is DEFAULT else n) for t, n in pairs))
    with client(args) as c:
        (result,) = c.call(AlterClientQuotasRequest((ClientQuotaAlteration(entity, tuple(ops)),)))
    if result.error is not Errors.NONE:
        raise SparkraftError(result.error, result.message)
    print(f"Completed updating config for {_entity_text(entity)}.")


def _describe_quotas_and_users(args: argparse.Namespace, pairs) -> None:
    from quorum.controller.api import DescribeClientQuotasRequest, DescribeUserScramCredentialsRequest
    from quorum.errors import Errors, SparkraftError

    components = tuple((QUOTA_TYPES[t], "DEFAULT" if n is DEFAULT else "ANY" if n is None else "EXACT",
                        None if n in (None, DEFAULT) else n) for t, n in pairs)
    users_only = len(pairs) == 1 and pairs[0][0] == "users" and pairs[0][1] is not DEFAULT
    with client(args) as c:
        entries = c.call(DescribeClientQuotasRequest(components, strict=True))
        scram = ()
        if users_only:
            scram = c.call(DescribeUserScramCredentialsRequest((pairs[0][1],) if pairs[0][1] else ()))
    missing = next((r for r in scram if r.error is not Errors.NONE), None)
    if missing is not None and pairs[0][1] and not entries:  # a named user with nothing at all
        raise SparkraftError(missing.error, missing.message)
    scram = [r for r in scram if r.error is Errors.NONE and r.credentials]
    if args.json:  # SCRAM rows as before: {"user", "name", "value", "source"}; quota rows name their entity
        rows = [{"user": r.user, "name": m, "value": f"iterations={i}", "source": "DYNAMIC_USER_CONFIG"}
                for r in scram for m, i in r.credentials]
        rows += [{"entity": {t: n for t, n in e.entity}, "name": k, "value": v, "source": "DYNAMIC_QUOTA_CONFIG"}
                 for e in entries for k, v in e.values]
        print(json.dumps(rows))
        return
    for e in entries:
        values = ", ".join(f"{k}={v}" for k, v in e.values)
        print(f"Quota configs for {_entity_text(e.entity)} are {values}")
    for r in scram:
        configs = ", ".join(f"{m}=iterations={i}" for m, i in r.credentials)
        print(f"SCRAM credential configs for user-principal '{r.user}' are {configs}")
