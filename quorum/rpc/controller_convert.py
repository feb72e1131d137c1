"""Conversion between the controller's dataclasses (quorum/controller/api.py) and their protobuf form:
the one way in, as :mod:`quorum.rpc.convert` is for the Raft RPCs. Each request's codec is in
controller_codecs.py, by the method name its registry row gives. Wire conventions:

- an error is an ``int32`` Kafka code on the wire and an :class:`~quorum.errors.Errors` member in
  Python; "none" ids are ``-1`` on the wire and ``None`` in Python;
- every response carries ``error``, ``error_message``, ``leader_id`` and ``leader_endpoint``
  (filled on NOT_CONTROLLER): :func:`error_response` builds such an answer for any RPC, and
  :func:`check_response` turns a failed one back into a :class:`SparkraftError` whose details hold
  ``leader_id`` and ``leader_endpoint``;
- requests: ``request_to_proto(req)`` / ``request_from_proto(pb)`` for every api request
  dataclass, read requests included;
- replies: ``reply_to_proto(method, reply)`` / ``reply_from_proto(method, pb)``, where ``method``
  is the RPC name and ``reply`` is what the controller answers for it (``Codec.reply``).
"""
from __future__ import annotations

from typing import Optional

from quorum.controller import api, registry
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.rpc.controller_codecs import CODECS, Codec
from quorum.rpc.controller_parts import NONE, as_tuple, none_if_negative, opt, tp_to
from quorum.rpc.convert import error_from_code

METHODS: tuple[str, ...] = tuple(row.method for row in registry.ROWS if row.method is not None)
_FROM_PROTO = {getattr(pb, f"{method}Request"): CODECS[method].request_from for method in METHODS}


def method_of(request) -> str:
    """The RPC name for a request dataclass."""
    method = registry.row_of(request).method
    if method is None:
        raise TypeError(f"{type(request).__name__} is not sent over RPC")
    return method


def request_to_proto(request):
    return CODECS[method_of(request)].request_to(request)


def request_from_proto(m):
    try:
        return _FROM_PROTO[type(m)](m)
    except KeyError:
        raise TypeError(f"not a controller protobuf request: {type(m).__name__}") from None


# -- replies ------------------------------------------------------------------------------------
def _codec(method: str) -> Codec:
    try:
        return CODECS[method]
    except KeyError:
        raise TypeError(f"unknown controller RPC {method!r}") from None


def _response(method: str, **fields):
    return getattr(pb, f"{method}Response")(error=int(Errors.NONE), leader_id=NONE, **fields)


def reply_to_proto(method: str, reply, results_by_topic: bool = False):
    """The successful response of RPC ``method`` for the controller's ``reply``; ``results_by_topic``:
    the client reads a run of a topic's successes as one result (see ElectLeadersRequest)."""
    to_fields = _codec(method).reply_to
    if to_fields is None and results_by_topic and isinstance(reply, api.PartitionResults):
        response = _response(method)
        add = response.results.add
        for run in reply.runs():
            if type(run) is tuple:
                topic, pids = run
                if pids:  # (a run asked for and left empty answers nothing)
                    add(partition=pb.TopicPartition(topic=topic, partition=pids[0]), more_partitions=pids[1:])
            else:
                add(partition=tp_to(run.partition), error=int(run.error), error_message=run.message)
        return response
    if to_fields is None:
        # Per-partition outcomes: an election of every partition after a rolling restart at 2M
        # answers a million. Setting three fields of a nested message for each took a quarter of the
        # active controller's time in such a balance; they are encoded as the bytes of the results
        # field instead (each topic's name once) and parsed into the response in one call.
        response = _response(method)
        response.MergeFromString(partition_results_bytes(as_tuple(reply)))
        return response
    return _response(method, **to_fields(reply))


_RESULTS_TAG = bytes([5 << 3 | 2])  # field 5 (results), length-delimited


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int32 negatives are ten-byte varints
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def partition_results_bytes(reply: tuple) -> bytes:
    """``reply`` (ElectLeadersResults) as the bytes of the ``results`` field (5) of an
    ElectLeadersResponse or AlterPartitionReassignmentsResponse."""
    topics: dict[str, bytes] = {}
    ints: dict[int, bytes] = {}
    parts = []
    for r in reply:
        tp = r.partition
        topic = topics.get(tp.topic)
        if topic is None:
            name = tp.topic.encode()
            topic = topics[tp.topic] = b"\x0a" + _varint(len(name)) + name
        pid = tp.partition
        number = ints.get(pid)
        if number is None:
            number = ints[pid] = b"\x10" + _varint(pid) if pid else b""
        partition = topic + number
        result = b"\x0a" + _varint(len(partition)) + partition
        if r.error is not Errors.NONE:
            message = r.message.encode()
            result += b"\x10" + _varint(int(r.error)) + (b"\x1a" + _varint(len(message)) + message if message else b"")
        parts.append(_RESULTS_TAG + _varint(len(result)) + result)
    return b"".join(parts)


def reply_from_proto(method: str, m):
    """The Python reply in a successful response."""
    return _codec(method).reply_from(m)


# -- errors -------------------------------------------------------------------------------------
def error_response(method: str, error: Errors, message: str, leader_id: Optional[int] = None,
                   leader_endpoint: str = ""):
    """A failed response of RPC ``method`` (whole-request error: NOT_CONTROLLER, INVALID_REQUEST...)."""
    return getattr(pb, f"{method}Response")(error=int(error), error_message=message, leader_id=opt(leader_id),
                                            leader_endpoint=leader_endpoint)


def response_error(m) -> Optional[SparkraftError]:
    """The whole-request error of a response, if any, with ``leader_id``/``leader_endpoint`` details."""
    error = error_from_code(m.error)
    if error is Errors.NONE:
        return None
    return SparkraftError(error, m.error_message, leader_id=none_if_negative(m.leader_id),
                          leader_endpoint=m.leader_endpoint)
