"""``sparkraft acls --add|--remove|--list``: Kafka's ``kafka-acls.sh`` over CreateAcls, DeleteAcls and
DescribeAcls (DESIGN §12). One ACL binding per principal, host and operation, as Kafka makes them:

    sparkraft acls --add --allow-principal User:alice --operation Read --operation Describe --topic orders ...
    sparkraft acls --add --deny-principal User:mallory --operation All --topic pay --resource-pattern-type prefixed ...
    sparkraft acls --remove --allow-principal User:alice --operation Read --topic orders ...
    sparkraft acls --list [--principal User:alice] [--topic T | --cluster] [--json] ...

``--list --json`` prints a list of ``{"principal", "host", "operation", "permission_type",
"resource_type", "resource_name", "pattern_type"}``, the columns of the ``acls`` Delta table.
"""
from __future__ import annotations

import argparse
import json

from sparkraft.commands import add_bootstrap, add_command, client

OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS")
COLUMNS = ("principal", "host", "operation", "permission_type", "resource_type", "resource_name", "pattern_type")
CLUSTER_NAME = "kafka-cluster"


def _operation(s: str) -> str:
    op = s.strip().upper().replace("-", "_")
    op = {"CLUSTERACTION": "CLUSTER_ACTION", "DESCRIBECONFIGS": "DESCRIBE_CONFIGS", "ALTERCONFIGS": "ALTER_CONFIGS",
          "IDEMPOTENTWRITE": "IDEMPOTENT_WRITE", "CREATETOKENS": "CREATE_TOKENS",
          "DESCRIBETOKENS": "DESCRIBE_TOKENS"}.get(op, op)
    if op not in OPERATIONS:
        raise argparse.ArgumentTypeError(f"unknown operation {s!r} (one of {', '.join(OPERATIONS)})")
    return op


def _principal(s: str) -> str:
    if ":" not in s or s.startswith(":") or s.endswith(":"):
        raise argparse.ArgumentTypeError(f"expected a principal TYPE:NAME such as User:alice, got {s!r}")
    return s


def register(subparsers) -> None:
    parser = add_command(subparsers, "acls", "add, remove and list ACL bindings (Kafka's kafka-acls)", run_acls)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add the ACLs the other flags describe")
    action.add_argument("--remove", action="store_true", help="remove the ACLs the other flags match")
    action.add_argument("--list", action="store_true", help="list ACLs (of a resource, of a principal)")
    parser.add_argument("--allow-principal", action="append", type=_principal, default=[], metavar="P",
                        help="a principal to ALLOW (User:alice, User:* for anyone); repeatable")
    parser.add_argument("--deny-principal", action="append", type=_principal, default=[], metavar="P",
                        help="a principal to DENY; repeatable")
    parser.add_argument("--principal", type=_principal, metavar="P", help="--list: only this principal's ACLs")
    parser.add_argument("--operation", action="append", type=_operation, default=[], metavar="OP",
                        help=f"an operation ({', '.join(o.title().replace('_', '') for o in OPERATIONS)}); "
                             f"repeatable")
    parser.add_argument("--host", "--allow-host", "--deny-host", dest="host", default=None, metavar="H",
                        help="the client address the ACL is for (default * = any)")
    resource = parser.add_mutually_exclusive_group()
    resource.add_argument("--topic", metavar="T", help="a topic (or a prefix, with --resource-pattern-type prefixed)")
    resource.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", type=str.upper, default=None, metavar="TYPE",
                        choices=("LITERAL", "PREFIXED", "ANY", "MATCH"),
                        help="literal (default for --add), prefixed; for --list/--remove also any, match")
    parser.add_argument("--json", action="store_true", help="--list: print JSON")
    add_bootstrap(parser)


def _resource(args: argparse.Namespace) -> tuple[str, str]:
    if args.topic is not None:
        return "TOPIC", args.topic
    if args.cluster:
        return "CLUSTER", CLUSTER_NAME
    return "", ""


def _bindings(args: argparse.Namespace, api) -> list:
    resource_type, name = _resource(args)
    if not resource_type:
        raise ValueError("--add and --remove need a resource: --topic T or --cluster")
    principals = [(p, "ALLOW") for p in args.allow_principal] + [(p, "DENY") for p in args.deny_principal]
    if not principals:
        raise ValueError("--add and --remove need --allow-principal or --deny-principal")
    if not args.operation:
        raise ValueError("--add and --remove need at least one --operation")
    pattern = args.resource_pattern_type or "LITERAL"
    if args.add and pattern not in ("LITERAL", "PREFIXED"):
        raise ValueError(f"--add takes --resource-pattern-type literal or prefixed, not {pattern.lower()}")
    return [api.AclBinding(resource_type, name, pattern, principal, args.host or "*", op, permission)
            for principal, permission in principals for op in args.operation]


def binding_json(b) -> dict:
    return {"principal": b.principal, "host": b.host, "operation": b.operation, "permission_type": b.permission_type,
            "resource_type": b.resource_type, "resource_name": b.resource_name, "pattern_type": b.pattern_type}


def format_bindings(bindings) -> str:
    rows = [[c.upper() for c in COLUMNS]] + [[str(binding_json(b)[c]) for c in COLUMNS] for b in bindings]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run_acls(args: argparse.Namespace) -> int:
    from quorum.controller import api
    from quorum.errors import Errors, SparkraftError

    with client(args) as c:
        if args.list:
            resource_type, name = _resource(args)
            pattern = args.resource_pattern_type or ("MATCH" if name and args.topic else "ANY")
            found = c.describe_acls(api.AclBinding(resource_type or "ANY", name, pattern, args.principal or "",
                                                   args.host or "", "ANY", "ANY"))
            print(json.dumps([binding_json(b) for b in found]) if args.json else format_bindings(found))
            return 0
        bindings = _bindings(args, api)
        if args.add:
            results = c.create_acls(bindings)
            failed = [(b, r) for b, r in zip(bindings, results) if r.error is not Errors.NONE]
            if failed:
                b, r = failed[0]
                raise SparkraftError(r.error, f"{r.message} ({len(failed)} of {len(bindings)} ACLs not added)")
            print(f"Added {len(bindings)} ACL binding{'s' if len(bindings) != 1 else ''}:")
            print(format_bindings(bindings))
            return 0
        removed = []
        for result, matched in c.delete_acls(bindings):
            if result.error is not Errors.NONE:
                raise SparkraftError(result.error, result.message)
            removed.extend(matched)
        print(f"Removed {len(removed)} ACL binding{'s' if len(removed) != 1 else ''}"
              + (":\n" + format_bindings(removed) if removed else ""))
        return 0
