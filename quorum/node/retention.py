"""Retention on a running node: when a snapshot is written, delete the oldest snapshots while the
log and snapshots together are over ``metadata.max.retention.*`` (the newest is always kept), and
move the log start to the oldest snapshot left, so segments wholly below it are deleted. A reader's
hold on the log (quorum/controller/log_holds.py) stops it short: the log start never passes the
lowest live hold, whatever the retention settings say."""
from __future__ import annotations

import logging
import time
from typing import Optional

from quorum.snapshot.retention import Retention

log = logging.getLogger(__name__)


def apply_retention(node_id: int, core, file_log, store, retention: Retention, now_ms: int,
                    hold: Optional[int] = None) -> None:
    """On the event-loop thread (the core moves the log start). ``hold``: the lowest offset a
    reader holds the log from (None: no hold)."""
    while True:
        ids = store.ids()
        if len(ids) < 2 or ids[1].offset > core.high_watermark:
            break
        total = file_log.size_bytes + sum(store.size(s) or 0 for s in ids)
        age_ms = time.time() * 1000 - store.modified_ms(ids[0])
        if not retention.over(total, age_ms):
            break
        if hold is not None and ids[1].offset > hold:
            log.debug("Node %d keeps the log from offset %d: a reader holds it", node_id, hold)
            break
        store.delete(ids[0])
        core.advance_log_start(ids[1], now_ms)
        log.info("Node %d deleted snapshot %s (retention); the log starts at offset %d", node_id, ids[0],
                 file_log.start_offset)
    ids = store.ids()
    if ids and file_log.start_offset < ids[0].offset <= core.high_watermark and file_log.start_offset > 0:
        core.advance_log_start(ids[0], now_ms)  # an older snapshot went away by other means
