"""Metadata answers are joined from each topic's kept encoding: what a change touches must be
encoded again, and nothing else."""
from __future__ import annotations

from kafka_helpers import broker_with_orders
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.serial import entity_reader

from quorum.controller import api
from quorum.kafka.codec import response_type

ALL = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def ask(c, ctx, request=ALL):
    encoded = ctx.metadata_answers.answer(c.core.image, request, 12, ctx.cluster_id, 1)
    response, _ = entity_reader(response_type(3, 12))(encoded.body, 0)
    return {t.name: t for t in response.topics}, response


def test_only_changed_topics_are_encoded_again():
    c, ctx = broker_with_orders()
    c.request(api.CreateTopicsRequest((api.CreatableTopic("payments", 3, 2),)))
    answers = ctx.metadata_answers
    ask(c, ctx)
    assert answers.encoded_topics == 2
    ask(c, ctx)
    assert answers.encoded_topics == 2  # nothing changed: all kept
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("payments", 5),)))
    topics, _ = ask(c, ctx)
    assert answers.encoded_topics == 3 and len(topics["payments"].partitions) == 5
    c.request(api.DeleteTopicsRequest(("payments",)))
    topics, _ = ask(c, ctx)
    assert set(topics) == {"orders"} and answers.encoded_topics == 3


def test_a_fenced_broker_shows_as_offline_and_moves_leaders_in_the_next_answer():
    c, ctx = broker_with_orders()
    before, response = ask(c, ctx)
    assert {b.node_id for b in response.brokers} == {1, 2}
    epoch = c.core.image.cluster.broker(2).broker_epoch
    c.request(api.BrokerHeartbeatRequest(2, epoch, c.end_offset, want_fence=True))
    after, response = ask(c, ctx)
    assert {b.node_id for b in response.brokers} == {1}
    for p in after["orders"].partitions:
        assert p.leader_id == 1 and 2 not in p.isr_nodes and tuple(p.offline_replicas) == (2,)


def test_unknown_and_invalid_names_are_answered_per_topic():
    c, ctx = broker_with_orders()
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="nope"),
                                      MetadataRequestTopic(topic_id=None, name="bad/name"),
                                      MetadataRequestTopic(topic_id=None, name="orders")),
                              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    topics, _ = ask(c, ctx, request)
    assert int(topics["nope"].error_code) == 3 and int(topics["bad/name"].error_code) == 17
    assert int(topics["orders"].error_code) == 0 and c.core.image.topics.topic_by_name("nope") is None
