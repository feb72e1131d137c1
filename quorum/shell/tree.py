"""The image as a file tree, built lazily: a directory lists its children only when visited, so a
2,000,000-partition image opens at once.

    /image/provenance                           offset and epoch the image ends at
    /image/features/<name>                      feature level
    /image/cluster/<broker id>                  the broker's registration
    /image/controllers/<controller id>          a controller's registration (KIP-919)
    /image/topics/byName/<name>/<partition>     a partition (also id, name)
    /image/topics/byId/<topic id>/<partition>
    /image/configs/<TOPIC|BROKER|CLUSTER|GROUP>/<resource>/<key>   (the cluster's resource is "default")
    /image/clientQuotas/<entity>/<key>
    /image/acls/<id>
    /image/producerIds                          the next producer id block
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, is_dataclass
from typing import Callable, Union

from quorum.metadata.configs import is_sensitive
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import REDACTED
from quorum.metadata.scram import mechanism_name


@dataclass(frozen=True)
class File:
    text: str


@dataclass(frozen=True)
class Dir:
    list_children: Callable[[], dict[str, "Node"]]

    def children(self) -> dict[str, "Node"]:
        return self.list_children()


Node = Union[File, Dir]


def _json(value) -> str:
    if is_dataclass(value):
        value = asdict(value)
    elif hasattr(value, "_asdict"):
        value = value._asdict()
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _topic(image: MetadataImage, topic) -> Dir:
    def children():
        out: dict[str, Node] = {"id": File(topic.topic_id), "name": File(topic.name)}
        for pid in sorted(topic.partitions):
            out[str(pid)] = File(_json(topic.partitions[pid]))
        return out
    return Dir(children)


def image_tree(image: MetadataImage) -> Dir:
    def features():
        return {name: File(str(level)) for name, level in sorted(image.features.levels.items())}

    def cluster():
        return {str(b): File(_json(image.cluster.brokers[b])) for b in sorted(image.cluster.brokers)}

    def controllers():
        return {str(c): File(_json(image.cluster.controllers[c])) for c in sorted(image.cluster.controllers)}

    def by_name():
        return {name: _topic(image, image.topics.topic_by_name(name)) for name in image.topics.topic_names()}

    def by_id():
        return {tid: _topic(image, image.topics.by_id[tid]) for tid in sorted(image.topics.by_id)}

    def configs_of(kind: str):
        def resources():
            out: dict[str, Node] = {}
            for resource, values in image.configs.resources.items():
                if resource.kind != kind:
                    continue
                name = resource.name or "default"
                out[name] = Dir(lambda r=resource: {k: File(REDACTED if is_sensitive(k) else v)  # as Kafka's shell
                                                    for k, v in sorted(image.configs.configs(r).items())})
            return dict(sorted(out.items()))
        return Dir(resources)

    def quotas():
        return {str(entity): Dir(lambda e=entity: {k: File(repr(v))
                                                    for k, v in sorted(image.client_quotas.entities[e].items())})
                for entity in image.client_quotas.entities}

    def acls():
        return {acl_id: File(_json(entry)) for acl_id, entry in sorted(image.acls.acls.items())}

    def scram():
        """Users by name, each mechanism's iterations: never salts or keys (Kafka's shell redacts them)."""
        return {user: Dir(lambda creds=creds: {mechanism_name(code): File(json.dumps({"iterations": c.iterations}))
                                               for code, c in sorted(creds.items())})
                for user, creds in sorted(image.scram.users().items())}

    def root():
        return {
            "provenance": File(json.dumps({"offset": image.provenance.offset, "epoch": image.provenance.epoch})),
            "features": Dir(features),
            "cluster": Dir(cluster),
            "controllers": Dir(controllers),
            "topics": Dir(lambda: {"byName": Dir(by_name), "byId": Dir(by_id)}),
            "configs": Dir(lambda: {k: configs_of(k) for k in ("TOPIC", "BROKER", "CLUSTER", "GROUP")}),
            "clientQuotas": Dir(quotas),
            "acls": Dir(acls),
            "scramCredentials": Dir(scram),
            "producerIds": File(json.dumps({"next_producer_id": image.producer_ids.next_producer_id})),
        }

    return Dir(lambda: {"image": Dir(root)})
