"""A new quorum's first image, from a consistent cut of a warehouse (``storage format --from-warehouse``).

Disaster recovery after a majority of controllers is lost, or a staging copy of production
metadata: the cut (delta_tables/bootstrap.py reads it, refusing one whose tables disagree) is the
controllers' image at its offset, brokers, topics, partitions, configs, features, ACLs, client
quotas and producer ids included. SCRAM credentials are the one part a warehouse never holds (their
keys are cleared before anything is materialised), so they are restored only as given again with
``--add-scram``; the users the cut knows are named so none is forgotten.
"""
from __future__ import annotations

from typing import Optional

from delta_tables.bootstrap import image_from_cut
from delta_tables.cut import Cut, CutError, latest_cut, read_table, tables_at
from delta_tables.schemas import USERS
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.image import MetadataImage


def restored_image(warehouse: str, as_of_offset: Optional[int] = None,
                   scram: Optional[MetadataImage] = None) -> tuple[MetadataImage, Cut]:
    """(the image at the newest cut at or below ``as_of_offset``, with ``scram``'s credentials, that
    cut); CutError if there is none, or it holds no metadata (nothing to restore)."""
    cut = latest_cut(warehouse, as_of_offset)
    image, _next_offset = image_from_cut(warehouse, cut)
    if image.features.metadata_version is None:
        raise CutError(f"the cut at offset {cut.offset} in {warehouse} holds no metadata.version: it is not a "
                       f"cluster's metadata (nothing to restore)")
    if scram is not None:
        delta = MetadataDelta(image)
        for record in scram.scram.records():
            delta.replay(record)
        image = delta.apply()
    return image, cut


def users_without_keys(warehouse: str, cut: Cut, image: MetadataImage) -> list[str]:
    """The SCRAM users the cut names that ``image`` has no credential for."""
    rows = read_table(tables_at(warehouse, cut)[USERS]).to_pylist()
    return sorted({r["name"] for r in rows} - set(image.scram.users()))


def summary(image: MetadataImage) -> str:
    """What a restored image holds, in one line."""
    topics = image.topics.by_id
    partitions = sum(len(t.partitions) for t in topics.values())
    return (f"metadata.version {image.features.metadata_version}, {len(topics):,} topics, {partitions:,} partitions, "
            f"{len(image.cluster.brokers)} brokers, {len(image.acls.acls)} ACLs, "
            f"{len(image.scram.users())} SCRAM users")
