"""What must hold in every image the active controller produces; property tests check it after
every change, and replay deliberately does not (it must never refuse a committed log)."""
from __future__ import annotations

from quorum.metadata.configs import TOPIC
from quorum.metadata.image import MetadataImage
from quorum.metadata.scram import KEY_BYTES, MAX_ITERATIONS, MIN_ITERATIONS
from quorum.metadata.topics import NO_LEADER


def violations(image: MetadataImage) -> list[str]:
    """Every broken invariant, one line each; empty if the image is sound."""
    problems: list[str] = []
    topics = image.topics
    if len(topics.by_id) != len(topics.ids_by_name):
        problems.append(f"{len(topics.by_id)} topics by id but {len(topics.ids_by_name)} by name")
    for name, topic_id in topics.ids_by_name.items():
        topic = topics.by_id.get(topic_id)
        if topic is None or topic.name != name:
            problems.append(f"name {name!r} points to {topic_id}, which is not a topic of that name")
    for topic in topics.by_id.values():
        for pid, p in topic.partitions.items():
            where = f"{topic.name}-{pid}"
            replicas = set(p.replicas)
            if pid < 0:
                problems.append(f"{where}: negative partition id")
            if not p.replicas or len(replicas) != len(p.replicas):
                problems.append(f"{where}: replicas {p.replicas} empty or repeated")
            if not replicas.issuperset(p.isr):
                problems.append(f"{where}: ISR {p.isr} not within replicas {p.replicas}")
            if p.leader != NO_LEADER and p.leader not in p.isr:
                problems.append(f"{where}: leader {p.leader} not in ISR {p.isr}")
            if not replicas.issuperset(p.elr) or set(p.elr) & set(p.isr):
                problems.append(f"{where}: ELR {p.elr} not within replicas {p.replicas} or overlapping "
                                f"the ISR {p.isr}")
            if p.directories and len(p.directories) != len(p.replicas):
                problems.append(f"{where}: {len(p.directories)} log directories for replicas {p.replicas}")
            if not replicas.issuperset(p.adding_replicas) or not replicas.issuperset(p.removing_replicas):
                problems.append(f"{where}: adding {p.adding_replicas} / removing "
                                f"{p.removing_replicas} not within replicas {p.replicas}")
    for resource, configs in image.configs.resources.items():
        if not configs:
            problems.append(f"configs of {resource} kept while empty")
        if resource.type == TOPIC and resource.name not in topics.ids_by_name:
            problems.append(f"configs of topic {resource.name!r}, which does not exist")
    for entity, quotas in image.client_quotas.entities.items():
        if not quotas:
            problems.append(f"quotas of {entity} kept while empty")
    for name, level in image.features.levels.items():
        if level == 0:
            problems.append(f"feature {name} stored at level 0")
    for (user, mechanism), c in image.scram.credentials.items():
        key_bytes = KEY_BYTES.get(mechanism)
        if not user or key_bytes is None or not c.salt:
            problems.append(f"SCRAM credential of {user!r} ({mechanism}): no name, unknown mechanism or no salt")
        elif not (MIN_ITERATIONS <= c.iterations <= MAX_ITERATIONS):
            problems.append(f"SCRAM credential of {user!r}: {c.iterations} iterations")
        elif len(c.stored_key) != key_bytes or len(c.server_key) != key_bytes:
            problems.append(f"SCRAM credential of {user!r}: keys of the wrong size for its mechanism")
    return problems
