"""The features lifecycle at the controller, in Kafka's numbering of metadata.version: describe,
upgrades refused for brokers that cannot follow, safe and unsafe downgrades of metadata.version
and eligible.leader.replicas.version, the features a broker must support to register, sparkraft's
own sparkraft.version, and logs written when sparkraft numbered metadata.version 1-4."""
from __future__ import annotations

from controller_helpers import controller, create, register

from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.controller.settings import MV_MAX, MV_MIN, ControllerSettings
from quorum.errors import Errors
from quorum.metadata.invariants import violations

ELR = "eligible.leader.replicas.version"
MV = "metadata.version"
SPARKRAFT = "sparkraft.version"
V3_9, V4_0_IV1 = 21, 23  # 3.9-IV0, and 4.0-IV1: ELR (quorum/metadata/versions.py)


def features(c, *updates, kind="UPGRADE", dry=False):
    return c.request(api.UpdateFeaturesRequest(tuple(updates), validate_only=dry, upgrade_type=kind))


def levels(c):
    return dict(c.core.image.features.levels)


def test_describe_lists_finalized_and_supported_levels():
    c, _ = controller(1)
    d = c.core.describe_features()
    assert d.finalized == ((MV, MV_MAX), (SPARKRAFT, 1))
    assert (MV, MV_MIN, MV_MAX) == (MV, 14, 33)  # 3.6-IV2 ... 4.4-IV2
    assert (MV, 14, 33) in d.supported and (ELR, 0, 1) in d.supported and ("kraft.version", 0, 1) in d.supported
    assert ("group.version", 0, 1) in d.supported and (SPARKRAFT, 0, 1) in d.supported
    assert d.epoch == c.core.last_committed_offset
    features(c, (ELR, 1))
    assert c.core.describe_features().finalized == ((MV, MV_MAX), (ELR, 1), (SPARKRAFT, 1))


def test_an_upgrade_a_broker_cannot_follow_is_refused():
    c = LocalController(ControllerSettings(seed=1, bootstrap_metadata_version=V3_9))
    register(c, 0)
    register(c, 1, features=())  # an older broker: knows nothing of ELR
    r, mv = features(c, (ELR, 1), (MV, V4_0_IV1))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "Broker 1 only supports versions 0-0" in r.message
    assert mv.error is Errors.NONE and levels(c) == {MV: V4_0_IV1, SPARKRAFT: 1}  # each answered on its own
    # group.version is the brokers' (Kafka 4's consumer groups): sparkraft's brokers support 0 only
    (r,) = features(c, ("group.version", 1))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "Broker 0 only supports versions 0-0" in r.message
    # a broker that does not support a finalized level cannot register; sparkraft.version is never asked
    c.request(api.UnregisterBrokerRequest(1))
    features(c, (ELR, 1))
    e = c.expect_error(api.RegisterBrokerRequest(1, c.cluster_id, "Inc001xxxxxxxxxxxxx001", (), features=()))
    assert e.error is Errors.UNSUPPORTED_VERSION and "finalized version 1 of eligible.leader.replicas.version" in e.message
    features(c, (ELR, 0), kind="UNSAFE_DOWNGRADE")
    register(c, 1, features=())  # names neither ELR nor sparkraft.version: registered
    e = c.expect_error(api.RegisterBrokerRequest(2, c.cluster_id, "Inc002xxxxxxxxxxxxx002", (), max_metadata_version=21))
    assert e.error is Errors.UNSUPPORTED_VERSION and "version 23 (4.0-IV1) of metadata.version" in e.message


def test_dependencies_and_upgrade_types():
    c, _ = controller(1, bootstrap_metadata_version=V3_9)
    (r,) = features(c, (ELR, 1))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "needs metadata.version 23" in r.message
    a, b = features(c, (MV, V4_0_IV1), (ELR, 1))  # together: fine
    assert a.error is b.error is Errors.NONE and levels(c) == {MV: V4_0_IV1, ELR: 1, SPARKRAFT: 1}
    (r,) = features(c, (MV, V3_9))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "without setting the upgrade type" in r.message
    (r,) = features(c, (MV, V3_9), kind="SAFE_DOWNGRADE")
    assert r.error is Errors.INVALID_UPDATE_VERSION and f"{ELR} 1 needs metadata.version 23" in r.message
    (r,) = features(c, (MV, V4_0_IV1), kind="SAFE_DOWNGRADE")  # not a downgrade: nothing to do
    assert r.error is Errors.NONE
    (r,) = features(c, (ELR, 2))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "supports only versions 0-1" in r.message
    (r,) = features(c, (MV, 13), kind="UNSAFE_DOWNGRADE")
    assert r.error is Errors.INVALID_UPDATE_VERSION and "cannot be lower than 14 (3.6-IV2)" in r.message
    (r,) = features(c, (MV, MV_MAX + 1), kind="SAFE_DOWNGRADE")
    assert r.error is Errors.INVALID_UPDATE_VERSION and "newer version" in r.message
    e = c.expect_error(api.UpdateFeaturesRequest(((MV, V3_9),), upgrade_type="SIDEWAYS"))
    assert e.error is Errors.INVALID_REQUEST
    assert levels(c) == {MV: V4_0_IV1, ELR: 1, SPARKRAFT: 1}


