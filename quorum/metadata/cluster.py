"""Registered brokers: REGISTER_BROKER, UNREGISTER_BROKER, BROKER_REGISTRATION_CHANGE records;
and registered controllers: REGISTER_CONTROLLER (KIP-919), UNREGISTER_CONTROLLER.

A fenced broker stays registered (it can still be given replicas during a roll); only an
UnregisterBrokerRecord removes it. A controller's newest registration replaces the one before.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.errors import ReplayError
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.mapdelta import MapDelta
from quorum.metadata.pmap import EMPTY, PMap
from quorum.metadata.versions import supported_range

_Endpoint = pb.RegisterBrokerRecord.BrokerEndpoint
_Feature = pb.RegisterBrokerRecord.BrokerFeature


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str  # listener name
    host: str
    port: int
    security_protocol: int  # Kafka's SecurityProtocol code (pb.SecurityProtocol.PLAINTEXT ...)

    @property
    def security_protocol_name(self) -> str:
        try:
            return pb.SecurityProtocol.Code.Name(self.security_protocol)
        except ValueError:  # a code from a newer writer
            return str(self.security_protocol)


@dataclass(frozen=True, slots=True)
class SupportedFeature:
    name: str
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    broker_epoch: int  # the offset of the registration record
    endpoints: tuple[Endpoint, ...] = ()
    rack: Optional[str] = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    features: tuple[SupportedFeature, ...] = ()
    log_dirs: tuple[str, ...] = ()  # its log directories' ids (KIP-858; Kafka's brokers: sparkraft's have none)
    # those taking no new replicas (KIP-1066); None until the broker says (Kafka's brokers at 4.3-IV0 on)
    cordoned_log_dirs: Optional[tuple[str, ...]] = None

    @property
    def takes_new_replicas(self) -> bool:
        """False when every one of its log directories is cordoned (KIP-1066)."""
        return not (self.cordoned_log_dirs and self.log_dirs and set(self.log_dirs) <= set(self.cordoned_log_dirs))

    @classmethod
    def from_record(cls, r: pb.RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            r.broker_id, r.incarnation_id, r.broker_epoch,
            tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.endpoints),
            r.rack if r.HasField("rack") else None, r.fenced, r.in_controlled_shutdown,
            tuple(SupportedFeature(f.name, *(supported_range(f.min_supported_version, f.max_supported_version)
                                             if f.name == METADATA_VERSION else
                                             (f.min_supported_version, f.max_supported_version)))
                  for f in r.features),
            tuple(r.log_dirs),
            tuple(r.cordoned_log_dirs.ids) if r.HasField("cordoned_log_dirs") else None,
        )

    def to_record(self) -> pb.RegisterBrokerRecord:
        r = pb.RegisterBrokerRecord(
            broker_id=self.broker_id, incarnation_id=self.incarnation_id,
            broker_epoch=self.broker_epoch,
            endpoints=[_Endpoint(name=e.name, host=e.host, port=e.port,
                                 security_protocol=e.security_protocol) for e in self.endpoints],
            features=[_Feature(name=f.name, min_supported_version=f.min_version,
                               max_supported_version=f.max_version) for f in self.features],
            rack=self.rack, fenced=self.fenced, in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=self.log_dirs,
        )
        if self.cordoned_log_dirs is not None:
            r.cordoned_log_dirs.ids.extend(self.cordoned_log_dirs)
            r.cordoned_log_dirs.SetInParent()
        return r


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """Where Kafka's clients reach a controller, and what it supports (KIP-919)."""

    controller_id: int
    incarnation_id: str
    endpoints: tuple[Endpoint, ...] = ()
    features: tuple[SupportedFeature, ...] = ()
    zk_migration_ready: bool = False

    @classmethod
    def from_record(cls, r: pb.RegisterControllerRecord) -> ControllerRegistration:
        return cls(r.controller_id, r.incarnation_id,
                   tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.endpoints),
                   tuple(SupportedFeature(f.name, f.min_supported_version, f.max_supported_version)
                         for f in r.features), r.zk_migration_ready)

    def to_record(self) -> pb.RegisterControllerRecord:
        return pb.RegisterControllerRecord(
            controller_id=self.controller_id, incarnation_id=self.incarnation_id,
            zk_migration_ready=self.zk_migration_ready,
            endpoints=[_Endpoint(name=e.name, host=e.host, port=e.port,
                                 security_protocol=e.security_protocol) for e in self.endpoints],
            features=[_Feature(name=f.name, min_supported_version=f.min_version,
                               max_supported_version=f.max_version) for f in self.features])

    def feature(self, name: str) -> Optional[SupportedFeature]:
        return next((f for f in self.features if f.name == name), None)


