"""Holds on the log: a reader that keeps what it reads elsewhere (the streaming job keeps the audit
trail in its ``audit`` table) tells the controllers how far it has kept, and no controller's
retention deletes a record at or past that offset while the hold is live (quorum/node/retention.py).
That is how log cleanup never deletes audit entries the materialiser has not committed yet.

A hold is a LOG_HOLD_RECORD, replicated like any metadata, so every controller, a new leader and a
node started from a snapshot hold alike. It only moves forward, and is renewed at most once per
RENEWAL_MS: the job commits every micro-batch, and a record each time would itself be a change to
read (on an idle cluster, a micro-batch for the hold's own record, and so on). A hold not renewed
for ``metadata.log.hold.max.ms`` lapses (a job removed for good cannot keep the log forever); the
alert SparkraftHistoryGap then says what the tables miss."""
from __future__ import annotations

from quorum.controller.context import ControllerContext
from quorum.controller.side_api import DescribeLogHoldsRequest, HoldLogRequest, LogHolds
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.audit import LogHold

RENEWAL_MS = 30_000  # a hold moves at most this often (it only needs to trail the reader)
MAX_HOLDER = 256  # characters of a holder's name
MAX_HOLDS = 1000  # holders at once: each is kept in the image and every snapshot, so they are bounded
NONE = LogHold("", -1, 0)


def hold(ctx: ControllerContext, req: HoldLogRequest, now_ms: int) -> tuple[list, LogHold]:
    """The LogHoldRecord that sets, moves or releases ``req.holder``'s hold (none when it would not
    move: already there, or renewed less than RENEWAL_MS ago), and the hold as it then stands."""
    if not req.holder or len(req.holder) > MAX_HOLDER or not req.holder.isprintable():
        raise SparkraftError(Errors.INVALID_REQUEST, f"a log hold's holder is a name of 1 to {MAX_HOLDER} "
                                                     f"printable characters")
    current = ctx.spec.audit.hold(req.holder)
    if req.release:
        if current is None:
            return [], NONE
        return [pb.LogHoldRecord(holder=req.holder, offset=-1, time_ms=now_ms)], NONE
    end = ctx.next_write_offset
    if not 0 <= req.offset <= end:
        raise SparkraftError(Errors.INVALID_REQUEST, f"a log hold's offset is one of the log's, 0 to {end}; "
                                                     f"got {req.offset}")
    if current is not None and (req.offset <= current.offset or now_ms - current.time_ms < RENEWAL_MS):
        return [], current
    if current is None and len(ctx.spec.audit.holds) >= MAX_HOLDS:
        raise SparkraftError(Errors.POLICY_VIOLATION, f"the log has {MAX_HOLDS} holds already, the most it takes: "
                                                      f"release one (sparkraft log-holds release HOLDER)")
    return ([pb.LogHoldRecord(holder=req.holder, offset=req.offset, time_ms=now_ms)],
            LogHold(req.holder, req.offset, now_ms))


def describe(core, req: DescribeLogHoldsRequest, leader_id) -> LogHolds:
    """Every hold on the log (the committed image's), and how long one lives without renewal."""
    return LogHolds(core.image.audit.holds, core.settings.log_hold_max_ms)