def test_a_safe_downgrade_loses_nothing_and_goes_through():
    c, _ = controller(3)
    create(c, "t", 2, 2)
    r, _ = features(c, (MV, MV_MIN), (SPARKRAFT, 0), kind="SAFE_DOWNGRADE", dry=True)
    assert r.error is Errors.NONE and levels(c) == {MV: MV_MAX, SPARKRAFT: 1}  # a dry run changes nothing
    a, b = features(c, (MV, MV_MIN), (SPARKRAFT, 0), kind="SAFE_DOWNGRADE")
    assert (a.error, a.message, b.error) == (Errors.NONE, "", Errors.NONE) and levels(c) == {MV: MV_MIN}
    (r,) = features(c, (MV, MV_MAX))
    assert r.error is Errors.NONE and levels(c) == {MV: MV_MAX}


def test_an_unsafe_downgrade_is_refused_unless_asked_then_rewrites_and_says_what_it_dropped():
    c, _ = controller(3)
    features(c, (ELR, 1))
    create(c, "t", 1, 3, configs=(("min.insync.replicas", "2"),))
    for b in (1, 2):  # two replicas fenced: the ISR shrinks into the ELR
        c.request(api.BrokerHeartbeatRequest(b, c.core.image.cluster.broker(b).broker_epoch,
                                             c.core.last_committed_offset, want_fence=True))
    p = c.core.image.topics.topic_by_name("t").partitions[0]
    assert p.elr or p.last_known_elr, "the fenced replicas are remembered in the ELR"
    before = c.core.image.topics
    a, b = features(c, (MV, V3_9), (ELR, 0), kind="SAFE_DOWNGRADE")
    assert a.error is Errors.INVALID_UPDATE_VERSION and "might delete metadata information" in a.message
    assert "eligible leader replicas of 1 partition(s) cleared" in a.message
    assert c.core.image.topics is before and levels(c) == {MV: MV_MAX, ELR: 1, SPARKRAFT: 1}
    a, b = features(c, (MV, V3_9), (ELR, 0), kind="UNSAFE_DOWNGRADE")
    assert a.error is Errors.NONE and a.message.startswith("dropped: the eligible leader replicas of 1")
    p = c.core.image.topics.topic_by_name("t").partitions[0]
    assert (p.elr, p.last_known_elr) == ((), ())
    assert levels(c) == {MV: V3_9, SPARKRAFT: 1} and violations(c.core.image) == []


def test_the_first_active_controller_starts_at_the_formatted_levels():
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb

    formatted = (pb.FeatureLevelRecord(name=MV, feature_level=V4_0_IV1), pb.FeatureLevelRecord(name=ELR, feature_level=1))
    c = LocalController(ControllerSettings(seed=1, bootstrap_records=formatted))
    assert levels(c) == {MV: V4_0_IV1, ELR: 1}
    c = LocalController(ControllerSettings(seed=1, bootstrap_records=(pb.FeatureLevelRecord(name=MV, feature_level=21),)))
    assert levels(c) == {MV: 21}


def test_a_log_written_at_sparkrafts_own_levels_reads_as_kafkas():
    """sparkraft numbered metadata.version 1-4 before it used Kafka's numbering: 1 and 2 hold what
    3.6-IV2 holds, 3 added ELR (Kafka's 4.0-IV1), 4 also partition change blocks (sparkraft.version 1)."""
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.metadata.delta import MetadataDelta
    from quorum.metadata.image import MetadataImage

    def replayed(*records):
        delta = MetadataDelta(MetadataImage.EMPTY)
        for r in records:
            delta.replay(r)
        return dict(delta.apply().features.levels)

    def mv(level):
        return pb.FeatureLevelRecord(name=MV, feature_level=level)

    assert replayed(mv(1)) == replayed(mv(2)) == {MV: 14}
    assert replayed(mv(3), pb.FeatureLevelRecord(name=ELR, feature_level=1)) == {MV: 23, ELR: 1}
    assert replayed(mv(4)) == {MV: 23, SPARKRAFT: 1}
    assert replayed(mv(4), mv(3)) == {MV: 23}, "a downgrade below 4 then turned the blocks off"
    assert replayed(mv(4), mv(29)) == {MV: 29, SPARKRAFT: 1}, "Kafka's levels leave sparkraft.version be"
