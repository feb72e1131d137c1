"""ACL bindings by id: ACCESS_CONTROL_ENTRY and REMOVE_ACCESS_CONTROL_ENTRY records."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.errors import ReplayError
from quorum.metadata.mapdelta import MapDelta
from quorum.metadata.pmap import EMPTY, PMap


@dataclass(frozen=True, slots=True)
class AclEntry:
    """One ACL binding; the enum fields hold Kafka's codes (pb.AclOperation.READ, ...)."""

    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def from_record(cls, r: pb.AccessControlEntryRecord) -> AclEntry:
        return cls(r.id, r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                   r.operation, r.permission_type)

    def to_record(self) -> pb.AccessControlEntryRecord:
        return pb.AccessControlEntryRecord(**asdict(self))


@dataclass(frozen=True, slots=True)
class AclsImage:
    acls: PMap[str, AclEntry] = EMPTY

    def acl(self, acl_id: str) -> Optional[AclEntry]:
        return self.acls.get(acl_id)

    def records(self) -> Iterator[pb.AccessControlEntryRecord]:
        for acl_id in sorted(self.acls):
            yield self.acls[acl_id].to_record()


class AclsDelta:
    def __init__(self, image: AclsImage) -> None:
        self.image = image
        self.acls: MapDelta[str, AclEntry] = MapDelta(image.acls)

    def replay_access_control_entry(self, record: pb.AccessControlEntryRecord) -> None:
        self.acls.set(record.id, AclEntry.from_record(record))

    def replay_remove_access_control_entry(self, record: pb.RemoveAccessControlEntryRecord) -> None:
        if record.id not in self.acls:
            raise ReplayError(f"cannot remove ACL {record.id}: no such ACL")
        self.acls.remove(record.id)

    def apply(self) -> AclsImage:
        acls = self.acls.apply()
        return self.image if acls is self.image.acls else AclsImage(acls)
