"""The features lifecycle at the controller: describe, upgrades refused for brokers that cannot
follow, safe and unsafe downgrades of metadata.version and eligible.leader.replicas.version, and
the features a broker must support to register."""
from __future__ import annotations

from controller_helpers import controller, create, register

from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.controller.settings import MV_MAX, ControllerSettings
from quorum.errors import Errors
from quorum.metadata.invariants import violations

ELR = "eligible.leader.replicas.version"
MV = "metadata.version"


def features(c, *updates, kind="UPGRADE", dry=False):
    return c.request(api.UpdateFeaturesRequest(tuple(updates), validate_only=dry, upgrade_type=kind))


def levels(c):
    return dict(c.core.image.features.levels)


def test_describe_lists_finalized_and_supported_levels():
    c, _ = controller(1)
    d = c.core.describe_features()
    assert d.finalized == ((MV, MV_MAX),)
    assert (MV, 1, MV_MAX) in d.supported and (ELR, 0, 1) in d.supported and ("kraft.version", 0, 1) in d.supported
    assert d.epoch == c.core.last_committed_offset
    features(c, (ELR, 1))
    assert c.core.describe_features().finalized == ((MV, MV_MAX), (ELR, 1))


def test_an_upgrade_a_broker_cannot_follow_is_refused():
    c = LocalController(ControllerSettings(seed=1, bootstrap_metadata_version=2))
    register(c, 0)
    register(c, 1, features=())  # an older broker: knows nothing of ELR
    r, mv = features(c, (ELR, 1), (MV, 3))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "Broker 1 only supports versions 0-0" in r.message
    assert mv.error is Errors.NONE and levels(c) == {MV: 3}  # each feature is answered on its own
    # and a broker that does not support a finalized level cannot register
    c.request(api.UnregisterBrokerRequest(1))
    features(c, (ELR, 1))
    e = c.expect_error(api.RegisterBrokerRequest(1, c.cluster_id, "Inc001xxxxxxxxxxxxx001", (), features=()))
    assert e.error is Errors.UNSUPPORTED_VERSION and "finalized version 1 of eligible.leader.replicas.version" in e.message


def test_dependencies_and_upgrade_types():
    c, _ = controller(1, bootstrap_metadata_version=2)
    (r,) = features(c, (ELR, 1))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "needs metadata.version 3" in r.message
    a, b = features(c, (MV, 3), (ELR, 1))  # together: fine
    assert a.error is b.error is Errors.NONE and levels(c) == {MV: 3, ELR: 1}
    (r,) = features(c, (MV, 2))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "without setting the upgrade type" in r.message
    (r,) = features(c, (MV, 2), kind="SAFE_DOWNGRADE")
    assert r.error is Errors.INVALID_UPDATE_VERSION and f"{ELR} 1 needs metadata.version 3" in r.message
    (r,) = features(c, (MV, 3), kind="SAFE_DOWNGRADE")  # not a downgrade: nothing to do
    assert r.error is Errors.NONE
    (r,) = features(c, (ELR, 2))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "supports only versions 0-1" in r.message
    (r,) = features(c, (MV, 0), kind="UNSAFE_DOWNGRADE")
    assert r.error is Errors.INVALID_UPDATE_VERSION and "cannot be lower than 1" in r.message
    (r,) = features(c, (MV, MV_MAX + 1), kind="SAFE_DOWNGRADE")
    assert r.error is Errors.INVALID_UPDATE_VERSION and "newer version" in r.message
    e = c.expect_error(api.UpdateFeaturesRequest(((MV, 2),), upgrade_type="SIDEWAYS"))
    assert e.error is Errors.INVALID_REQUEST
    assert levels(c) == {MV: 3, ELR: 1}


def test_a_safe_downgrade_loses_nothing_and_goes_through():
    c, _ = controller(3)
    create(c, "t", 2, 2)
    (r,) = features(c, (MV, 1), kind="SAFE_DOWNGRADE", dry=True)
    assert r.error is Errors.NONE and levels(c) == {MV: MV_MAX}  # a dry run changes nothing
    (r,) = features(c, (MV, 1), kind="SAFE_DOWNGRADE")
    assert (r.error, r.message) == (Errors.NONE, "") and levels(c) == {MV: 1}
    (r,) = features(c, (MV, MV_MAX))
    assert r.error is Errors.NONE and levels(c) == {MV: MV_MAX}


def test_an_unsafe_downgrade_is_refused_unless_asked_then_rewrites_and_says_what_it_dropped():
    c, epochs = controller(4)
    create(c, "t", -1, -1, assignments=((0, 1), (1, 2)))
    (r,) = c.request(api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(
        api.TopicPartition("t", 0), (2, 3)),)))
    assert r.error is Errors.NONE
    before = c.core.image.topics
    (r,) = features(c, (MV, 1), kind="SAFE_DOWNGRADE")
    assert r.error is Errors.INVALID_UPDATE_VERSION
    assert "might delete metadata information: 1 reassignment(s) in flight reverted" in r.message
    assert c.core.image.topics is before and levels(c) == {MV: MV_MAX}
    (r,) = features(c, (MV, 1), kind="UNSAFE_DOWNGRADE")
    assert r.error is Errors.NONE and r.message.startswith("dropped: 1 reassignment(s) in flight reverted")
    p = c.core.image.topics.topic_by_name("t").partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((0, 1), (), ())
    assert levels(c) == {MV: 1} and violations(c.core.image) == []
    # at metadata.version 1 there is no reassignment to start
    e = c.expect_error(api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(
        api.TopicPartition("t", 0), (2, 3)),)))
    assert e.error is Errors.UNSUPPORTED_VERSION and "needs metadata.version 2" in e.message


def test_the_first_active_controller_starts_at_the_formatted_levels():
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb

    formatted = (pb.FeatureLevelRecord(name=MV, feature_level=3), pb.FeatureLevelRecord(name=ELR, feature_level=1))
    c = LocalController(ControllerSettings(seed=1, bootstrap_records=formatted))
    assert levels(c) == {MV: 3, ELR: 1}
    c = LocalController(ControllerSettings(seed=1, bootstrap_records=(pb.FeatureLevelRecord(name=MV, feature_level=2),)))
    assert levels(c) == {MV: 2}
