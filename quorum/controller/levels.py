"""What an image's feature levels allow, asked by the request handlers (elections, ISR changes,
reassignments) without depending on the module that changes the levels (features_control.py)."""
from __future__ import annotations

from quorum.controller.settings import ELR_VERSION, MV_CHANGE_BLOCKS, MV_ELR
from quorum.errors import Errors, SparkraftError
from quorum.metadata.image import MetadataImage


def elr_enabled(image: MetadataImage) -> bool:
    """Do elections and ISR changes use eligible leader replicas (KIP-966)?"""
    return image.features.level(ELR_VERSION) >= 1 and (image.features.metadata_version or 0) >= MV_ELR


def change_blocks_enabled(image: MetadataImage) -> bool:
    """May many partition changes go into the log as one PartitionChangeBlockRecord?"""
    return (image.features.metadata_version or 0) >= MV_CHANGE_BLOCKS


def require_metadata_version(image: MetadataImage, level: int, what: str) -> None:
    current = image.features.metadata_version or 0
    if current < level:
        raise SparkraftError(Errors.UNSUPPORTED_VERSION, f"{what} needs metadata.version {level} or higher "
                                                         f"(it is {current}): upgrade it first")
