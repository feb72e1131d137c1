"""The Go checker (tests/linearizability/checker, Porcupine) on histories written by hand: it accepts
what a linearizable store may answer and refuses each anomaly it is there for (a write that
vanishes, two creations of one topic both succeeding, a stale read), and an operation whose outcome
is unknown may have happened or not."""
from __future__ import annotations

import pytest
from histories import History, check

MS = 1_000_000


def history(*ops) -> History:
    """(op, key, value, call ms, return ms or None, result) each, one client per operation."""
    h = History()
    for i, (op, key, value, call, ret, result) in enumerate(ops):
        h.record(i, op, key, value, call * MS, None if ret is None else ret * MS, result)
    return h


@pytest.mark.parametrize("name, ops", [
    ("sequential", [("create", "t", "", 0, 1, "ok"), ("set", "t", "5", 2, 3, "ok"), ("read", "t", "", 4, 5, "=5"),
                    ("delete", "t", "", 6, 7, "ok"), ("set", "t", "6", 8, 9, "missing"),
                    ("create", "t", "", 10, 11, "ok"), ("read", "t", "", 12, 13, "=")]),
    ("concurrent creations, one wins", [("create", "t", "", 0, 10, "ok"), ("create", "t", "", 1, 9, "exists")]),
    ("an unknown creation that happened",
     [("create", "t", "", 0, None, "unknown"), ("create", "t", "", 5, 6, "exists")]),
    ("an unknown creation that did not", [("create", "t", "", 0, None, "unknown"), ("create", "t", "", 5, 6, "ok")]),
    # a client's creation whose first attempt's answer was lost (recorded as an unknown operation of
    # its own, tests/histories.py) and whose retry, after another client deleted the topic, created
    # it again: one call, two creations (seen in a SIGKILL of the active controller)
    ("a retried creation carried out twice",
     [("create", "t", "", 0, None, "unknown"), ("create", "t", "", 0, 8, "ok"), ("set", "t", "5", 2, 3, "ok"),
      ("delete", "t", "", 4, 5, "ok"), ("set", "t", "6", 9, 10, "ok")]),
    ("overlapping write and read", [("create", "t", "", 0, 1, "ok"), ("set", "t", "5", 2, 10, "ok"),
                                    ("read", "t", "", 3, 4, "=")]),
])
def test_what_a_linearizable_store_may_answer_is_accepted(name, ops):
    assert check(history(*ops), "unit-accepted").startswith("linearizable")


@pytest.mark.parametrize("name, ops", [
    ("a creation that vanished", [("create", "t", "", 0, 1, "ok"), ("create", "t", "", 2, 3, "ok")]),
    ("two creations both won", [("create", "t", "", 0, 10, "ok"), ("create", "t", "", 1, 9, "ok")]),
    ("a stale read", [("create", "t", "", 0, 1, "ok"), ("set", "t", "5", 2, 3, "ok"), ("read", "t", "", 4, 5, "=")]),
    ("a deletion of nothing that succeeded", [("delete", "t", "", 0, 1, "ok")]),
    ("the same, without the lost attempt", [("create", "t", "", 0, 8, "ok"), ("set", "t", "5", 2, 3, "ok"),
                                            ("delete", "t", "", 4, 5, "ok"), ("set", "t", "6", 9, 10, "ok")]),
])
def test_each_anomaly_is_refused_and_the_history_kept(name, ops):
    with pytest.raises(AssertionError, match="NOT linearizable") as caught:
        check(history(*ops), "unit-refused")
    kept = str(caught.value).split("the history is kept in ")[1].split(" ")[0]
    assert open(kept).read().count("\n") == len(ops)
