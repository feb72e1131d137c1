"""UpdateFeatures, DescribeFeatures and the bootstrap feature levels (Kafka's FeatureControlManager).

metadata.version is Kafka's (quorum/metadata/versions.py: 3.6-IV2 = 14 ... 4.2-IV1 = 29), and says
what the log may hold, as in Kafka: 3.7-IV2 (17) log directories in registrations and partitions,
4.0-IV1 (23) eligible leader replicas. sparkraft's own extension is a feature of its own,
``sparkraft.version``: 1, many partition changes in one PartitionChangeBlockRecord. It changes how
the log writes changes, not what an image holds, so turning it off is always safe; Kafka's brokers
never see it (the log they fetch has Kafka's records only), so their registrations are not checked
against it.

``eligible.leader.replicas.version`` 1 (elections and ISR changes use the ELR) needs metadata.version
4.0-IV1. ``group.version``, ``share.version``, ``transaction.version`` and ``streams.version`` are
the brokers' (Kafka 4's group, share-group, transaction and streams protocols): the controllers keep
them, and a broker that does not support a finalized level is refused, as by Kafka's controller. A
new cluster starts at the highest metadata.version with sparkraft.version 1 and the other features
off (``storage format --release-version / --feature`` pick others).

Guard rails, as the seed talk describes them:

- an **upgrade** is refused while a registered broker does not support the level (a broker that
  does not name a feature supports only level 0 of it);
- a **downgrade** names its type, as in Kafka's UpdateFeatures: ``SAFE_DOWNGRADE`` goes through
  only when the lower levels can express everything the metadata holds now; ``UNSAFE_DOWNGRADE``
  also goes through when they cannot, after rewriting what they cannot express (ELR is cleared, an
  ACL whose host is a CIDR block deleted below 4.4-IV1) in
  the same atomic operation, and its answer says what was dropped. An ``UPGRADE`` to a lower level
  is refused, and so is a downgrade that leaves a feature without the metadata.version it depends
  on (downgrade both in one request).

Every update is checked against the levels the whole request leaves, so ``metadata.version=3.9-IV0``
with ``eligible.leader.replicas.version=0`` is one valid downgrade. A log written when sparkraft
numbered metadata.version 1-4 reads as Kafka's levels (versions.LEGACY).
"""
from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Optional

from quorum.controller import api
from quorum.controller.bulk_changes import TopicPolicies
from quorum.controller.partition_change import change
from quorum.controller.reassign_control import revert_targets
from quorum.controller.settings import (
    CONTROLLER_ONLY,
    ELR_VERSION,
    MV_BOOTSTRAP,
    MV_ELR,
    MV_MAX,
    MV_MIN,
    MV_REASSIGNMENT,
    SPARKRAFT_VERSION,
)
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import versions
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.image import MetadataImage

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext

KRAFT_VERSION = "kraft.version"
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = "UPGRADE", "SAFE_DOWNGRADE", "UNSAFE_DOWNGRADE"

# feature -> (lowest, highest) finalized level this controller implements; 0 = disabled. A level
# is listed only once what it stands for works: a feature level that nothing implements would tell
# clients and operators the cluster can do what it cannot.
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MV_MIN, MV_MAX),
    # kraft.version lives in the Raft log (KRAFT_VERSION control records), not in FeatureLevel records:
    # a dynamic quorum is formatted at 1, and the controller node hands an upgrade of a static one to
    # the Raft leader (quorum/node/controller_node.py; quorum/raft/membership.py). Here it is refused.
    KRAFT_VERSION: (0, 1),
    ELR_VERSION: (0, 1),
    SPARKRAFT_VERSION: (0, versions.CHANGE_BLOCKS),
    # the brokers' protocols (Kafka's brokers: KIP-848 consumer groups, KIP-932 share groups, KIP-890
    # transactions, KIP-1071 streams groups); sparkraft's own brokers support level 0 of each only
    "group.version": (0, 1),
    "share.version": (0, 2),
    "transaction.version": (0, 2),
    "streams.version": (0, 1),
}

# (feature, level) -> the metadata.version it needs
DEPENDENCIES: dict[tuple[str, int], int] = {(ELR_VERSION, 1): MV_ELR}


def bootstrap_records(image: MetadataImage, level: int = MV_BOOTSTRAP) -> list[pb.FeatureLevelRecord]:
    if image.features.metadata_version is not None:
        return []
    return [pb.FeatureLevelRecord(name=METADATA_VERSION, feature_level=level),
            pb.FeatureLevelRecord(name=SPARKRAFT_VERSION, feature_level=versions.CHANGE_BLOCKS)]


