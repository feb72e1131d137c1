"""Requests in, responses out: Kafka's headers and bodies through ``kio``'s generated types.

kio has one frozen dataclass per message and version (generated from Kafka's JSON schemas,
flexible versions and tagged fields included). The handlers here are written once for every
version: they read a request with ``getattr(body, field, default)`` and answer with plain dicts,
which :func:`materialize` turns into the response class of the version asked for, dropping what
that version lacks and filling what the handler left out with the field's default (or the zero of
its Kafka type).

Header versions follow Kafka: request header v2 and response header v1 for flexible versions, v1 and
v0 otherwise; ApiVersions always answers with response header v0 (a client that sent a version the
broker does not know must still read the answer).
"""
from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import io
import struct
import types
import typing
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import get_field_tag
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_compact_array_length, write_empty_tagged_fields, write_legacy_array_length

from quorum.controller import registry
from quorum.kafka import schemas
from quorum.kafka.framing import frame

API_VERSIONS_KEY = 18
# The requests a broker (or a client acting as one) sends that are small by nature: a frame of one
# of them past its size here is refused before any of it is decoded into objects (one BrokerRegistration
# of 2,500,000 listeners, 45 MB, used to be decoded whole). Every other request is bounded by the
# listener's frame size (socket.request.max.bytes) alone. The controller's requests say so in their
# registry rows (KafkaApi.max_bytes: ApiVersions and BrokerHeartbeat 64 KiB, BrokerRegistration 256 KiB,
# for at most 64 listeners and features and 256 log directories); Kafka's own others are here.
SMALL_REQUEST_BYTES = {
    1: 1 << 20,  # Fetch: one partition of __cluster_metadata, perhaps forgotten topics
    59: 64 << 10,  # FetchSnapshot
    70: 256 << 10,  # ControllerRegistration
    **{row.kafka.key: row.kafka.max_bytes for row in registry.ROWS
       if row.kafka is not None and row.kafka.max_bytes is not None},
}
_KEY_VERSION = struct.Struct(">hh")
_CORRELATION = struct.Struct(">i")


class UnsupportedRequest(Exception):
    """An API key or version this broker does not implement."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"API key {api_key} version {api_version} is not supported")
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id


class MalformedRequest(Exception):
    """Bytes that do not decode as the request they claim to be."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: Optional[str]
    body: Any  # the kio request dataclass


def decode_request(payload: bytes, supported: dict[int, tuple[int, int]]) -> Request:
    """A frame's payload as a Request; UnsupportedRequest for an API or version outside
    ``supported`` (api key -> (min, max)), MalformedRequest for bytes that do not parse."""
    if len(payload) < _KEY_VERSION.size + _CORRELATION.size:
        raise MalformedRequest(f"a request of {len(payload)} bytes is shorter than its header")
    api_key, api_version = _KEY_VERSION.unpack_from(payload)
    (correlation_id,) = _CORRELATION.unpack_from(payload, _KEY_VERSION.size)
    low, high = supported.get(api_key, (0, -1))
    if not low <= api_version <= high:
        raise UnsupportedRequest(api_key, api_version, correlation_id)
    limit = SMALL_REQUEST_BYTES.get(api_key)
    if limit is not None and len(payload) > limit:
        raise MalformedRequest(f"API key {api_key} v{api_version} of {len(payload)} bytes: such a request is at "
                               f"most {limit} bytes")
    body_type = schemas.request_type(api_key, api_version)
    header_type = RequestHeaderV2 if body_type.__flexible__ else RequestHeaderV1
    try:
        header, used = entity_reader(header_type)(payload, 0)
        body, _ = entity_reader(body_type)(payload, used)
    except Exception as e:  # BufferUnderflow, and the native reader's other refusals (a bad enum value...)
        raise MalformedRequest(f"{body_type.__name__} v{api_version}: {type(e).__name__}: {e}") from None
    return Request(api_key, api_version, correlation_id, header.client_id, body)


