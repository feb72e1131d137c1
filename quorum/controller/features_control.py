"""UpdateFeatures and the metadata.version bootstrap (Kafka's FeatureControlManager).

metadata.version says how to read the log. The first active controller of an empty log writes
``FeatureLevel(metadata.version, bootstrap level)``. An upgrade is refused if any registered broker
does not support the new level, and metadata.version is never downgraded or removed here (a
downgrade could drop metadata that newer records carry).
"""
from __future__ import annotations

from quorum.controller import api
from quorum.controller.settings import MV_BOOTSTRAP, MV_MAX, MV_MIN
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.image import MetadataImage

KRAFT_VERSION = "kraft.version"

# feature -> (lowest, highest) finalized level this controller implements; 0 = disabled. A level
# is listed only once what it stands for works: a feature level that nothing implements would tell
# clients and operators the cluster can do what it cannot.
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MV_MIN, MV_MAX),
    # kraft.version lives in the Raft log (KRAFT_VERSION control records), not in FeatureLevel records:
    # a dynamic quorum is formatted at 1, and the controller node hands an upgrade of a static one to
    # the Raft leader (quorum/node/controller_node.py; quorum/raft/membership.py). Here it is refused.
    KRAFT_VERSION: (0, 1),
    "transaction.version": (0, 0),  # brokers carry metadata only: no transaction coordinator
    "group.version": (0, 0),  # ...and no group coordinator
}


def bootstrap_records(image: MetadataImage, level: int = MV_BOOTSTRAP) -> list[pb.FeatureLevelRecord]:
    if image.features.metadata_version is not None:
        return []
    return [pb.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level)]


def _check(image: MetadataImage, name: str, level: int, node_id: int) -> None:
    bad = Errors.INVALID_UPDATE_VERSION
    if name not in SUPPORTED:
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. The controller "
                                  f"does not support the given feature.")
    if name == KRAFT_VERSION:
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}: it is the quorum's "
                                  f"(its control records), upgraded by the Raft leader, not by this controller")
    lo, hi = SUPPORTED[name]
    if name == METADATA_VERSION:
        if level < MV_MIN:
            raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. "
                                      f"metadata.version cannot be removed.")
        current = image.features.metadata_version or 0
        if level < current:
            raise SparkraftError(bad, f"Invalid metadata.version {level}. Refusing to perform the "
                                      f"requested downgrade from {current} because it might delete "
                                      f"metadata information.")
    if not (level == 0 or lo <= level <= hi):
        supported = "only level 0 (disabled): higher levels are not implemented" if hi == 0 \
            else f"only versions {lo}-{hi}"
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. Local "
                                  f"controller {node_id} supports {supported}")
    if name == METADATA_VERSION:
        for b in image.cluster.brokers.values():
            for f in b.features:
                if f.name == name and not f.min_version <= level <= f.max_version:
                    raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. "
                                              f"Broker {b.broker_id} only supports versions "
                                              f"{f.min_version}-{f.max_version}")


def update(image: MetadataImage, req: api.UpdateFeaturesRequest, node_id: int
           ) -> tuple[list[pb.FeatureLevelRecord], tuple[api.ItemResult, ...]]:
    records, results = [], []
    seen = set()
    for name, level in req.updates:
        try:
            if name in seen:
                raise SparkraftError(Errors.INVALID_REQUEST, f"Feature {name} appears more than once")
            seen.add(name)
            _check(image, name, level, node_id)
        except SparkraftError as e:
            results.append(api.ItemResult(e.error, e.message))
            continue
        if image.features.level(name) != level and not req.validate_only:
            records.append(pb.FeatureLevelRecord(name=name, feature_level=level))
        results.append(api.ItemResult())
    return records, tuple(results)
