"""An in-memory log: the reference implementation and the simulation's disk.

``crash()`` drops every batch that was not flushed, the way a power cut drops
what sat in the page cache; the simulation calls it when it kills a node.
"""
from __future__ import annotations

from typing import Iterator, Sequence

from quorum.log import batch as batchcodec
from quorum.log.api import LogError, OffsetAndEpoch, ReplicatedLog
from quorum.log.batch import Batch
from quorum.log.index import EpochIndex, LogStartFromEpochs, batch_holding, batches_below


class MemoryLog(LogStartFromEpochs, ReplicatedLog):
    def __init__(self) -> None:
        self._batches: list[Batch] = []
        self._encoded: list[bytes] = []
        self._bases: list[int] = []  # base offset of each batch, for bisect
        self._epochs = EpochIndex()
        self._flushed = 0

    # -- properties -------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        return self._batches[-1].end_offset if self._batches else self._epochs.base.offset

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def last_epoch(self) -> int:
        return self._epochs.last_epoch

    # -- writes -----------------------------------------------------------------------------
    def append_as_leader(self, records: Sequence[bytes], epoch: int, append_time_ms: int,
                         control: bool = False) -> Batch:
        self._epochs.check_epoch(epoch)
        b = Batch(self.end_offset, epoch, append_time_ms, tuple(records), control)
        self._add(b, batchcodec.encode(b))
        return b

    def append_as_follower(self, data: bytes) -> int:
        batches = batchcodec.decode(data)  # verifies every CRC before anything is appended
        self._epochs.check_continues(batches, self.end_offset)
        view = memoryview(data)
        for b, h in zip(batches, batchcodec.scan(data, verify=False)):
            self._add(b, bytes(view[h.position:h.position + h.size]))
        return self.end_offset

    def _add(self, b: Batch, encoded: bytes) -> None:
        self._epochs.note(b.epoch, b.base_offset)
        self._batches.append(b)
        self._encoded.append(encoded)
        self._bases.append(b.base_offset)

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise LogError(f"cannot truncate to {offset}, below the log start {self.start_offset} (a snapshot)")
        keep = batches_below(self._bases, self.end_offset, offset)
        del self._batches[keep:], self._encoded[keep:], self._bases[keep:]
        end = self.end_offset
        self._epochs.truncate(end)
        self._flushed = min(self._flushed, end)

    def advance_start(self, snapshot: OffsetAndEpoch) -> None:
        if snapshot.offset <= self.start_offset:
            return
        if snapshot.offset > self.end_offset:
            raise LogError(f"log start {snapshot.offset} would be past the log end {self.end_offset}")
        drop = 0
        while drop < len(self._batches) and self._batches[drop].end_offset <= snapshot.offset:
            drop += 1
        del self._batches[:drop], self._encoded[:drop], self._bases[:drop]
        self._epochs.trim(snapshot)

    def reset_to(self, snapshot: OffsetAndEpoch) -> None:
        self._batches, self._encoded, self._bases = [], [], []
        self._epochs.reset(snapshot)
        self._flushed = snapshot.offset  # the simulation's disk: as durable as the snapshot itself

    def flush(self) -> None:
        self._flushed = self.end_offset

    def crash(self) -> None:
        """Forget every unflushed batch, as a machine that lost power would. (Records below the log
        start are in a snapshot, which is durable: the log then restarts empty at its start.)"""
        if self._flushed < self.start_offset:
            self.reset_to(self._epochs.base)
        else:
            self.truncate_to(self._flushed)

    # -- reads ------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> bytes:
        if offset >= self.end_offset:
            return b""
        if offset < self.start_offset:
            raise LogError(f"offset {offset} is below the log start {self.start_offset}")
        out, size = [], 0
        for enc in self._encoded[batch_holding(self._bases, offset):]:
            if out and size + len(enc) > max_bytes:
                break
            out.append(enc)
            size += len(enc)
        return b"".join(out)

    def batches(self, start: int, end: int) -> Iterator[Batch]:
        for b in self._batches[batch_holding(self._bases, start):]:
            if b.base_offset >= end:
                break
            if b.end_offset > start:
                yield b

    def control_batches(self) -> Iterator[Batch]:
        return iter([b for b in self._batches if b.control and b.end_offset > self.start_offset])

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return self._epochs.end_offset_for(epoch, self.end_offset)