def bootstrap_image(updates: list[tuple[str, int]], image: MetadataImage) -> MetadataImage:
    """``image`` with the first feature levels of ``storage format --release-version / --feature``
    (metadata.version first), checked as an upgrade would be; KeyError for kraft.version, which the
    quorum's formatting sets."""
    levels = {METADATA_VERSION: MV_BOOTSTRAP, SPARKRAFT_VERSION: versions.CHANGE_BLOCKS}
    for name, level in updates:
        if name == KRAFT_VERSION:
            raise KeyError("kraft.version is set by --standalone / --initial-controllers (1) or their absence (0)")
        lo, hi = SUPPORTED.get(name, (None, None))
        if lo is None or not (lo <= level <= hi or (level == 0 and name != METADATA_VERSION)):
            what = "not a feature this sparkraft supports" if lo is None else f"supported at levels {lo}-{hi}"
            raise SparkraftError(Errors.INVALID_UPDATE_VERSION, f"Invalid level {level} for feature {name}: {what}")
        levels[name] = level
    for name, level in levels.items():
        _check_dependencies(name, level, levels)
    delta = MetadataDelta(image)
    for name, level in levels.items():
        if level:
            delta.replay(pb.FeatureLevelRecord(name=name, feature_level=level))
    return delta.apply()


def describe(image: MetadataImage, offset: int) -> api.FeaturesDescription:
    finalized = tuple(sorted(image.features.levels.items(), key=lambda kv: (kv[0] != METADATA_VERSION, kv[0])))
    supported = tuple((name, lo, hi) for name, (lo, hi) in sorted(SUPPORTED.items()))
    return api.FeaturesDescription(finalized, supported, offset)


# ---------------------------------------------------------------- checks
def _check_level(image: MetadataImage, name: str, level: int, kind: str, node_id: int,
                 voters: Optional[Collection[int]] = None) -> None:
    """What does not depend on the rest of the request. ``voters``: the quorum's voters, whose
    registrations are checked (None: every registered controller's)."""
    bad = Errors.INVALID_UPDATE_VERSION
    if name not in SUPPORTED:
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. The controller "
                                  f"does not support the given feature.")
    if name == KRAFT_VERSION:
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}: it is the quorum's "
                                  f"(its control records), upgraded by the Raft leader, not by this controller")
    current = image.features.metadata_version or 0 if name == METADATA_VERSION else image.features.level(name)
    if name == METADATA_VERSION and level < MV_MIN:
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. metadata.version cannot "
                                  f"be lower than {MV_MIN} ({versions.release(MV_MIN)}), the oldest level this "
                                  f"controller supports.")
    if level < current and kind == UPGRADE:
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. Can't downgrade the "
                                  f"version of this feature without setting the upgrade type to either safe "
                                  f"or unsafe downgrade.")
    if level > current and kind != UPGRADE:
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. Can't downgrade to a "
                                  f"newer version ({current} now).")
    lo, hi = SUPPORTED[name]
    if not (level == 0 and name != METADATA_VERSION or lo <= level <= hi):
        supported = "only level 0 (disabled): higher levels are not implemented" if hi == 0 \
            else f"only versions {lo}-{hi}"
        raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. Local "
                                  f"controller {node_id} supports {supported}")
    if level > current and name not in CONTROLLER_ONLY:
        for b in image.cluster.brokers.values():
            ranges = {f.name: (f.min_version, f.max_version) for f in b.features}
            blo, bhi = ranges.get(name, (0, 0))
            if not blo <= level <= bhi:
                raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. Broker "
                                          f"{b.broker_id} only supports versions {blo}-{bhi}")
    if level != current and name != KRAFT_VERSION:  # every other controller that registered (KIP-919)
        for c in image.cluster.controllers.values():
            if c.controller_id == node_id or voters is not None and c.controller_id not in voters:
                continue
            f = c.feature(name)
            clo, chi = (f.min_version, f.max_version) if f is not None else (0, 0)
            if not clo <= level <= chi:
                supported = "does not support this feature." if chi == 0 else f"only supports versions {clo}-{chi}"
                raise SparkraftError(bad, f"Invalid update version {level} for feature {name}. Controller "
                                          f"{c.controller_id} {supported}")


def _check_dependencies(name: str, level: int, final: dict[str, int]) -> None:
    """A feature's level needs its metadata.version; metadata.version must keep what depends on it."""
    mv = final.get(METADATA_VERSION, 0)
    needed = DEPENDENCIES.get((name, level))
    if needed is not None and mv < needed:
        raise SparkraftError(Errors.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature "
                                                            f"{name}. It needs metadata.version {needed} or "
                                                            f"higher (it would be {mv}).")
    if name == METADATA_VERSION:
        for (feature, flevel), needs in sorted(DEPENDENCIES.items()):
            if final.get(feature, 0) >= flevel and level < needs:
                raise SparkraftError(Errors.INVALID_UPDATE_VERSION, f"Invalid update version {level} for "
                                     f"feature {name}. {feature} {final[feature]} needs metadata.version "
                                     f"{needs}: downgrade it to 0 in the same request.")


