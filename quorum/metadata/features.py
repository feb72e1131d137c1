"""Finalized feature levels (metadata.version among them): FEATURE_LEVEL_RECORD."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.mapdelta import MapDelta
from quorum.metadata.pmap import EMPTY, PMap

METADATA_VERSION = "metadata.version"


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    levels: PMap[str, int] = EMPTY  # feature name -> finalized level (>= 1; 0 is never stored)

    def level(self, name: str) -> int:
        """The finalized level of ``name``; 0 if the feature is not enabled."""
        return self.levels.get(name, 0)

    @property
    def metadata_version(self) -> Optional[int]:
        """The metadata.version level, or None before the first FeatureLevelRecord for it."""
        return self.levels.get(METADATA_VERSION)

    def records(self) -> Iterator[pb.FeatureLevelRecord]:
        # metadata.version first: it says how to read everything after it (as in Kafka).
        for name in sorted(self.levels, key=lambda n: (n != METADATA_VERSION, n)):
            yield pb.FeatureLevelRecord(name=name, feature_level=self.levels[name])


class FeaturesDelta:
    def __init__(self, image: FeaturesImage) -> None:
        self.image = image
        self.levels: MapDelta[str, int] = MapDelta(image.levels)

    def replay_feature_level(self, record: pb.FeatureLevelRecord) -> None:
        if record.feature_level == 0:
            self.levels.remove(record.name)
        else:
            self.levels.set(record.name, record.feature_level)

    def apply(self) -> FeaturesImage:
        levels = self.levels.apply()
        return self.image if levels is self.image.levels else FeaturesImage(levels)
