"""A broker's own copy of the metadata log after its cache, so that a stop writes milliseconds.

The cache (cache.py) is a whole image: seconds to write at 2,000,000 partitions, and a stop that
wrote it made every step of a rolling restart wait for it. Instead, every record the broker applies
is also appended here as it arrives (to the page cache; flushed at a clean stop), and a restart
loads the cache and replays this log from the cache's offset before it fetches from the quorum,
as Kafka's brokers keep their metadata log beside its snapshots. Each cache written lets the
segments below it go. It is a cache too: damage or a gap only means fetching from the quorum.

The files are ordinary log segments (quorum/log/file_log.py, ``<cache dir>/metadata-cache-log/``),
so ``sparkraft dump-log`` reads them.
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Iterator, Sequence

from quorum.log.api import LogError, OffsetAndEpoch
from quorum.log.errors import StorageError
from quorum.log.file_log import FileLog
from quorum.rpc.log_reader import LogRecord, new_log_record

log = logging.getLogger(__name__)

LOG_DIR = "metadata-cache-log"
SEGMENT_BYTES = 8 << 20  # small, so a cache written lets most of the copy go


class LocalMetadataLog:
    """Committed records from ``start_offset`` to ``end_offset``, as the quorum's log holds them.
    Used from one thread (the broker's metadata fetcher, then its stop)."""

    def __init__(self, directory: str | os.PathLike, segment_bytes: int = SEGMENT_BYTES):
        self.path = Path(directory) / LOG_DIR
        try:
            self._log = FileLog(self.path, segment_bytes=segment_bytes)
        except (StorageError, LogError) as e:
            log.warning("Discarding the broker's copy of the metadata log: %s", e)
            shutil.rmtree(self.path, ignore_errors=True)
            self._log = FileLog(self.path, segment_bytes=segment_bytes)

    @property
    def start_offset(self) -> int:
        return self._log.start_offset

    @property
    def end_offset(self) -> int:
        return self._log.end_offset

    def holds(self, offset: int) -> bool:
        """Whether the records from ``offset`` on (to the end) are all here."""
        return self.start_offset <= offset <= self.end_offset

    def restart_at(self, offset: int) -> None:
        """The image now reaches ``offset`` some other way: nothing here is needed, and the copy
        goes on from there."""
        if not (self.start_offset == offset == self.end_offset):
            self._log.reset_to(OffsetAndEpoch(offset, 0))

    def append(self, records: Sequence[LogRecord]) -> None:
        """Records that follow ``end_offset``, in order: one batch per run of the same epoch,
        append time and kind, as the leader wrote them."""
        if records[0].offset != self.end_offset:
            raise LogError(f"records from offset {records[0].offset} do not follow the copy's end {self.end_offset}")
        start = 0
        head = records[0]
        for i, r in enumerate(records):
            if r.epoch != head.epoch or r.append_time_ms != head.append_time_ms or r.control != head.control:
                self._append_run(records, start, i)
                start, head = i, r
        self._append_run(records, start, len(records))

    def _append_run(self, records: Sequence[LogRecord], start: int, end: int) -> None:
        head = records[start]
        self._log.append_as_leader([r.data for r in records[start:end]], head.epoch, head.append_time_ms, head.control)

    def records_from(self, offset: int) -> Iterator[list[LogRecord]]:
        """The records from ``offset`` to the end, a batch's worth at a time."""
        for batch in self._log.batches(offset, self.end_offset):
            base, epoch, append_ms, control = batch.base_offset, batch.epoch, batch.append_time_ms, batch.control
            yield [new_log_record(LogRecord, (base + i, epoch, append_ms, data, control, None))
                   for i, data in enumerate(batch.records) if base + i >= offset]

    def release_below(self, offset: int) -> None:
        """A cache reaches ``offset``: the segments wholly before it may go."""
        if self.start_offset < offset <= self.end_offset:
            self._log.advance_start(OffsetAndEpoch(offset, 0))

    def flush(self) -> None:
        self._log.flush()

    def close(self) -> None:
        self._log.close()
