"""The Metadata response, encoded a topic at a time and kept.

Metadata is the request clients send most, and its answer grows with the cluster: even with
partitions packed by partition_encoding.py (~1.5 µs each, against ~12 µs through kio's writer) a
2,000,000-partition answer costs seconds. Topic
images are immutable and shared from one image to the next while a topic does not change, so each
topic's encoded bytes are kept, keyed by its TopicImage object and by what else its bytes depend
on (which brokers are live on this listener, the response version); an answer then joins kept
bytes and encodes only the topics that changed since they were last asked for. The bytes around
the topics array (the brokers, cluster id, controller id) are kept too, per version and set of live
brokers. They are written by kio's own field writers, so the whole is exactly what kio writes for
the whole response (a test compares them for every version). A single-topic answer costs ~17 µs
where encoding it all costs ~200 µs (30 brokers, 100 partitions).

Versions whose topics are laid out alike (v10 to v13, say) share what is kept. And what is kept is
kept warm: :meth:`MetadataAnswers.warm` encodes every topic the image changed for the layouts
clients asked in lately (and the newest when the listener opens), so that even the first
whole-cluster answer after a broker starts, or after a change that touched every topic, is joined
rather than encoded (at 2,000,000 partitions, ~0.1 s rather than ~2.5 s). The broker warms before
it opens a listener and then as its image changes (listeners.py); a broker no client asks spends
nothing on it after WARM_FOR_SECONDS.

What is kept is bounded by the cluster: entries of deleted topics are dropped when the kept ones
outnumber the image's topics by half again.
"""
from __future__ import annotations

import dataclasses
import functools
import operator
import threading
import time
from typing import Callable, Optional

from kio.schema.errors import ErrorCode

from quorum.controller.topics_control import validate_topic_name
from quorum.errors import Errors, SparkraftError
from quorum.kafka.codec import (
    Encoded,
    around,
    array_length,
    encode_entity,
    materialize,
    nested_type,
    response_type,
    topic_id_text,
    topic_uuid,
)
from quorum.kafka.partition_encoding import FLEXIBLE_FROM, topic_bytes
from quorum.metadata.image import MetadataImage
from quorum.metadata.pmap import EMPTY
from quorum.metadata.topics import NO_LEADER

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
METADATA_KEY = 3
NEWEST_VERSION = 13  # warmed from the start: what current clients ask in
WARM_FOR_SECONDS = 600.0  # a layout no client asked in for this long is no longer kept warm
WARM_CHECK_TOPICS = 200  # a warming pass asks whether the broker fell behind this often (topics)


_LAYOUTS: dict[tuple, int] = {}


@functools.cache
def topic_layout(version: int) -> int:
    """A number for what a topic's bytes depend on in Metadata ``version``: its fields' names and
    Kafka types, its partitions' too, and whether the version is flexible. Versions with the same
    layout encode a topic to the same bytes (for a topic that exists: only a missing one's name is
    null, and missing topics are not kept)."""
    topic_cls = nested_type(response_type(METADATA_KEY, version), "topics")
    partition_cls = nested_type(topic_cls, "partitions")
    layout = (version >= FLEXIBLE_FROM,) + tuple(
        tuple((f.name, f.metadata.get("kafka_type")) for f in dataclasses.fields(cls))
        for cls in (topic_cls, partition_cls))
    return _LAYOUTS.setdefault(layout, len(_LAYOUTS))


def listener_endpoints(image: MetadataImage, listener: str) -> dict[int, tuple]:
    """broker id -> (host, port, rack) of each unfenced broker with an endpoint on ``listener``."""
    out = {}
    for b in image.cluster.brokers.values():
        if b.fenced:
            continue
        for e in b.endpoints:
            if e.name == listener:
                out[b.broker_id] = (e.host, e.port, b.rack)
                break
    return out


_partition_id = operator.itemgetter(0)  # sorting (id, registration) pairs by id alone: 5x faster


