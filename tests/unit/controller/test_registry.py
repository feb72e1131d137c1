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
from quorum.node import controller_reads
from quorum.rpc import controller_convert, controller_service, request_actions


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
    """A write has a handler (core.py dispatches to it); a read with a method is answered from the
    image by controller_reads; a request no transport carries is a write of the node's own."""
    for row in registry.ROWS:
        if row.writes:
            assert row.request not in controller_reads.READS, row
        else:
            assert row.request in controller_reads.READS, f"{row.request.__name__}: no handler and no read"
        if row.method is None:
            assert row.writes, row


def test_every_method_has_converters_messages_and_a_servicer():
    for row in registry.ROWS:
        if row.method is None:
            continue
        name, to, frm = controller_convert._BY_TYPE[row.request]
        assert name == row.method
        assert hasattr(pb, f"{row.method}Request") and hasattr(pb, f"{row.method}Response"), row.method
        assert callable(getattr(controller_service.ControllerService, row.method, None)), row.method
    assert set(controller_convert.METHODS) == set(registry.BY_METHOD)


def test_every_method_has_a_wire_number_and_the_wire_carries_what_the_rows_say():
    """Every Controller method has its own fixed wire number (none of Raft's), so any row may be put
    on the wire; the wire handlers and clients take exactly the rows marked ``wire``."""
    from quorum.rpc import controller_wire
    from quorum.wire import methods

    assert set(methods.CONTROLLER_NUMBERS) == set(registry.BY_METHOD)
    numbers = list(methods.CONTROLLER_NUMBERS.values())
    assert len(set(numbers)) == len(numbers) and min(numbers) >= 32 and max(numbers) <= 255
    for name, number in methods.CONTROLLER_NUMBERS.items():
        method = methods.METHODS[number]
        assert (method.name, method.request, method.response) == \
            (name, getattr(pb, f"{name}Request"), getattr(pb, f"{name}Response"))
    assert set(controller_wire.WIRE_METHODS) == {row.method for row in registry.ROWS if row.method and row.wire}


def test_kafka_names_and_keys_are_kafkas():
    """Each row's Kafka API name and key are the same request in Kafka's own message schemas (kio)."""
    keys = [row.kafka[1] for row in registry.ROWS if row.kafka is not None]
    assert len(keys) == len(set(keys))
    for row in registry.ROWS:
        if row.kafka is None:
            continue
        name, key = row.kafka
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
        assert api_key_map[key] == snake, (row.request.__name__, name, key, api_key_map.get(key))