def response_type(api_key: int, api_version: int) -> type:
    return schemas.response_type(api_key, api_version)


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response body already encoded, written after the header as is (see metadata_answer.py)."""

    body: bytes
    flexible: bool


def encode_response(api_key: int, correlation_id: int, body: Any) -> bytes:
    """The framed response: header, then ``body`` (a kio response dataclass, or Encoded)."""
    encoded = isinstance(body, Encoded)
    flexible = (body.flexible if encoded else body.__flexible__) and api_key != API_VERSIONS_KEY
    buffer = io.BytesIO()
    if flexible:
        entity_writer(ResponseHeaderV1)(buffer, ResponseHeaderV1(correlation_id=correlation_id))
    else:
        entity_writer(ResponseHeaderV0)(buffer, ResponseHeaderV0(correlation_id=correlation_id))
    buffer.write(body.body if encoded else encode_entity(body))
    return frame(buffer.getvalue())


def encode_entity(value: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(value))(buffer, value)
    return buffer.getvalue()


# --- dicts into kio dataclasses ---------------------------------------------------------------

_ZERO = {"string": "", "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "bool": False,
         "float64": 0.0, "bytes": b"", "records": None, "uuid": None, "error_code": ErrorCode.none,
         "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0),
         "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.timezone.utc)}


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A topic id as sparkraft prints it (Kafka's base64url form) as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def topic_id_text(value: Optional[uuid.UUID]) -> str:
    """The other way; "" for the zero UUID or none."""
    if value is None or value.int == 0:
        return ""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _convert(kafka_type: str) -> Callable[[Any], Any]:
    if kafka_type == "error_code":
        return lambda v: v if isinstance(v, ErrorCode) else ErrorCode(int(v))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return lambda v: v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=v)
    if kafka_type == "uuid":
        return lambda v: topic_uuid(v) if isinstance(v, str) else v
    return lambda v: v


def _entity_of(annotation) -> tuple[Optional[type], bool]:
    """(the nested entity class in ``annotation``, whether it is a sequence of them)."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        inner = typing.get_args(annotation)[0]
        return (inner, True) if dataclasses.is_dataclass(inner) else (None, True)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            entity, many = _entity_of(arg)
            if entity is not None:
                return entity, many
        return None, False
    return (annotation, False) if dataclasses.is_dataclass(annotation) else (None, False)


@functools.cache
def _plan(cls: type) -> tuple:
    plan = []
    for f in dataclasses.fields(cls):
        entity, many = _entity_of(f.type)
        kafka_type = f.metadata.get("kafka_type", "")
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        elif many:
            default = ()
        else:
            default = _ZERO.get(kafka_type)
        plan.append((f.name, entity, many, _convert(kafka_type), default))
    return tuple(plan)


def materialize(cls: type, value: dict) -> Any:
    """``value`` (a dict, nested dicts and lists for nested entities) as an instance of kio's
    ``cls``: keys the version lacks are dropped, fields left out take their default."""
    kwargs = {}
    for name, entity, many, convert, default in _plan(cls):
        if name not in value:
            kwargs[name] = default
            continue
        v = value[name]
        if v is None:
            kwargs[name] = None
        elif entity is not None:
            kwargs[name] = tuple(materialize(entity, x) for x in v) if many else materialize(entity, v)
        elif many:
            kwargs[name] = tuple(convert(x) for x in v)
        else:
            kwargs[name] = convert(v)
    return cls(**kwargs)


def nested_type(cls: type, field_name: str) -> type:
    """The entity class of ``cls``'s field ``field_name`` (a nested entity or a sequence of them)."""
    for name, entity, _many, _convert_, _default in _plan(cls):
        if name == field_name:
            return entity
    raise KeyError(f"{cls.__name__} has no field {field_name}")


# --- an entity written around one array whose items are encoded elsewhere (metadata_answer.py) ---

@functools.cache
def _field_writers(cls: type, spliced: str) -> tuple:
    """(name, kio's writer) of each field of ``cls`` in order, None for the field ``spliced``."""
    out = []
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            raise ValueError(f"{cls.__name__} has tagged fields: not written here")
        out.append((f.name, None if f.name == spliced else
                    get_field_writer(f, flexible=cls.__flexible__, is_request_header=False, is_tag=False)))
    return tuple(out)


def around(entity: Any, spliced: str) -> tuple[bytes, bytes]:
    """The bytes kio writes for ``entity`` before its array field ``spliced`` and after it (the
    array's own length and items left out: see ``array_length``)."""
    cls = type(entity)
    before, after = io.BytesIO(), io.BytesIO()
    buffer = before
    for name, writer in _field_writers(cls, spliced):
        if writer is None:
            buffer = after
        else:
            writer(buffer, getattr(entity, name))
    if cls.__flexible__:
        write_empty_tagged_fields(after)
    return before.getvalue(), after.getvalue()


def array_length(flexible: bool, count: int) -> bytes:
    """An array's length as a version writes it (compact in the flexible versions)."""
    buffer = io.BytesIO()
    (write_compact_array_length if flexible else write_legacy_array_length)(buffer, count)
    return buffer.getvalue()
