"""The controllers' Kafka listener is one adapter over the request registry: every controller
request with a Kafka API is answered there, or is named here with why not; and where a broker
answers the same request, the controller's listener uses the very same handler."""
from __future__ import annotations

from quorum.controller.registry import ROWS
from quorum.kafka.apis import BROKER
from quorum.kafka.controller_apis import CONTROLLER

# Kafka API key -> why a controller's Kafka listener does not answer it
NOT_ON_A_CONTROLLER = {
    3: "Metadata: Apache Kafka's controllers do not serve it either (describe topics through a broker)",
    75: "DescribeTopicPartitions: a broker's request in Apache Kafka",
    50: "DescribeUserScramCredentials: a broker's request in Apache Kafka",
}
# answered with the controller's own view, not the broker's; Fetch: a broker's listener refuses
# data clients, a controller's serves its metadata log to Kafka's brokers
OWN_HANDLERS = {18: "ApiVersions: the controller's features", 60: "DescribeCluster: the controllers",
                1: "Fetch: the metadata log"}


def test_every_registry_request_with_a_kafka_api_is_answered_or_named():
    keys = {row.kafka.key for row in ROWS if row.kafka is not None}
    missing = {k for k in keys if k not in CONTROLLER.implemented and k not in NOT_ON_A_CONTROLLER}
    assert not missing, f"registry requests with a Kafka API the controllers' listener neither answers nor names: {missing}"
    assert set(NOT_ON_A_CONTROLLER) <= keys, "named as not served, but no longer in the registry"
    assert not set(NOT_ON_A_CONTROLLER) & set(CONTROLLER.implemented)


def test_a_request_both_listeners_answer_has_one_handler():
    for key in set(CONTROLLER.implemented) & set(BROKER.implemented):
        if key in OWN_HANDLERS:
            assert CONTROLLER.implemented[key][2] is not BROKER.implemented[key][2]
            continue
        assert CONTROLLER.implemented[key] == BROKER.implemented[key], key


def test_a_controller_advertises_no_data_plane_and_the_quorum_requests():
    advertised = set(CONTROLLER.supported)
    assert not {0, 2, 3, 10, 22} & advertised  # Produce, ListOffsets, Metadata, FindCoordinator...
    assert {18, 55, 60, 80, 81} <= advertised
    # what Apache Kafka's brokers send their controllers: the metadata log (Fetch v13+, by topic id),
    # registration, heartbeats, ISR changes, producer ids, forwarded admin requests
    assert {62, 63, 56, 67, 58} <= advertised and CONTROLLER.supported[1][0] == 13
    assert CONTROLLER.supported[60][0] == 1, "DescribeCluster v0 names no endpoint type: brokers only"
