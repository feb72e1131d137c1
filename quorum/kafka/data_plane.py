"""What a sparkraft broker does not serve, answered so that a Kafka client gives up at once.

A sparkraft broker holds metadata, not data: it has no partitions' logs, no group or transaction
coordinator. Leaving Produce and Fetch out of ApiVersions made clients retry until their own
timeouts (librdkafka's producer: five minutes, then ``Local: Message timed out``). So the requests
a producer or consumer starts with are advertised and answered with an error that every client
treats as final, INVALID_REQUEST ("sent to an incompatible broker"), with a message saying why
where the version has the field (librdkafka's consumer shows FindCoordinator's; its producer,
kafka-python's and aiokafka's show only the error's name), and a line in the broker's log.
"""
from __future__ import annotations

import logging
import threading
import time

from quorum.errors import Errors

log = logging.getLogger(__name__)
LOG_EVERY_S = 30.0  # a refusal is logged at most this often (with how many since)

METADATA_ONLY = ("this is a sparkraft broker: it serves cluster metadata and admin requests only, "
                 "not {what} (point data clients at Apache Kafka brokers)")
REFUSAL = Errors.INVALID_REQUEST


class _RefusalLog:
    """Most clients show only the error's name (kafka-python's INVALID_REQUEST says: "sent to an
    incompatible broker; see the broker logs"), so the broker's log says what was refused, from
    whom, at most once per LOG_EVERY_S."""

    def __init__(self):
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._since = 0

    def note(self, ctx, what: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < LOG_EVERY_S:
                self._since += 1
                return
            since, self._since, self._last = self._since, 0, now
        who = ctx.caller.host if ctx.caller is not None else "?"
        log.warning("Broker %d: refused %s from %s: %s%s", ctx.broker_id, what, who, _message(what),
                    f" ({since} more refused since the last report)" if since else "")


_refusals = _RefusalLog()


def _message(what: str) -> str:
    return METADATA_ONLY.format(what=what)


def produce(ctx, req, version: int) -> dict:
    _refusals.note(ctx, "Produce")
    message = _message("Produce")
    return {"throttle_time": 0, "responses": [
        {"name": getattr(t, "name", None), "topic_id": getattr(t, "topic_id", None), "partition_responses": [
            {"index": p.index, "error_code": REFUSAL, "base_offset": -1,
             "log_start_offset": -1, "record_errors": [], "error_message": message}
            for p in t.partition_data]}
        for t in req.topic_data]}


def fetch(ctx, req, version: int) -> dict:
    _refusals.note(ctx, "Fetch")
    # A top-level error (v7+) ends the whole fetch; each partition says it too, for older readers.
    return {"throttle_time": 0, "error_code": REFUSAL, "session_id": 0, "responses": [
        {"topic": getattr(t, "topic", None), "topic_id": getattr(t, "topic_id", None), "partitions": [
            {"partition_index": p.partition, "error_code": REFUSAL, "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": None}
            for p in t.partitions]}
        for t in req.topics]}


def list_offsets(ctx, req, version: int) -> dict:
    _refusals.note(ctx, "ListOffsets")
    return {"throttle_time": 0, "topics": [
        {"name": getattr(t, "name", None), "partitions": [
            {"partition_index": p.partition_index, "error_code": REFUSAL, "offset": -1,
             "leader_epoch": -1} for p in t.partitions]}
        for t in req.topics]}


def find_coordinator(ctx, req, version: int) -> dict:
    _refusals.note(ctx, "FindCoordinator")
    message = _message("group or transaction coordination")
    keys = getattr(req, "coordinator_keys", None) or [getattr(req, "key", "")]
    return {"throttle_time": 0, "error_code": REFUSAL, "error_message": message, "node_id": -1, "host": "",
            "port": -1, "coordinators": [{"key": k, "node_id": -1, "host": "", "port": -1, "error_code": REFUSAL,
                                          "error_message": message} for k in keys]}


def init_producer_id(ctx, req, version: int) -> dict:
    _refusals.note(ctx, "InitProducerId")
    return {"throttle_time": 0, "error_code": REFUSAL, "producer_id": -1, "producer_epoch": -1}
