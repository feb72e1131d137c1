"""Controller registrations (KIP-919, metadata.version 3.7-IV0): each controller tells the active
controller where Kafka's clients reach it and which feature levels it supports, and the active
controller writes that as a RegisterControllerRecord. DescribeCluster on any controller then names
every controller (quorum/kafka/controller_apis.py), and a feature upgrade is checked against every
registered controller's range as against every broker's (features_control.py). From 4.4-IV2 a
controller taken out of the quorum can be unregistered (``kafka-cluster unregister-controller``).

A registration that says what the image already says writes nothing: a controller re-registers
after each restart (a new incarnation) and whenever its listeners change, never in a loop."""
from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.controller import api, registration_bounds
from quorum.controller.brokers_control import protocol_code
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.cluster import ControllerRegistration
from quorum.metadata.versions import CONTROLLER_REGISTRATION, CONTROLLER_UNREGISTRATION
from quorum.uuids import validate_uuid

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext

_Endpoint = pb.RegisterBrokerRecord.BrokerEndpoint
_Feature = pb.RegisterBrokerRecord.BrokerFeature


def register(ctx: "ControllerContext", req: api.RegisterControllerRequest, now_ms: int):
    """([the RegisterControllerRecord], None), or no record when nothing changed."""
    level = ctx.spec.features.metadata_version or 0
    if level < CONTROLLER_REGISTRATION:
        raise SparkraftError(Errors.UNSUPPORTED_VERSION,
                             "The current MetadataVersion is too old to support controller registrations.")
    why = registration_bounds.controller_refusal(req)
    if why is not None:
        raise SparkraftError(Errors.INVALID_REQUEST, why)
    try:
        validate_uuid(req.incarnation_id, "incarnation id")
    except ValueError as e:
        raise SparkraftError(Errors.INVALID_REQUEST, str(e)) from None
    record = registration_record(req)
    current = ctx.spec.cluster.controllers.get(req.controller_id)
    if current is not None and current == ControllerRegistration.from_record(record):
        return [], None
    return [record], None


def registration_record(req: api.RegisterControllerRequest) -> pb.RegisterControllerRecord:
    """The record a registration writes (what the registering controller then waits to see)."""
    return pb.RegisterControllerRecord(
        controller_id=req.controller_id, incarnation_id=req.incarnation_id,
        endpoints=[_Endpoint(name=e.name, host=e.host, port=e.port,
                             security_protocol=protocol_code(e.security_protocol)) for e in req.endpoints],
        features=[_Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                  for name, lo, hi in sorted(req.features)])


def unregister(ctx: "ControllerContext", req: api.UnregisterControllerRequest, now_ms: int):
    """([the UnregisterControllerRecord], None): Kafka's rules and messages (4.4-IV2)."""
    if (ctx.spec.features.metadata_version or 0) < CONTROLLER_UNREGISTRATION:
        raise SparkraftError(Errors.UNSUPPORTED_VERSION,
                             "The current MetadataVersion is too old to support controller unregistration.")
    if req.controller_id == ctx.node_id:
        raise SparkraftError(Errors.INVALID_REQUEST, "Controller cannot unregister itself while it is active.")
    if req.controller_id not in ctx.spec.cluster.controllers:
        raise SparkraftError(Errors.CONTROLLER_ID_NOT_REGISTERED,
                             f"Controller ID {req.controller_id} is not currently registered.")
    return [pb.UnregisterControllerRecord(controller_id=req.controller_id)], None
