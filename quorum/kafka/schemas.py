"""Kafka's message types by API key and version: kio's generated ones, and the few Kafka 4.4 has that
kio (0.6.5, the newest) does not, written here in kio's own form (a frozen dataclass per message and
version, each field's Kafka type in its metadata) from Kafka's JSON schemas, so that kio's reader
and writer and this package's codec take them like their own.

- UnregisterController (94) v0 (metadata.version 4.4-IV2): ``kafka-cluster unregister-controller``,
  ``kafka-metadata-quorum remove-controller --unregister``. Its response's error code is a plain
  int16: kio's ErrorCode enum has no CONTROLLER_ID_NOT_REGISTERED (136).
"""
# no ``from __future__ import annotations``: kio's reader and writer look at each field's real type
from dataclasses import dataclass, field
from typing import ClassVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"})


# api key -> (its name as kio would give it, {version: (request type, response type)})
_BEYOND_KIO: dict[int, tuple[str, dict[int, tuple[type, type]]]] = {
    94: ("unregister_controller", {0: (UnregisterControllerRequest, UnregisterControllerResponse)}),
}


def api_name(api_key: int) -> str:
    """The API's name as kio names its modules (``create_topics``); KeyError if neither knows it."""
    extra = _BEYOND_KIO.get(api_key)
    return extra[0] if extra is not None else api_key_map[api_key]


def versions(api_key: int) -> list[int]:
    """The versions there are types for."""
    extra = _BEYOND_KIO.get(api_key)
    return sorted(extra[1]) if extra is not None else sorted(schema_name_map[api_key_map[api_key]])


def request_type(api_key: int, version: int) -> type:
    extra = _BEYOND_KIO.get(api_key)
    return extra[1][version][0] if extra is not None else load_request_schema(api_key, version)


def response_type(api_key: int, version: int) -> type:
    extra = _BEYOND_KIO.get(api_key)
    return extra[1][version][1] if extra is not None else load_response_schema(api_key, version)