@dataclass(frozen=True, slots=True)
class ClusterImage:
    brokers: PMap[int, BrokerRegistration] = EMPTY
    controllers: PMap[int, ControllerRegistration] = EMPTY

    def broker(self, broker_id: int) -> Optional[BrokerRegistration]:
        return self.brokers.get(broker_id)

    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def fenced_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if b.fenced)

    def unfenced_broker_ids(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def records(self) -> Iterator[pb.RegisterBrokerRecord | pb.RegisterControllerRecord]:
        for broker_id in self.broker_ids():
            yield self.brokers[broker_id].to_record()
        for controller_id in sorted(self.controllers):
            yield self.controllers[controller_id].to_record()


class ClusterDelta:
    def __init__(self, image: ClusterImage) -> None:
        self.image = image
        self.brokers: MapDelta[int, BrokerRegistration] = MapDelta(image.brokers)
        self.controllers: MapDelta[int, ControllerRegistration] = MapDelta(image.controllers)

    def replay_register_broker(self, record: pb.RegisterBrokerRecord) -> None:
        self.brokers.set(record.broker_id, BrokerRegistration.from_record(record))

    def replay_register_controller(self, record: pb.RegisterControllerRecord) -> None:
        self.controllers.set(record.controller_id, ControllerRegistration.from_record(record))

    def replay_unregister_controller(self, record: pb.UnregisterControllerRecord) -> None:
        if record.controller_id in self.controllers:  # an unknown one: nothing to remove
            self.controllers.remove(record.controller_id)

    def replay_unregister_broker(self, record: pb.UnregisterBrokerRecord) -> None:
        if record.broker_id in self.brokers:  # as Kafka: unregistering an unknown broker is a no-op
            self.brokers.remove(record.broker_id)

    def replay_broker_registration_change(self, record: pb.BrokerRegistrationChangeRecord) -> None:
        current = self.brokers.get(record.broker_id)
        if current is None:
            raise ReplayError(f"cannot change broker {record.broker_id}: it is not registered")
        if current.broker_epoch != record.broker_epoch:
            raise ReplayError(f"cannot change broker {record.broker_id}: record epoch "
                              f"{record.broker_epoch} != registered epoch {current.broker_epoch}")
        changed = replace(
            current,
            fenced=record.fenced if record.HasField("fenced") else current.fenced,
            in_controlled_shutdown=(record.in_controlled_shutdown
                                    if record.HasField("in_controlled_shutdown")
                                    else current.in_controlled_shutdown),
            log_dirs=tuple(record.log_dirs.ids) if record.HasField("log_dirs") else current.log_dirs,
            cordoned_log_dirs=(tuple(record.cordoned_log_dirs.ids) if record.HasField("cordoned_log_dirs")
                               else current.cordoned_log_dirs),
        )
        if changed != current:
            self.brokers.set(record.broker_id, changed)

    def apply(self) -> ClusterImage:
        brokers, controllers = self.brokers.apply(), self.controllers.apply()
        if brokers is self.image.brokers and controllers is self.image.controllers:
            return self.image
        return ClusterImage(brokers, controllers)
