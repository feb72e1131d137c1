"""The request registry (quorum/controller/registry.py) is complete: every controller request type
has a row, every row says what it needs and how it is served, and every reader of the rows (the
controller's dispatch, the authorizer, the gRPC and wire conversions, the reads) has what the row
asks of it. A request added without its row, or a row without its converters, fails here."""
from __future__ import annotations

import dataclasses
import re

from kio.schema.index import api_key_map

from quorum.controller import api, registry
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.kafka import schemas
from quorum.node import controller_extras
from quorum.rpc import controller_codecs, controller_convert, controller_service, request_actions


def _example(request_type: type):
    """An instance of a request type with every field at a placeholder (method_of reads only the type)."""
    return request_type(*[None for f in dataclasses.fields(request_type) if f.default is dataclasses.MISSING
                          and f.default_factory is dataclasses.MISSING])


def _request_types() -> set[type]:
    return {v for name, v in vars(api).items() if name.endswith("Request") and dataclasses.is_dataclass(v)}


def test_every_request_type_has_exactly_one_row():
    rows = [row.request for row in registry.ROWS]
    assert len(rows) == len(set(rows))
    assert set(rows) == _request_types()


def test_every_rule_is_complete_and_carried_out():
    assert set(request_actions._BY_NEED) == set(registry.NEED_KINDS)
    for row in registry.ROWS:
        needs = row.needs
        assert needs.kind in registry.NEED_KINDS, row
        if needs.kind == "cluster":
            assert needs.operation, row
        if needs.kind == "topics":
            assert needs.operation and needs.names is not None, row
        if needs.kind == "configs":
            assert needs.operation and needs.resources is not None, row


def test_every_row_is_served_one_way():
    """A write has a handler (core.py dispatches to it), a read its answer from the image
    (read_requests.py), never both; a request no transport carries is a write of the node's own;
    what a node adds around an answer is a function of controller_extras."""
    for row in registry.ROWS:
        assert (row.handler is None) != (row.read is None), f"{row.request.__name__}: one of handler and read"
        if row.method is None:
            assert row.writes and row.number is None, row
        if row.around is not None:
            assert callable(getattr(controller_extras, row.around, None)), row.around


def test_every_method_has_converters_messages_and_a_servicer():
    for row in registry.ROWS:
        if row.method is None:
            continue
        assert controller_convert.method_of(_example(row.request)) == row.method
        assert hasattr(pb, f"{row.method}Request") and hasattr(pb, f"{row.method}Response"), row.method
        assert callable(getattr(controller_service.ControllerService, row.method, None)), row.method
    assert set(controller_convert.METHODS) == set(registry.BY_METHOD) == set(controller_codecs.CODECS)


def test_every_method_has_a_wire_number_and_the_wire_carries_what_the_rows_say():
    """Every Controller method has its own fixed wire number (none of Raft's), so any row may be put
    on the wire; the wire handlers and clients take exactly the rows marked ``wire``."""
    from quorum.rpc import controller_wire, wire_methods
    from quorum.wire.methods import FIRST_CONTROLLER_NUMBER, RAFT_METHODS

    numbers = {row.method: row.number for row in registry.ROWS if row.method is not None}
    assert len(set(numbers.values())) == len(numbers)
    assert min(numbers.values()) >= FIRST_CONTROLLER_NUMBER and max(numbers.values()) <= 255
    assert not set(numbers.values()) & set(RAFT_METHODS)
    for name, number in numbers.items():
        method = wire_methods.METHODS[number]
        assert (method.name, method.request, method.response) == \
            (name, getattr(pb, f"{name}Request"), getattr(pb, f"{name}Response"))
    assert set(controller_wire.WIRE_METHODS) == {row.method for row in registry.ROWS if row.method and row.wire}


def test_kafka_names_and_keys_are_kafkas():
    """Each row's Kafka API name and key are the same request in Kafka's own message schemas (kio)."""
    keys = [row.kafka.key for row in registry.ROWS if row.kafka is not None]
    assert len(keys) == len(set(keys))
    for row in registry.ROWS:
        if row.kafka is None:
            continue
        name, key = row.kafka.name, row.kafka.key
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
        # kio's names; or, for what kio has no types of yet, the name the types written here carry
        assert schemas.api_name(key) == snake, (row.request.__name__, name, key, api_key_map.get(key))
