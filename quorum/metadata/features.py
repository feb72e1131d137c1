"""Finalized feature levels (metadata.version among them): FEATURE_LEVEL_RECORD; and where a cluster
that came from ZooKeeper mode is in its migration: ZK_MIGRATION_STATE_RECORD (Kafka keeps it in its
FeaturesImage too)."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import versions
from quorum.metadata.mapdelta import MapDelta
from quorum.metadata.pmap import EMPTY, PMap

METADATA_VERSION = "metadata.version"
ZkMigrationState = pb.ZkMigrationState


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    levels: PMap[str, int] = EMPTY  # feature name -> finalized level (>= 1; 0 is never stored)
    zk_migration_state: int = ZkMigrationState.NONE  # a ZkMigrationState code

    def level(self, name: str) -> int:
        """The finalized level of ``name``; 0 if the feature is not enabled."""
        return self.levels.get(name, 0)

    @property
    def metadata_version(self) -> Optional[int]:
        """The metadata.version level, or None before the first FeatureLevelRecord for it."""
        return self.levels.get(METADATA_VERSION)

    @property
    def zk_migration_state_name(self) -> str:
        return ZkMigrationState.Code.Name(self.zk_migration_state)

    def records(self) -> Iterator[pb.FeatureLevelRecord | pb.ZkMigrationStateRecord]:
        # metadata.version first: it says how to read everything after it (as in Kafka).
        for name in sorted(self.levels, key=lambda n: (n != METADATA_VERSION, n)):
            yield pb.FeatureLevelRecord(name=name, feature_level=self.levels[name])
        if self.zk_migration_state != ZkMigrationState.NONE:
            yield pb.ZkMigrationStateRecord(zk_migration_state=self.zk_migration_state)


class FeaturesDelta:
    def __init__(self, image: FeaturesImage) -> None:
        self.image = image
        self.levels: MapDelta[str, int] = MapDelta(image.levels)
        self.zk_migration_state = image.zk_migration_state

    def replay_feature_level(self, record: pb.FeatureLevelRecord) -> None:
        if record.feature_level == 0:
            self.levels.remove(record.name)
        elif record.name == METADATA_VERSION:  # sparkraft's own levels of before read as Kafka's (versions.py)
            level, blocks = versions.from_legacy(record.feature_level)
            self.levels.set(METADATA_VERSION, level)
            if record.feature_level in versions.LEGACY:  # then sparkraft.version did not exist: it is implied
                if blocks:
                    self.levels.set(versions.SPARKRAFT_VERSION, blocks)
                else:
                    self.levels.remove(versions.SPARKRAFT_VERSION)
        else:
            self.levels.set(record.name, record.feature_level)

    def replay_zk_migration_state(self, record: pb.ZkMigrationStateRecord) -> None:
        self.zk_migration_state = record.zk_migration_state

    def apply(self) -> FeaturesImage:
        levels = self.levels.apply()
        if levels is self.image.levels and self.zk_migration_state == self.image.zk_migration_state:
            return self.image
        return FeaturesImage(levels, self.zk_migration_state)
