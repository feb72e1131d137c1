"""IsrExpansion: a partition leader's broker brings caught-up replicas back into the ISR.

In Kafka the leader of a partition adds a follower to the ISR (AlterPartition to the controller)
once the follower's fetches have reached the leader's high watermark. sparkraft brokers carry
metadata only, no partition data, so here a replica is caught up when its broker

- is registered, unfenced and not in controlled shutdown (in this broker's image), and
- has applied the metadata that made it a replica: the offset it last reported in a heartbeat to
  the active controller (DescribeCluster answers it) is at or past the record that last changed the
  partition's replicas. For partitions whose replicas have not changed since this broker's image
  started, that is the offset the image started at.

This is what returns a restarted broker to the ISRs it left (so a preferred election can move
leadership back to it) and what completes a reassignment (its added replicas join the ISR; the
controller then drops the removed ones).

The leader never shrinks the ISR itself: a broker that stops following the metadata log stops
heartbeating and the controller fences it, which takes it out of every ISR.

Work per round is what changed: the partitions this broker leads with replicas outside the ISR
are kept as a set, updated from the records each metadata update carries, and rebuilt from the
whole image only when the image is replaced (bootstrap, a snapshot). A change that gives the
leadership to another broker of a partition not watched is not even noted (a cluster-wide balance
is a million of them, and every broker sees each). A partition proposed is not
proposed again at the same partition epoch for ``retry_s`` (the answer's change arrives through
the log; a refusal is retried after that).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Callable, Iterable

from quorum.broker.metadata_client import MetadataUpdate
from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.metadata import change_block
from quorum.metadata.change_block import UNCHANGED_LEADER
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import RecordType

log = logging.getLogger(__name__)

Key = tuple[str, int]  # (topic id, partition)


class IsrExpansion:
    """The partition-leader side of ``brokers``: a broker process has one for itself; ``bench
    day2`` has one for the 28 brokers it simulates, so that each record costs it one look, not 28.
    ``broker_epoch(b)``: broker b's current epoch (its AlterPartition requests carry it)."""

    def __init__(self, brokers: int | Iterable[int], client, image: Callable[[], MetadataImage],
                 broker_epoch: Callable[[int], int], retry_s: float = 5.0, max_partitions_per_request: int = 10_000,
                 clock: Callable[[], float] = time.monotonic, offsets_every_s: float = 1.0):
        self.brokers = frozenset([brokers] if isinstance(brokers, int) else brokers)
        self._name = (f"Broker {next(iter(self.brokers))}" if len(self.brokers) == 1
                      else f"Brokers {min(self.brokers)}-{max(self.brokers)}")  # for the log
        self.client = client  # a ControllerClient
        self._image = image
        self._broker_epoch = broker_epoch
        self.retry_s = retry_s
        self.offsets_every_s = offsets_every_s  # how often to ask again for offsets a replica has yet to report
        self.max_partitions_per_request = max_partitions_per_request
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._rescan = True
        self._floor = -1  # the offset the image started at: what replicas not seen changing date from
        # partitions touched by records since the last round -> the offset of the latest such record:
        # looked at once the image has reached it (inside a transaction the image stays at its start)
        self._changed: dict[Key, int] = {}
        self._since: dict[Key, int] = {}  # offset of the record that last changed a partition's replicas
        self._watch: set[Key] = set()  # partitions this broker leads with replicas outside the ISR
        self._sent: dict[Key, tuple[int, float]] = {}  # proposed at (partition epoch, when)
        self._dirty = True  # records arrived since the last round
        self._again_at = 0.0  # when a round is due without new records (offsets to wait for, retries)
        self.expanded = 0  # partitions whose ISR this broker expanded (metrics, tests)

    # -- input: the metadata client's updates (its thread) ----------------------------------------
    def on_update(self, update: MetadataUpdate) -> None:
        with self._lock:
            self._dirty = True
            if update.reloaded:
                self._rescan, self._floor = True, update.last_offset
                self._since.clear()
                self._changed.clear()
            mine = self.brokers
            for offset, decoded in update.records:
                t = getattr(decoded, "type", None)  # None: a record type this broker does not know
                record = getattr(decoded, "message", None)
                if t is RecordType.PARTITION_CHANGE_RECORD:
                    self._note_change(record.topic_id, record.partition_id,
                                      record.leader if record.HasField("leader") else UNCHANGED_LEADER,
                                      record.HasField("replicas"), offset, mine)
                elif t is RecordType.PARTITION_CHANGE_BLOCK_RECORD:  # row i is the change at offset + i
                    self._note_block(record, offset, mine)
                elif t is RecordType.PARTITION_RECORD:
                    # a new partition matters only if this broker leads it short of replicas (creating
                    # two million partitions must not cost every broker two million set entries)
                    if record.leader in mine and len(record.isr) != len(record.replicas):
                        key = (record.topic_id, record.partition_id)
                        self._changed[key] = offset
                        self._since[key] = offset
                elif t is RecordType.REMOVE_TOPIC_RECORD:
                    self._rescan = True
        self._wake.set()

    def _note_change(self, topic_id: str, pid: int, leader: int, moved: bool, offset: int, mine) -> None:
        key = (topic_id, pid)
        if moved:
            self._since[key] = offset
        elif leader != UNCHANGED_LEADER and leader not in mine and key not in self._watch and key not in self._changed:
            return  # led by another broker now, and not ours before: nothing to look at
        self._changed[key] = offset

    def _note_block(self, block, offset: int, mine) -> None:
        """``_note_change`` of every row of a partition change block, read from its columns (a
        balance at 2M is a million rows, nearly all leaders moving between other brokers)."""
        pids = list(block.partition_ids)
        leaders = list(block.leaders) if block.leaders else None
        moved = [i != change_block.UNCHANGED for i in block.replicas] if block.replicas else None
        watch, changed, since = self._watch, self._changed, self._since
        start = 0
        for topic_id, n in zip(block.topic_ids, block.topic_rows):
            for i in range(start, start + n):
                if moved is not None and moved[i]:
                    since[topic_id, pids[i]] = changed[topic_id, pids[i]] = offset + i
                    continue
                if leaders is not None and leaders[i] != UNCHANGED_LEADER and leaders[i] not in mine:
                    key = (topic_id, pids[i])
                    if key in watch or key in changed:
                        changed[key] = offset + i
                    continue
                changed[topic_id, pids[i]] = offset + i
            start += n

    # -- one round -------------------------------------------------------------------------------
    def round(self) -> int:
        """Propose the ISR expansions due now; the number of partitions the controller expanded. A
        round with no new records and nothing to wait for costs nothing: the work is proportional
        to what changed, not to the partitions this broker leads."""
        now = self._clock()
        with self._lock:
            dirty, self._dirty = self._dirty, False
        if not dirty and now < self._again_at:
            return 0
        self._again_at = float("inf")
        image = self._image()
        watch = self._update_watch(image)
        if not watch:
            return 0
        able = {b for b, reg in image.cluster.brokers.items() if not reg.fenced and not reg.in_controlled_shutdown}
        if not any(b in able and b not in p.isr for p in watch.values() for b in p.replicas):
            return 0  # nobody to add until a broker's registration changes (a record: dirty again)
        try:
            reported = {b.broker_id: b.metadata_offset for b in self.client.describe_cluster().brokers}
        except SparkraftError as e:
            log.info("%s: ISR expansion waits: no broker offsets from the controllers (%s)", self._name, e)
            self._again_at = now + self.offsets_every_s
            return 0
        proposals = []
        for key, p in sorted(watch.items()):
            sent = self._sent.get(key)
            if sent is not None and sent[0] == p.partition_epoch and now < sent[1] + self.retry_s:
                self._again_at = min(self._again_at, sent[1] + self.retry_s)
                continue
            since = self._since.get(key, self._floor)
            joining = [b for b in p.replicas if b not in p.isr and b in able and reported.get(b, -1) >= since]
            if any(b not in p.isr and b in able and b not in joining for b in p.replicas):
                self._again_at = min(self._again_at, now + self.offsets_every_s)  # its next heartbeat
            if joining:
                proposals.append((p.leader, api.PartitionIsr(key[0], key[1], p.leader_epoch, p.partition_epoch,
                                                             p.isr + tuple(joining))))
                self._sent[key] = (p.partition_epoch, now)
        if proposals:  # an accepted one comes back as a record; a refused one is retried after retry_s
            self._again_at = min(self._again_at, now + self.retry_s)
        return self._propose(proposals)

    def _update_watch(self, image: MetadataImage) -> dict:
        """The partitions to look at, with their registrations in ``image``."""
        with self._lock:
            rescan = self._rescan
            visible = image.offset
            changed = [k for k, offset in self._changed.items() if offset <= visible]
            for k in changed:
                del self._changed[k]
            self._rescan = False
            if rescan and self._floor < 0:
                self._floor = image.offset
        led_short = self._led_short
        by_id = image.topics.by_id
        if rescan:
            self._watch = {(tid, pid) for tid, t in by_id.items() for pid, p in t.partitions.items() if led_short(p)}
            self._sent = {k: v for k, v in self._sent.items() if k in self._watch}
        self._watch.update(changed)  # candidates: the look below keeps those led short by us
        out = {}
        for key in list(self._watch):  # every round: a record that moved one away may have been skipped
            t = by_id.get(key[0])
            p = t.partitions.get(key[1]) if t is not None else None
            if p is not None and led_short(p):
                out[key] = p
            else:
                self._watch.discard(key)
                self._sent.pop(key, None)
        return out

    def _led_short(self, p) -> bool:
        """Led by one of our brokers with replicas outside the ISR."""
        return p.leader in self.brokers and len(p.isr) < len(p.replicas)

    def _propose(self, proposals: list[tuple[int, api.PartitionIsr]]) -> int:
        """Each (leader, new ISR) in its leader's AlterPartition requests."""
        done = 0
        refused: Counter = Counter()
        step = self.max_partitions_per_request
        by_leader: dict[int, list[api.PartitionIsr]] = {}
        for leader, isr in proposals:
            by_leader.setdefault(leader, []).append(isr)
        requests = [api.AlterPartitionRequest(leader, self._broker_epoch(leader), tuple(isrs[i:i + step]))
                    for leader, isrs in sorted(by_leader.items()) for i in range(0, len(isrs), step)]
        for request in requests:
            try:
                results = self.client.alter_partition(request)
            except SparkraftError as e:
                log.info("Broker %d: AlterPartition of %d partition(s) failed: %s", request.broker_id,
                         len(request.partitions), e)
                continue
            for r in results:
                if r.error is Errors.NONE:
                    done += 1
                else:
                    refused[r.error.name] += 1
        self.expanded += done
        if done or refused:
            log.info("%s: ISR expanded for %d partition(s)%s", self._name, done,
                     "; refused: " + ", ".join(f"{n} {e}" for e, n in sorted(refused.items())) if refused else "")
        return done

    # -- the thread ------------------------------------------------------------------------------
    def run(self, stop: threading.Event, interval_s: float = 1.0) -> None:
        """Rounds until ``stop``: after every metadata update, and every ``interval_s`` while some
        replica is waiting to be caught up."""
        while not stop.is_set():
            self._wake.wait(interval_s)
            self._wake.clear()
            if stop.is_set():
                return
            try:
                self.round()
            except Exception:  # never let one bad round end the broker's ISR upkeep
                log.exception("%s: ISR expansion round failed", self._name)

    def stop(self) -> None:
        self._wake.set()
