"""PendingReplies: FIFO answers, and the slow-operation log line an operator reads at 2M."""
from __future__ import annotations

import concurrent.futures
import logging
import time

from quorum.controller.core import Operation
from quorum.node import pending_replies
from quorum.node.pending_replies import PendingReplies


def _op(name: str, batches: int = 1, records: int = 3) -> Operation:
    return Operation([[b"r"] * records for _ in range(batches)], reply=name, name=name)


def test_answers_in_order_once_committed_and_replayed():
    replies = PendingReplies(1)
    first, second = concurrent.futures.Future(), concurrent.futures.Future()
    a = replies.add(_op("A"), first, epoch=1)
    b = replies.add(_op("B"), second, epoch=1)
    b.batch_committed(0, 5)
    replies.settle(10)
    assert not first.done() and not second.done()  # B waits for A
    a.batch_committed(0, 2)
    replies.settle(3)
    assert first.result() == "A" and not second.done()  # B's record is not replayed yet
    replies.settle(5)
    assert second.result() == "B"


def test_a_slow_operation_is_logged_with_where_its_time_went(caplog):
    replies = PendingReplies(7)
    future = concurrent.futures.Future()
    arrived = time.monotonic() - 3 * pending_replies.SLOW_OPERATION_S  # queued a while ago
    p = replies.add(_op("ElectLeadersRequest", batches=2, records=4), future, epoch=1, arrived=arrived,
                    started=arrived + 1)
    p.batch_committed(0, 3)
    p.batch_committed(1, 7)
    with caplog.at_level(logging.INFO, logger=pending_replies.__name__):
        replies.settle(7)
    assert future.result() == "ElectLeadersRequest"
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("Controller 7: slow operation ElectLeadersRequest (8 records in 2 batches) took ")
    assert "queued 1.00s, handled in " in line and "committed " in line and "replayed and answered " in line


def test_an_operation_without_records_that_waited_for_others_logs_nothing(caplog):
    replies = PendingReplies(7)
    future = concurrent.futures.Future()
    replies.add(Operation([], reply="hb", name="BrokerHeartbeatRequest"), future, epoch=1,
                arrived=time.monotonic() - 3 * pending_replies.SLOW_OPERATION_S)
    with caplog.at_level(logging.INFO, logger=pending_replies.__name__):
        replies.settle(0)
    assert future.result() == "hb" and not caplog.records


def test_a_quick_operation_logs_nothing(caplog):
    replies = PendingReplies(7)
    future = concurrent.futures.Future()
    p = replies.add(_op("CreateTopicsRequest"), future, epoch=1)
    p.batch_committed(0, 0)
    with caplog.at_level(logging.INFO, logger=pending_replies.__name__):
        replies.settle(0)
    assert future.result() == "CreateTopicsRequest" and not caplog.records
