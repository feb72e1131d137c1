"""What an image's feature levels allow, asked by the request handlers (elections, ISR changes,
reassignments) without depending on the module that changes the levels (features_control.py)."""
from __future__ import annotations

from quorum.controller.settings import ELR_VERSION, MV_DIRECTORIES, MV_ELR, SPARKRAFT_VERSION
from quorum.errors import Errors, SparkraftError
from quorum.metadata.image import MetadataImage
from quorum.metadata.versions import CORDONED_LOG_DIRS, release


def elr_enabled(image: MetadataImage) -> bool:
    """Do elections and ISR changes use eligible leader replicas (KIP-966)?"""
    return image.features.level(ELR_VERSION) >= 1 and (image.features.metadata_version or 0) >= MV_ELR


def change_blocks_enabled(image: MetadataImage) -> bool:
    """May many partition changes go into the log as one PartitionChangeBlockRecord?"""
    return image.features.level(SPARKRAFT_VERSION) >= 1


def directories_enabled(image: MetadataImage) -> bool:
    """Do registrations and partitions carry log directories (KIP-858)?"""
    return (image.features.metadata_version or 0) >= MV_DIRECTORIES


def cordoning_enabled(image: MetadataImage) -> bool:
    """Do registrations carry cordoned log directories (KIP-1066)?"""
    return (image.features.metadata_version or 0) >= CORDONED_LOG_DIRS


def require_metadata_version(image: MetadataImage, level: int, what: str) -> None:
    current = image.features.metadata_version or 0
    if current < level:
        raise SparkraftError(Errors.UNSUPPORTED_VERSION, f"{what} needs metadata.version {release(level)} or "
                                                         f"higher (it is {release(current)}): upgrade it first")
