"""AlterClientQuotas (Kafka's ClientQuotaControlManager): validated ClientQuotaRecords.

Entities are user, client-id, user + client-id, or ip (alone); a name of None is the default entity
of its type. Keys are Kafka's quota keys; the byte rates are whole numbers.
"""
from __future__ import annotations

import ipaddress
import math

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.image import MetadataImage
from quorum.metadata.quotas import quota_entity

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# key -> (whole number?, entity kinds it applies to)
KEYS = {
    "producer_byte_rate": (True, "client"),
    "consumer_byte_rate": (True, "client"),
    "request_percentage": (False, "client"),
    "controller_mutation_rate": (False, "client"),
    "connection_creation_rate": (True, "ip"),
}


def _invalid(message: str) -> SparkraftError:
    return SparkraftError(Errors.INVALID_REQUEST, message)


def _validate(alteration: api.ClientQuotaAlteration) -> None:
    if not alteration.entity:
        raise _invalid("Invalid empty client quota entity")
    types = [t for t, _ in alteration.entity]
    if len(set(types)) != len(types):
        raise _invalid("Invalid quota entity: an entity type appears more than once")
    kinds = set(types)
    if kinds - {USER, CLIENT_ID, IP}:
        raise _invalid(f"Unhandled client quota entity type: {sorted(kinds - {USER, CLIENT_ID, IP})[0]}")
    if IP in kinds and len(kinds) > 1:
        raise _invalid("Invalid quota entity combination, IP entity should not be combined with "
                       "User or ClientId")
    for t, name in alteration.entity:
        if t == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise _invalid(f"{name} is not a valid IP or resolvable host.") from None
    kind = "ip" if IP in kinds else "client"
    for key, value in alteration.ops:
        spec = KEYS.get(key)
        if spec is None or spec[1] != kind:
            raise _invalid(f"Unknown quota key: {key}" if spec is None else
                           f"Quota key {key} does not apply to this entity")
        if value is None:
            continue
        if not math.isfinite(value) or value < 0:
            raise _invalid(f"Illegal value {value} for quota key {key}: must be a finite, non-negative number")
        if spec[0] and not float(value).is_integer():
            raise _invalid(f"Invalid value {value} for configuration {key}: Not a number of type LONG")


def describe(image: MetadataImage, req: api.DescribeClientQuotasRequest) -> tuple[api.ClientQuotaEntry, ...]:
    """The entities matching Kafka's ClientQuotaFilter, with their quotas, in a stable order."""
    for t, kind, name in req.components:
        if t not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {t}")
        if kind not in ("EXACT", "DEFAULT", "ANY") or (kind == "EXACT") != (name is not None):
            raise _invalid(f"Invalid match type {kind} for entity type {t}: EXACT takes a name, DEFAULT and ANY none")
    if len({t for t, _, _ in req.components}) != len(req.components):
        raise _invalid("Invalid quota filter: an entity type appears more than once")
    wanted = {t: (kind, name) for t, kind, name in req.components}
    out = []
    for entity in sorted(image.client_quotas.entities, key=lambda e: [(t, n or "") for t, n in e]):
        parts = dict(entity)
        if req.strict and set(parts) != set(wanted):
            continue
        if not all(t in parts and (kind == "ANY" or (kind == "DEFAULT" and parts[t] is None)
                                   or (kind == "EXACT" and parts[t] == name))
                   for t, (kind, name) in wanted.items()):
            continue
        quotas = image.client_quotas.quotas(entity)
        out.append(api.ClientQuotaEntry(entity, tuple(sorted(quotas.items()))))
    return tuple(out)


def alter(image: MetadataImage, req: api.AlterClientQuotasRequest
          ) -> tuple[list[pb.ClientQuotaRecord], tuple[api.ItemResult, ...]]:
    records, results = [], []
    for alteration in req.alterations:
        try:
            _validate(alteration)
        except SparkraftError as e:
            results.append(api.ItemResult(e.error, e.message))
            continue
        entity = quota_entity(dict(alteration.entity))
        current = image.client_quotas.quotas(entity)
        data = [pb.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity]
        if not req.validate_only:
            for key, value in alteration.ops:
                if value is None:
                    if key in current:
                        records.append(pb.ClientQuotaRecord(entity=data, key=key, remove=True))
                elif current.get(key) != float(value):
                    records.append(pb.ClientQuotaRecord(entity=data, key=key, value=float(value)))
        results.append(api.ItemResult())
    return records, tuple(results)
