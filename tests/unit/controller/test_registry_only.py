"""The request registry is the only place a request is described (quorum/controller/registry.py):
no other module of the product keys a table by request type or by the Kafka API key of a registry
request, nor tests a request's type to treat it specially. What each reader needs is a field of the
row (its method, wire number, Kafka API, read, ``around``, ``secret``, ``needs``). A table of that
kind added anywhere else fails here, with where it is."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from quorum.controller import api, registry

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ("quorum", "sparkraft", "console", "streaming", "jobs", "delta_tables")
# the registry itself (and generated code, any gen/ folder: Kafka's record types are numbered as API keys are)
EXEMPT = {"quorum/controller/registry.py"}
REQUEST_TYPES = {name for name, v in vars(api).items() if name.endswith("Request") and dataclasses.is_dataclass(v)}
KAFKA_KEYS = {row.kafka.key for row in registry.ROWS if row.kafka is not None}


def _product_modules():
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/gen/" in rel or rel in EXEMPT:
                continue
            yield rel, ast.parse(path.read_text(), rel)


def _request_type(node) -> str | None:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name if name in REQUEST_TYPES else None


def _findings(rel: str, tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            by_type = [k for k in keys if _request_type(k)]
            by_kafka = [k for k in keys if isinstance(k, ast.Constant) and type(k.value) is int
                        and k.value in KAFKA_KEYS]
            if len(by_type) >= 2:
                found.append(f"{rel}:{node.lineno}: a table keyed by request type")
            if len(by_kafka) >= 2:
                found.append(f"{rel}:{node.lineno}: a table keyed by the Kafka API keys of registry requests "
                             f"{sorted(k.value for k in by_kafka)}")
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            elts = node.elts
            if sum(1 for e in elts if _request_type(e)) >= 2:
                found.append(f"{rel}:{node.lineno}: a collection of request types")
            ints = [e.value for e in elts if isinstance(e, ast.Constant) and type(e.value) is int
                    and e.value in KAFKA_KEYS]
            if len(ints) >= 3 and len(ints) == len(elts):
                found.append(f"{rel}:{node.lineno}: a collection of registry requests' Kafka API keys {ints}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            named = [_request_type(k) for k in kinds if _request_type(k)]
            if named and not rel.startswith("quorum/controller/"):
                found.append(f"{rel}:{node.lineno}: a request treated specially by its type ({', '.join(named)})")
    return found


def test_no_request_table_outside_the_registry():
    findings = [f for rel, tree in _product_modules() for f in _findings(rel, tree)]
    assert not findings, "describe these in the request's registry row instead:\n" + "\n".join(findings)


def test_the_check_finds_what_it_looks_for():
    """The check itself, on the kinds of table it exists to refuse (so it cannot pass by finding nothing)."""
    samples = {
        "READS = {ListTopicsRequest: a, DescribeTopicsRequest: b}": "keyed by request type",
        "FORWARDED = frozenset({19, 20, 37, 44})": "Kafka API keys",
        "SHARED = {19: (2, 7, f), 20: (1, 6, g)}": "keyed by the Kafka API keys",
        "READ_REQUESTS = (api.ListTopicsRequest, api.DescribeTopicsRequest)": "collection of request types",
        "if isinstance(request, UpdateFeaturesRequest): pass": "treated specially",
    }
    for source, expected in samples.items():
        found = _findings("quorum/node/x.py", ast.parse(source))
        assert len(found) == 1 and expected in found[0], (source, found)
    assert not _findings("quorum/kafka/x.py", ast.parse("KAFKA_ONLY = {17: a, 36: b, 55: c}"))
