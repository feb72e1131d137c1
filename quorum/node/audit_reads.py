"""DescribeAudit: the audit entries a controller's own log holds (docs/use/audit.md), for
``sparkraft audit --bootstrap-controller`` without a warehouse. The image keeps only the chain's
head, so the answer comes from the log: one bounded read on the event loop, as a Fetch is, then
the entries picked out here. Needs DESCRIBE on the cluster (the registry's row)."""
from __future__ import annotations

import concurrent.futures

from quorum.controller.api import AuditEntries, DescribeAuditRequest
from quorum.controller.audit import entries_in
from quorum.log.batch import decode

MAX_ENTRIES = 1000  # one answer's most
READ_BYTES = 1 << 20  # what one answer reads of the log at most (the next page goes on from there)


def audit_entries(node, req: DescribeAuditRequest, described: concurrent.futures.Future) -> concurrent.futures.Future:
    """The entries from ``req.from_offset`` up to what is committed (the core's answer, ``described``,
    is nothing: the log holds them)."""
    limit = max(1, min(req.max_entries or MAX_ENTRIES, MAX_ENTRIES))
    out: concurrent.futures.Future = concurrent.futures.Future()

    def pick(read: concurrent.futures.Future) -> None:
        if read.exception() is not None:
            out.set_exception(read.exception())
            return
        log_start, end, data = read.result()
        start = max(req.from_offset, log_start)
        entries, after = entries_in(decode(data), start, end, limit)
        out.set_result(AuditEntries(tuple(entries), after if data else max(start, end), log_start))

    node.raft.read_committed(req.from_offset, READ_BYTES).add_done_callback(pick)
    return out
