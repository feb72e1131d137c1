"""Metadata answers are joined from each topic's kept encoding: what a change touches must be
encoded again, and nothing else."""
from __future__ import annotations

import time

from kafka_helpers import broker_with_orders
from kio.index import load_request_schema
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.serial import entity_reader

from quorum.controller import api
from quorum.kafka.codec import encode_entity, materialize, response_type
from quorum.kafka.metadata_answer import WARM_CHECK_TOPICS, WARM_FOR_SECONDS, MetadataAnswers, topic_layout

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


def _whole(version: int):
    """A whole-cluster Metadata request in ``version``."""
    return materialize(load_request_schema(3, version), {"topics": None, "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False,
                                                         "include_cluster_authorized_operations": False})


def test_versions_laid_out_alike_share_what_is_kept_and_each_is_what_kio_writes():
    c, ctx = broker_with_orders()
    answers = ctx.metadata_answers
    layouts = {topic_layout(v) for v in range(14)}
    assert topic_layout(10) == topic_layout(13) and topic_layout(9) != topic_layout(10)
    for _ in range(2):  # the second round is answered from what the first kept, across versions
        for version in range(14):
            encoded = answers.answer(c.core.image, _whole(version), version, ctx.cluster_id, 1)
            response, _ = entity_reader(response_type(3, version))(encoded.body, 0)
            assert encoded.body == encode_entity(response), version
            assert [t.name for t in response.topics] == ["orders"]
    assert answers.encoded_topics == len(layouts) < 14


def test_warming_encodes_what_changed_for_the_layouts_asked_and_answers_then_encode_nothing():
    c, ctx = broker_with_orders()
    c.request(api.CreateTopicsRequest((api.CreatableTopic("payments", 3, 2),)))
    answers = ctx.metadata_answers
    assert answers.warm(c.core.image) == 2  # the newest layout, before any client asks
    assert answers.warm(c.core.image) == 0
    cold = MetadataAnswers(ctx.listener).answer(c.core.image, _whole(13), 13, ctx.cluster_id, 1)
    assert answers.answer(c.core.image, _whole(13), 13, ctx.cluster_id, 1) == cold
    assert answers.encoded_topics == 2  # joined from what warming kept
    answers.answer(c.core.image, _whole(8), 8, ctx.cluster_id, 1)  # a client asks an older layout
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("payments", 5),)))
    assert answers.warm(c.core.image) == 2  # payments, in both layouts asked
    before = answers.encoded_topics
    topics = {t.name: t for t in entity_reader(response_type(3, 8))(
        answers.answer(c.core.image, _whole(8), 8, ctx.cluster_id, 1).body, 0)[0].topics}
    assert len(topics["payments"].partitions) == 5 and answers.encoded_topics == before



def test_layouts_no_client_asked_in_lately_are_no_longer_warmed():
    c, ctx = broker_with_orders()
    answers = ctx.metadata_answers
    assert answers.warm(c.core.image) == 1
    answers._asked = {v: time.monotonic() - WARM_FOR_SECONDS - 1 for v in answers._asked}  # ten quiet minutes
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("orders", 6),)))
    assert answers.warm(c.core.image) == 0  # a broker no client asks spends nothing on it
    answers.answer(c.core.image, _whole(13), 13, ctx.cluster_id, 1)  # asked again: kept warm again
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("orders", 7),)))
    assert answers.warm(c.core.image) == 1


def test_warming_leaves_a_topic_still_changing_for_a_later_pass():
    c, ctx = broker_with_orders()
    c.request(api.CreateTopicsRequest((api.CreatableTopic("payments", 3, 2),)))
    answers = ctx.metadata_answers
    first = c.core.image
    assert answers.warm(first) == 2 and answers.postponed == 0
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("orders", 6),)))
    changing = c.core.image
    assert answers.warm(changing, settled=first) == 0 and answers.postponed == 1  # orders changed since
    assert answers.warm(changing, settled=changing) == 1 and answers.postponed == 0  # and has settled
    topics = {t.name: t for t in entity_reader(response_type(3, 13))(
        answers.answer(changing, _whole(13), 13, ctx.cluster_id, 1).body, 0)[0].topics}
    assert len(topics["orders"].partitions) == 6 and answers.encoded_topics == 3
    broker_2 = c.core.image.cluster.brokers[2]
    c.request(api.BrokerHeartbeatRequest(2, broker_2.broker_epoch, c.end_offset, want_fence=True))
    fenced = c.core.image
    assert answers.warm(fenced, settled=changing) == 0 and answers.postponed == 2  # the brokers changed
    assert answers.warm(fenced, settled=fenced) == 2 and answers.postponed == 0


def test_a_pass_stops_where_it_finds_the_broker_behind_and_the_next_one_finishes():
    c, ctx = broker_with_orders()
    c.request(api.CreateTopicsRequest(tuple(api.CreatableTopic(f"t{i}", 1, 1) for i in range(2 * WARM_CHECK_TOPICS))))
    answers = ctx.metadata_answers
    image = c.core.image
    topics = len(image.topics.by_id)
    asked = []

    def behind() -> bool:
        asked.append(True)
        return True

    assert answers.warm(image, behind=behind) == WARM_CHECK_TOPICS  # asked after the first stretch
    assert len(asked) == 1 and answers.postponed == topics - WARM_CHECK_TOPICS
    assert answers.warm(image, behind=lambda: False) == topics - WARM_CHECK_TOPICS and answers.postponed == 0
    assert answers.warm(image) == 0