def topic_partitions(topic, endpoints: dict, live: frozenset) -> list[tuple]:
    """Each partition's fields in Metadata, by partition id (as partition_encoding packs them)."""
    out = []
    append = out.append
    for pid, p in sorted(topic.partitions.items(), key=_partition_id):
        leader = p.leader
        if leader in endpoints:
            error = 0
        elif leader == NO_LEADER:
            error = Errors.LEADER_NOT_AVAILABLE
        else:
            error = Errors.LISTENER_NOT_FOUND if leader in live else Errors.LEADER_NOT_AVAILABLE
        replicas = p.replicas
        offline = () if live.issuperset(replicas) else tuple(r for r in replicas if r not in live)
        append((error, pid, leader, p.leader_epoch, replicas, p.isr, offline))
    return out


def _missing_topic(name: Optional[str], topic_id, error: Errors) -> dict:
    return {"error_code": error, "name": name, "topic_id": topic_id, "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


class MetadataAnswers:
    """Metadata responses for one listener, with each topic's encoding kept (thread-safe: handlers
    run on a pool; two threads encoding the same topic at once only do the work twice)."""

    def __init__(self, listener: str):
        self.listener = listener
        self._kept: dict[tuple[int, str], tuple] = {}  # (topic layout, topic id) -> (TopicImage, live key, bytes)
        # version -> when a client last asked in it; the newest counts as asked at the start
        self._asked: dict[int, float] = {NEWEST_VERSION: time.monotonic()}
        self._cluster: Optional[tuple] = None  # (ClusterImage, what _brokers makes of it)
        self._frames: dict[tuple, tuple[bytes, bytes]] = {}  # the bytes around the topics array
        self._lock = threading.Lock()
        self.encoded_topics = 0  # topics encoded (not taken from what was kept): tests, benchmarks
        self.postponed = 0  # topics the last warm() left for later: they were still changing

    def answer(self, image: MetadataImage, req, version: int, cluster_id: str, controller_id: int,
               may_describe: Optional[Callable[[str], bool]] = None) -> Encoded:
        """``may_describe(topic)``: whether the client may see a topic (None: every one). Topics it
        may not are left out of a whole-cluster answer and answered TOPIC_AUTHORIZATION_FAILED
        when named, whether they exist or not (as Kafka does: nothing about them leaks)."""
        self._asked[version] = time.monotonic()
        endpoints, live, live_key = self._brokers(image)
        cls = response_type(METADATA_KEY, version)
        topic_cls = nested_type(cls, "topics")
        topics = image.topics
        asked = req.topics
        parts: list[bytes] = []
        if asked is None or (version == 0 and not asked):
            for name in sorted(topics.ids_by_name):
                if may_describe is not None and not may_describe(name):
                    continue
                parts.append(self._topic_bytes(topics.by_id[topics.ids_by_name[name]], version, topic_cls,
                                               endpoints, live, live_key))
        else:
            for t in asked:
                name = getattr(t, "name", None)
                tid = getattr(t, "topic_id", None)
                if name is None and tid is not None and tid.int != 0:
                    topic = topics.topic(topic_id_text(tid))
                    missing = _missing_topic(None, tid, Errors.UNKNOWN_TOPIC_ID) if topic is None else None
                else:
                    try:
                        validate_topic_name(name or "")
                    except SparkraftError:
                        topic, missing = None, _missing_topic(name, None, Errors.INVALID_TOPIC_EXCEPTION)
                    else:
                        topic = topics.topic_by_name(name)
                        missing = _missing_topic(name, None, Errors.UNKNOWN_TOPIC_OR_PARTITION) if topic is None else None
                if may_describe is not None and (topic is not None or name) and \
                        not may_describe(topic.name if topic is not None else name):
                    topic, missing = None, _missing_topic(name, tid if name is None else None,
                                                          Errors.TOPIC_AUTHORIZATION_FAILED)
                if missing is not None:
                    parts.append(encode_entity(materialize(topic_cls, missing)))
                else:
                    parts.append(self._topic_bytes(topic, version, topic_cls, endpoints, live, live_key))
        self._prune(image)
        prefix, suffix = self._around_topics(cls, version, endpoints, live_key, cluster_id, controller_id)
        return Encoded(b"".join([prefix, array_length(cls.__flexible__, len(parts)), *parts, suffix]),
                       cls.__flexible__)

    def _brokers(self, image: MetadataImage) -> tuple:
        """(endpoints, live broker ids, their key) for the image's cluster part, kept while it is
        the same object (a ClusterImage changes only when a broker's registration does)."""
        kept = self._cluster
        if kept is not None and kept[0] is image.cluster:
            return kept[1]
        endpoints = listener_endpoints(image, self.listener)
        live = frozenset(b.broker_id for b in image.cluster.brokers.values() if not b.fenced)
        answer = (endpoints, live, (live, tuple(sorted(endpoints.items()))))
        self._cluster = (image.cluster, answer)
        return answer

    def _around_topics(self, cls, version: int, endpoints: dict, live_key, cluster_id: str,
                       controller_id: int) -> tuple[bytes, bytes]:
        """The response's bytes before its topics array and after it, kept per version and brokers."""
        key = (version, live_key, cluster_id, controller_id)
        kept = self._frames.get(key)
        if kept is not None:
            return kept
        rest = {"throttle_time": 0, "cluster_id": cluster_id, "controller_id": controller_id, "topics": [],
                "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED, "error_code": ErrorCode.none,
                "brokers": [{"node_id": b, "host": h, "port": p, "rack": r}
                            for b, (h, p, r) in sorted(endpoints.items())]}
        if len(self._frames) > 64:  # brokers come and go: what is kept stays small
            self._frames.clear()
        kept = self._frames[key] = around(materialize(cls, rest), "topics")
        return kept

    def warm(self, image: MetadataImage, settled: Optional[MetadataImage] = None,
             behind: Callable[[], bool] = lambda: False) -> int:
        """Encode each of the image's topics not kept as it is now, for every layout asked for in
        the last WARM_FOR_SECONDS; returns how many were encoded. ``settled``: an earlier image (the
        last pass's); a topic that changed since, or every topic if the brokers did, is still
        changing (a cluster-wide balance changes most topics every second, a rolling restart the
        brokers every few) and is left for a later pass, counted in ``postponed``, instead of being
        encoded again and again while the storm lasts (an answer that needs it meanwhile encodes
        it itself). ``behind``: asked every WARM_CHECK_TOPICS topics; once it says the broker's
        metadata is behind the quorum, the rest is postponed too (a pass over 2M partitions takes
        seconds, and a broker replaying a balance needs them more)."""
        self.postponed = 0
        endpoints, live, live_key = self._brokers(image)
        now = time.monotonic()
        versions = {}  # one version per layout
        for version, asked in sorted(self._asked.items()):
            if now - asked <= WARM_FOR_SECONDS:
                versions.setdefault(topic_layout(version), version)
        before = self.encoded_topics
        topics = list(image.topics.by_id.values())
        if settled is not None and versions:
            # the brokers changing (a roll) changes every topic's encoding (its offline replicas)
            then = settled.topics.by_id if settled.cluster is image.cluster else EMPTY
            steady = [t for t in topics if then.get(t.topic_id) is t]
            self.postponed, topics = len(topics) - len(steady), steady
        for version in versions.values():
            topic_cls = nested_type(response_type(METADATA_KEY, version), "topics")
            for i, topic in enumerate(topics):
                if i % WARM_CHECK_TOPICS == 0 and i and behind():
                    self.postponed += len(topics) - i
                    self._prune(image)
                    return self.encoded_topics - before
                self._topic_bytes(topic, version, topic_cls, endpoints, live, live_key)
        self._prune(image)
        return self.encoded_topics - before

    def _topic_bytes(self, topic, version: int, topic_cls, endpoints: dict, live: frozenset, live_key) -> bytes:
        key = (topic_layout(version), topic.topic_id)
        kept = self._kept.get(key)
        if kept is not None and kept[0] is topic and kept[1] == live_key:
            return kept[2]
        data = topic_bytes(topic_cls, version, {
            "error_code": Errors.NONE, "name": topic.name, "topic_id": topic_uuid(topic.topic_id), "is_internal": False,
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}, topic_partitions(topic, endpoints, live))
        self._kept[key] = (topic, live_key, data)
        self.encoded_topics += 1
        return data

    def _prune(self, image: MetadataImage) -> None:
        if len(self._kept) <= len(image.topics.by_id) * 3 // 2 + 100:
            return
        with self._lock:
            by_id = image.topics.by_id
            self._kept = {k: v for k, v in self._kept.items() if by_id.get(k[1]) is v[0]}
