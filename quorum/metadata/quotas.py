"""Client quotas: CLIENT_QUOTA_RECORD sets or removes one key of one client entity."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.mapdelta import NestedMapDelta
from quorum.metadata.pmap import EMPTY, PMap

# An entity: its (entity type, name) parts sorted by type; name None = the type's default entity.
QuotaEntity = tuple[tuple[str, Optional[str]], ...]


def quota_entity(parts: Mapping[str, Optional[str]]) -> QuotaEntity:
    """The canonical key of an entity given as {entity type: name or None}."""
    return tuple(sorted(parts.items()))


@dataclass(frozen=True, slots=True)
class ClientQuotasImage:
    entities: PMap[QuotaEntity, PMap[str, float]] = EMPTY  # only entities with a key set

    def quotas(self, entity: QuotaEntity) -> Mapping[str, float]:
        return self.entities.get(entity, EMPTY)

    def records(self) -> Iterator[pb.ClientQuotaRecord]:
        for entity in sorted(self.entities, key=_sort_key):
            quotas = self.entities[entity]
            for key in sorted(quotas):
                yield pb.ClientQuotaRecord(entity=[_entity_data(t, n) for t, n in entity],
                                           key=key, value=quotas[key])


class ClientQuotasDelta:
    def __init__(self, image: ClientQuotasImage) -> None:
        self.image = image
        self.entities: NestedMapDelta[QuotaEntity, str, float] = NestedMapDelta(image.entities)

    def replay_client_quota(self, record: pb.ClientQuotaRecord) -> None:
        entity = quota_entity({e.entity_type: e.entity_name if e.HasField("entity_name") else None
                               for e in record.entity})
        if record.remove:
            self.entities.of(entity).remove(record.key)
        else:
            self.entities.of(entity).set(record.key, record.value)

    def apply(self) -> ClientQuotasImage:
        entities = self.entities.apply()
        return self.image if entities is self.image.entities else ClientQuotasImage(entities)


def _entity_data(entity_type: str, name: Optional[str]) -> pb.ClientQuotaRecord.EntityData:
    return pb.ClientQuotaRecord.EntityData(entity_type=entity_type, entity_name=name)


def _sort_key(entity: QuotaEntity) -> tuple:
    return tuple((t, n is not None, n or "") for t, n in entity)  # None does not compare with str