# ---------------------------------------------------------------- what a downgrade drops
def _losses(ctx: "ControllerContext", final: dict[str, int]) -> tuple[list[pb.PartitionChangeRecord], list[str]]:
    """The rewrites the levels ``final`` need (records) and what they drop (sentences)."""
    image = ctx.spec
    mv = final.get(METADATA_VERSION, 0)
    keep_elr = mv >= MV_ELR and final.get(ELR_VERSION, 0) >= 1
    keep_reassignments = mv >= MV_REASSIGNMENT
    policies = TopicPolicies(ctx)
    records, reverted, cleared = [], [], 0
    for topic in sorted(image.topics.by_id.values(), key=lambda t: t.name):
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            revert = not keep_reassignments and bool(p.adding_replicas or p.removing_replicas)
            clear = not keep_elr and bool(p.elr or p.last_known_elr)
            if not (revert or clear):
                continue
            kwargs: dict = {"elr": None if not keep_elr else policies.elr(topic.topic_id)}
            if revert:
                original, isr, _ = revert_targets(p)  # an unsafe downgrade accepts an unclean revert
                kwargs.update(target_replicas=original, target_isr=isr, target_adding=(), target_removing=())
                reverted.append(f"{topic.name}-{pid}")
            if clear:
                kwargs.update(target_elr=(), target_last_known_elr=())
                cleared += 1
            record = change(topic.topic_id, pid, p, ctx.acceptable, **kwargs)
            if record is not None:
                records.append(record)
    dropped = []
    if reverted:
        shown = ", ".join(reverted[:10]) + (f" and {len(reverted) - 10} more" if len(reverted) > 10 else "")
        dropped.append(f"{len(reverted)} reassignment(s) in flight reverted to their original replicas ({shown})")
    if cleared:
        dropped.append(f"the eligible leader replicas of {cleared} partition(s) cleared")
    if mv < versions.CIDR_ACLS:  # an ACL whose host is a CIDR block has no meaning below 4.4-IV1
        blocks = sorted(a.id for a in image.acls.acls.values() if "/" in a.host)
        if blocks:
            records += [pb.RemoveAccessControlEntryRecord(id=i) for i in blocks]
            dropped.append(f"{len(blocks)} ACL(s) with a CIDR host deleted")
    return records, dropped


# ---------------------------------------------------------------- UpdateFeatures
def update(ctx: "ControllerContext", req: api.UpdateFeaturesRequest
           ) -> tuple[list, tuple[api.ItemResult, ...]]:
    image = ctx.spec
    kind = req.upgrade_type
    if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise SparkraftError(Errors.INVALID_REQUEST, f"Unknown upgrade type {kind!r}: UPGRADE, SAFE_DOWNGRADE "
                                                     f"or UNSAFE_DOWNGRADE")
    errors: dict[int, SparkraftError] = {}
    seen: set[str] = set()
    final = dict(image.features.levels)
    for i, (name, level) in enumerate(req.updates):
        try:
            if name in seen:
                raise SparkraftError(Errors.INVALID_REQUEST, f"Feature {name} appears more than once")
            seen.add(name)
            _check_level(image, name, level, kind, ctx.node_id, ctx.voters())
        except SparkraftError as e:
            errors[i] = e
            continue
        final[name] = level
    for i, (name, level) in enumerate(req.updates):
        if i not in errors:
            try:
                _check_dependencies(name, level, final)
            except SparkraftError as e:
                errors[i] = e
    changed = [(name, level) for i, (name, level) in enumerate(req.updates)
               if i not in errors and image.features.level(name) != level]
    rewrites, dropped = _losses(ctx, {**dict(image.features.levels), **dict(changed)}) if changed else ([], [])
    if dropped and kind != UNSAFE_DOWNGRADE:
        refusal = SparkraftError(Errors.INVALID_UPDATE_VERSION, "Refusing to perform the requested downgrade "
                                 "because it might delete metadata information: " + "; ".join(dropped)
                                 + ". Use an unsafe downgrade to drop it.")
        for i, (name, level) in enumerate(req.updates):
            if i not in errors and (name, level) in changed:
                errors[i] = refusal
        changed, rewrites, dropped = [], [], []
    note = ("dropped: " + "; ".join(dropped)) if dropped else ""
    results = tuple(api.ItemResult(errors[i].error, errors[i].message) if i in errors
                    else api.ItemResult(Errors.NONE, note if (name, level) in changed else "")
                    for i, (name, level) in enumerate(req.updates))
    if req.validate_only or not changed:
        return [], results
    return rewrites + [pb.FeatureLevelRecord(name=name, feature_level=level) for name, level in changed], results
