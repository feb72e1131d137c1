"""Dynamic configs per resource: CONFIG_RECORD (no value = delete the key); REMOVE_TOPIC clears
the topic's configs."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.mapdelta import NestedMapDelta
from quorum.metadata.pmap import EMPTY, PMap

TOPIC = pb.ConfigResourceType.TOPIC
BROKER = pb.ConfigResourceType.BROKER
GROUP = pb.ConfigResourceType.GROUP


class ConfigResource(NamedTuple):
    """What a config belongs to: Kafka's (ConfigResource.Type code, name). The cluster-wide
    default broker config is (BROKER, ""), as in Kafka."""

    type: int
    name: str

    @property
    def kind(self) -> str:
        """The resource as the configs table names it: TOPIC, BROKER or CLUSTER (= BROKER "")."""
        if self.type == BROKER and self.name == "":
            return "CLUSTER"
        try:
            return pb.ConfigResourceType.Code.Name(self.type)
        except ValueError:  # a code from a newer writer
            return str(self.type)


CLUSTER = ConfigResource(BROKER, "")

# Kafka's password-type configs (ConfigDef.Type.PASSWORD), also under a listener's prefix
# (listener.name.<listener>[.<mechanism>].<key>): their values are never shown, audited or
# materialised (quorum/metadata/records.py redacted, the lakehouse's configs table)
_PASSWORD_KEYS = ("ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
                  "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "sasl.jaas.config",
                  "sasl.oauthbearer.client.credentials.client.secret", "delegation.token.secret.key",
                  "delegation.token.master.key", "password.encoder.secret", "password.encoder.old.secret",
                  "sasl.login.callback.handler.class.secret")


def is_sensitive(config: str) -> bool:
    """Whether ``config`` is one of Kafka's password-type configs (its value is never kept outside the log)."""
    return config.endswith(_PASSWORD_KEYS) or config.endswith(".password")


@dataclass(frozen=True, slots=True)
class ConfigsImage:
    resources: PMap[ConfigResource, PMap[str, str]] = EMPTY  # only resources with a key set

    def configs(self, resource: ConfigResource) -> Mapping[str, str]:
        return self.resources.get(resource, EMPTY)

    def value(self, resource: ConfigResource, name: str) -> Optional[str]:
        return self.configs(resource).get(name)

    def records(self) -> Iterator[pb.ConfigRecord]:
        for resource in sorted(self.resources):
            configs = self.resources[resource]
            for name in sorted(configs):
                yield pb.ConfigRecord(resource_type=resource.type, resource_name=resource.name,
                                      name=name, value=configs[name])


class ConfigsDelta:
    def __init__(self, image: ConfigsImage) -> None:
        self.image = image
        self.resources: NestedMapDelta[ConfigResource, str, str] = NestedMapDelta(image.resources)

    def replay_config(self, record: pb.ConfigRecord) -> None:
        configs = self.resources.of(ConfigResource(record.resource_type, record.resource_name))
        if record.HasField("value"):
            configs.set(record.name, record.value)
        else:
            configs.remove(record.name)

    def remove_topic(self, name: str) -> None:
        resource = ConfigResource(TOPIC, name)
        if resource in self.resources.inner or resource in self.image.resources:
            self.resources.of(resource).clear()

    def apply(self) -> ConfigsImage:
        resources = self.resources.apply()
        return self.image if resources is self.image.resources else ConfigsImage(resources)
