"""Holds on the log (quorum/controller/log_holds.py): a reader's hold is a replicated record that
only moves forward and is renewed at most once per RENEWAL_MS, a release removes it, a refused one
writes nothing and is audited, the live holds' lowest offset is what retention keeps, and a
snapshot carries them."""
from __future__ import annotations

import pytest
from controller_helpers import controller

from quorum.controller import api, registry
from quorum.controller.log_holds import MAX_HOLDER, RENEWAL_MS
from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.audit import AuditImage, LogHold
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import decode_record

JOB = "materialize:/warehouse"


def written(c, since: int) -> list:
    return [decode_record(r).message for b in c.log if not b.control for i, r in enumerate(b.records)
            if b.base_offset + i >= since]


def hold(c, offset: int, at: int, holder: str = JOB) -> LogHold:
    return c.request(api.HoldLogRequest(holder, offset), at)


def test_a_hold_is_a_record_every_controller_replays_and_renewals_are_not_audited():
    c, _ = controller(1)
    start = c.end_offset
    assert hold(c, 5, 1000) == LogHold(JOB, 5, 1000)
    assert written(c, start) == [pb.LogHoldRecord(holder=JOB, offset=5, time_ms=1000)]  # no audit entry
    assert c.core.image.audit.holds == (LogHold(JOB, 5, 1000),)
    described = registry.row_of(api.DescribeLogHoldsRequest()).read(c.core, api.DescribeLogHoldsRequest(), 1)
    assert described == api.LogHolds((LogHold(JOB, 5, 1000),), 7 * 24 * 3600 * 1000)


def test_a_hold_only_moves_forward_and_at_most_once_per_renewal_interval():
    c, _ = controller(1)
    hold(c, 4, 1000)
    start = c.end_offset
    assert hold(c, 7, 1000 + RENEWAL_MS - 1) == LogHold(JOB, 4, 1000)  # too soon: trails the reader a little
    assert hold(c, 3, 1000 + RENEWAL_MS) == LogHold(JOB, 4, 1000)  # never back
    assert written(c, start) == []
    assert hold(c, 7, 1000 + RENEWAL_MS) == LogHold(JOB, 7, 1000 + RENEWAL_MS)
    assert c.core.image.audit.hold(JOB).offset == 7


def test_a_release_removes_the_hold_and_is_audited():
    c, _ = controller(1)
    hold(c, 5, 1000)
    hold(c, 7, 2000, holder="other")
    start = c.end_offset
    assert c.request(api.HoldLogRequest(JOB, release=True), 3000).offset == -1
    record, entry = written(c, start)
    assert record == pb.LogHoldRecord(holder=JOB, offset=-1, time_ms=3000)
    assert (entry.request, list(entry.resources), list(entry.changes)) == ("HoldLog", [f"LOG_HOLD:{JOB}"], ["release"])
    assert c.core.image.audit.holds == (LogHold("other", 7, 2000),)
    start = c.end_offset
    c.request(api.HoldLogRequest(JOB, release=True), 4000)  # nothing to release: nothing written but its entry
    assert [type(m).__name__ for m in written(c, start)] == ["AuditRecord"]


@pytest.mark.parametrize("holder, offset", [("", 1), ("x" * (MAX_HOLDER + 1), 1), ("a\nb", 1), (JOB, -1),
                                            (JOB, 10 ** 9)])
def test_a_hold_that_makes_no_sense_is_refused_audited_and_changes_nothing(holder, offset):
    c, _ = controller(1)
    before, start = c.core.image, c.end_offset
    e = c.expect_error(api.HoldLogRequest(holder, offset), 1000)
    assert e.error is Errors.INVALID_REQUEST and "log hold" in e.message
    assert c.core.image.audit.holds == before.audit.holds
    (entry,) = written(c, start)
    assert entry.error_code == Errors.INVALID_REQUEST.value


def test_the_floor_is_the_lowest_live_hold_and_a_stale_one_lapses():
    image = AuditImage(holds=(LogHold("a", 50, 1000), LogHold("b", 20, 0)))
    assert image.floor(now_ms=1000, max_age_ms=5000) == 20
    assert image.floor(now_ms=5500, max_age_ms=5000) == 50  # b not renewed for 5.5 s
    assert image.floor(now_ms=10 ** 12, max_age_ms=-1) == 20  # -1: until released
    assert image.floor(now_ms=7000, max_age_ms=5000) is None
    assert AuditImage().floor(0, 5000) is None


def test_a_snapshot_carries_the_holds():
    c, _ = controller(1)
    hold(c, 5, 1000)
    hold(c, 2, 1000, holder="other")
    image = c.core.image
    delta = MetadataDelta(MetadataImage.EMPTY)
    for record in image.records():
        delta.replay(record)
    assert delta.apply(image.provenance).audit == image.audit


def test_the_holds_are_bounded(monkeypatch):
    """Each hold lives in the image and every snapshot: past MAX_HOLDS a new holder is refused in
    one line naming the way out, while a holder already there still renews its hold."""
    from quorum.controller import log_holds

    monkeypatch.setattr(log_holds, "MAX_HOLDS", 3)
    c, _ = controller(1)
    for i in range(3):
        hold(c, 1, 1000, holder=f"job-{i}")
    e = c.expect_error(api.HoldLogRequest("job-3", 1), 2000)
    assert e.error is Errors.POLICY_VIOLATION and "release one" in e.message
    assert len(c.core.image.audit.holds) == 3
    assert hold(c, 2, 1000 + RENEWAL_MS, holder="job-0").offset == 2
