"""Controller registrations (KIP-919) on a LocalController: written from 3.7-IV0 on, once per change,
and checked by feature upgrades as Kafka's controller checks them (its messages)."""
from controller_helpers import controller

from quorum.controller import api
from quorum.errors import Errors
from quorum.metadata.records import RecordType, decode_record

EP = api.BrokerEndpoint("CONTROLLER", "127.0.0.1", 9093)
INCARNATION = "Ctl000xxxxxxxxxxxxx002"


def register(c, controller_id=2, incarnation=INCARNATION, mv=(14, 33), endpoints=(EP,)):
    return c.request(api.RegisterControllerRequest(controller_id, incarnation, endpoints,
                                                   (("metadata.version", *mv), ("group.version", 0, 1))))


def records_of(c, kind):
    return [r for b in c.log if not b.control for r in map(decode_record, b.records) if r.type is kind]


def test_a_registration_is_written_once_and_again_when_it_changes():
    c, _ = controller(1)
    register(c)
    registered = c.core.image.cluster.controllers[2]
    assert registered.incarnation_id == INCARNATION and [(e.name, e.port) for e in registered.endpoints] == \
        [("CONTROLLER", 9093)]
    assert registered.feature("metadata.version").max_version == 33
    written = len(records_of(c, RecordType.REGISTER_CONTROLLER_RECORD))
    register(c)  # the same again: nothing new in the log
    assert len(records_of(c, RecordType.REGISTER_CONTROLLER_RECORD)) == written
    register(c, incarnation="Ctl001xxxxxxxxxxxxx002")  # a restart
    assert c.core.image.cluster.controllers[2].incarnation_id == "Ctl001xxxxxxxxxxxxx002"
    assert len(records_of(c, RecordType.REGISTER_CONTROLLER_RECORD)) == written + 1


def test_before_3_7_iv0_a_registration_is_refused_with_kafkas_error():
    c, _ = controller(1)
    c.request(api.UpdateFeaturesRequest((("metadata.version", 14),), upgrade_type="UNSAFE_DOWNGRADE"))
    e = c.expect_error(api.RegisterControllerRequest(2, INCARNATION, (EP,), ()))
    assert e.error is Errors.UNSUPPORTED_VERSION
    assert e.message == "The current MetadataVersion is too old to support controller registrations."
    assert not c.core.image.cluster.controllers


def test_a_feature_level_a_registered_controller_does_not_support_is_refused():
    c, _ = controller(0)
    c.request(api.UpdateFeaturesRequest((("metadata.version", 17),), upgrade_type="UNSAFE_DOWNGRADE"))
    register(c, mv=(14, 20))
    [r] = c.request(api.UpdateFeaturesRequest((("metadata.version", 23),)))
    assert r.error is Errors.INVALID_UPDATE_VERSION
    assert r.message == "Invalid update version 23 for feature metadata.version. Controller 2 only supports " \
                        "versions 14-20"
    [r] = c.request(api.UpdateFeaturesRequest((("share.version", 1),)))
    assert r.message == "Invalid update version 1 for feature share.version. Controller 2 does not support " \
                        "this feature."
    register(c, mv=(14, 33), incarnation="Ctl001xxxxxxxxxxxxx002")  # upgraded and restarted
    [r] = c.request(api.UpdateFeaturesRequest((("metadata.version", 23),)))
    assert r.error is Errors.NONE


def test_a_registration_past_the_bounds_is_refused_whole():
    c, _ = controller(1)
    for endpoints in ((EP, EP), tuple(api.BrokerEndpoint(f"L{i}", "h", 1) for i in range(65)),
                      (api.BrokerEndpoint("CONTROLLER", "evil\nhost", 1),)):
        e = c.expect_error(api.RegisterControllerRequest(2, INCARNATION, endpoints, ()))
        assert e.error is Errors.INVALID_REQUEST, endpoints
    assert not c.core.image.cluster.controllers


def test_unregistering_a_controller_follows_kafkas_rules():
    c, _ = controller(0)
    register(c, controller_id=2)
    e = c.expect_error(api.UnregisterControllerRequest(c.core.node_id))
    assert (e.error, e.message) == (Errors.INVALID_REQUEST, "Controller cannot unregister itself while it is active.")
    e = c.expect_error(api.UnregisterControllerRequest(7))
    assert (e.error, e.message) == (Errors.CONTROLLER_ID_NOT_REGISTERED, "Controller ID 7 is not currently registered.")
    c.request(api.UnregisterControllerRequest(2))
    assert 2 not in c.core.image.cluster.controllers
    assert c.expect_error(api.UnregisterControllerRequest(2)).error is Errors.CONTROLLER_ID_NOT_REGISTERED


def test_before_4_4_iv2_a_controller_cannot_be_unregistered():
    c, _ = controller(0)
    register(c, controller_id=2)
    [r] = c.request(api.UpdateFeaturesRequest((("metadata.version", 32),), upgrade_type="SAFE_DOWNGRADE"))
    assert r.error is Errors.NONE, r
    e = c.expect_error(api.UnregisterControllerRequest(2))
    assert (e.error, e.message) == (Errors.UNSUPPORTED_VERSION,
                                    "The current MetadataVersion is too old to support controller unregistration.")
    assert 2 in c.core.image.cluster.controllers
