"""BrokerMetadataClient: the metadata image a broker holds, kept current by following the log.

A broker never has the whole metadata pushed to it (DESIGN §7). It starts from an image at some
offset, then fetches the committed log from the next offset as an observer
(:class:`~quorum.rpc.log_reader.MetadataLogReader`), applies each record to its image through the
same :class:`~quorum.metadata.loader.MetadataLoader` the controllers use, and publishes each
applied chunk to listeners in offset order.

Where the first image comes from (``bootstrap_source``), newest first:

- ``cache``: the broker's own cache from its last run (``<metadata.log.dir>/metadata-cache``), if it
  belongs to this cluster and is intact (else it is discarded with a warning);
- ``delta``: a bootstrap source given by the caller, a callable that returns an image and the
  offset to read next, or None: ``broker start --warehouse`` passes the latest consistent cut of
  the Delta tables (delta_tables/bootstrap.py);
- ``log``: an empty image, replaying the log from offset 0.

Whichever it is, the client then reads only what comes after it. If the quorum's log no longer
starts at or before that offset (snapshots let the records go), the client downloads the leader's
snapshot with FetchSnapshot (``snapshot`` when that was its bootstrap) and follows from its end. It persists the cache
after every ``cache_every_records`` records (more for a big image, see ``_maybe_save_cache``; or
``cache_interval_s``), off its fetching thread,
and keeps every record it applies after the cache in its own copy of the log
(:class:`~quorum.broker.local_log.LocalMetadataLog`), flushed on a clean stop: a restart loads
the cache, replays that copy, and fetches only what it missed, while a stop writes no image.

Offsets. ``next_offset`` is the first log offset not yet applied, counting control records (which
occupy offsets but change no metadata); ``applied_offset`` = ``next_offset - 1`` is what the broker
reports in its heartbeats.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from quorum.broker.cache import MetadataCache
from quorum.broker.local_log import LocalMetadataLog
from quorum.errors import SparkraftError
from quorum.metadata.errors import ReplayError
from quorum.metadata.image import MetadataImage
from quorum.metadata.loader import MetadataLoader
from quorum.metadata.records import AnyRecord
from quorum.rpc.log_reader import LogRecord, MetadataLogReader, SnapshotRequired
from quorum.security.client import ClientSecurity
from quorum.snapshot.checkpoint import CheckpointError

log = logging.getLogger(__name__)

STOP_CHECK_RECORDS = 1024  # a stop waits for at most this many records being applied

BootstrapSource = Callable[[], Optional[tuple[MetadataImage, int]]]  # -> (image, next offset) or None


@dataclass(frozen=True, slots=True)
class MetadataUpdate:
    """What one applied chunk of the log changed: its records in offset order, and the image after
    them (``image.offset`` may be below ``last_offset`` inside a transaction: the image publishes
    a transaction only at its end)."""

    first_offset: int
    last_offset: int
    records: tuple[tuple[int, AnyRecord], ...]  # (offset, record); control records left out
    image: MetadataImage
    reloaded: bool = False  # the image was replaced by a snapshot's: records before it were not seen


@dataclass
class MetadataClientStats:
    """What the broker's status line and metrics report."""

    bootstrap_source: str = ""
    bootstrap_offset: int = -1
    bootstrap_seconds: float = 0.0
    records_fetched: int = 0  # records read from the quorum by this process (control ones included)
    high_watermark: int = -1  # the quorum's, as last seen
    cache_writes: int = 0
    records_replayed_locally: int = 0  # records of its own copy of the log replayed at the start
    snapshots_fetched: int = 0  # snapshots downloaded because the log no longer held what was next
    last_applied_append_ms: Optional[int] = None  # when the leader appended the last record applied
    apply_seconds: float = 0.0  # time spent applying records and snapshots (the rest: waiting for them)
    started: float = field(default_factory=time.monotonic)
    errors: list[str] = field(default_factory=list)


# Writing the cache costs about what replaying this many records per partition of the image costs
# (measured at 200,000 partitions: 1.4 us a partition written, 6 us a partition change replayed).
CACHE_COST_IN_RECORDS = 0.25
# While the client is behind the quorum, a cache waits until it has caught up (writing one competes
# with catching up, and what is still to come changes the image it would write), unless this many
# times the records that make one due are pending: a client that never catches up still writes.
BEHIND_CACHE_FACTOR = 4


def cache_due(pending: int, every: int, interval_due: bool, lag: int) -> bool:
    """Whether to write the cache now: ``pending`` records applied since the last one, ``every``
    the records that make one due, ``interval_due`` the interval passed, ``lag`` committed records
    not applied yet. A million-election balance at 2M used to set off a 2M-partition cache write
    in every broker process while it was still replaying the balance (a third of its CPU then)."""
    if pending <= 0:
        return False
    if lag > 0 and pending < BEHIND_CACHE_FACTOR * every:
        return False
    return pending >= every or interval_due


class BrokerMetadataClient:
    def __init__(self, bootstrap: str, cluster_id: str, cache_dir: Optional[str | Path] = None,
                 bootstrap_source: Optional[BootstrapSource] = None, cache_interval_s: float = 300.0,
                 cache_every_records: int = 100_000, fetch_wait_ms: int = 500,
                 retry_backoff_s: tuple[float, float] = (0.1, 5.0), security: Optional[ClientSecurity] = None):
        self.cluster_id = cluster_id
        self.cache = MetadataCache(cache_dir, cluster_id) if cache_dir is not None else None
        self.bootstrap_source = bootstrap_source
        self.cache_interval_s = cache_interval_s  # write the cache at least this often if anything changed
        self.cache_every_records = cache_every_records  # ...and after this many records
        self.fetch_wait_ms = fetch_wait_ms
        self.retry_backoff_s = retry_backoff_s
        self.stats = MetadataClientStats()
        self._reader = MetadataLogReader(bootstrap, cluster_id=cluster_id, timeout=10.0, security=security)
        self._loader = MetadataLoader()
        self._next_offset = 0
        self._listeners: list[Callable[[MetadataUpdate], None]] = []
        self._lock = threading.Lock()
        self._applied = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last_cache_write = time.monotonic()
        self._cached_offset = -1  # next_offset of the last cache written
        self._cache_writer: Optional[threading.Thread] = None
        self._local: Optional[LocalMetadataLog] = None  # opened by bootstrap() when there is a cache dir
        self._cache_dir = cache_dir

    # -- state ---------------------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        """The latest published image (never half a transaction)."""
        return self._loader.image

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def applied_offset(self) -> int:
        """The last log offset applied: what the broker reports in heartbeats."""
        return self._next_offset - 1

    @property
    def bytes_fetched(self) -> int:
        """Record batch bytes read from the quorum by this process."""
        return self._reader.bytes_fetched

    @property
    def lag(self) -> int:
        """Committed records not applied yet, as of the last answer from the quorum."""
        return max(0, self.stats.high_watermark - self._next_offset)

    def add_listener(self, listener: Callable[[MetadataUpdate], None]) -> None:
        """Called on the client's thread with every applied chunk, in offset order."""
        self._listeners.append(listener)

    # -- bootstrap -----------------------------------------------------------------------------
    def bootstrap(self) -> None:
        """Load the newest starting image (cache, the bootstrap source, or nothing); no fetching."""
        started = time.monotonic()
        candidates: list[tuple[str, MetadataImage, int]] = []
        if self.cache is not None:
            try:
                cached = self.cache.load()
            except CheckpointError as e:
                log.warning("Discarding the metadata cache: %s", e)
                self.cache.discard()
                cached = None
            if cached is not None:
                candidates.append(("cache", *cached))
        if self.bootstrap_source is not None:
            try:
                found = self.bootstrap_source()
            except Exception as e:  # an unreachable or broken source: fall back, say why
                log.warning("Bootstrap source failed (%s); using the cache or the log instead", e)
                self.stats.errors.append(f"bootstrap source: {e}")
                found = None
            if found is not None:
                candidates.append(("delta", *found))
        source, image, next_offset = max(candidates, key=lambda c: c[2], default=("log", MetadataImage.EMPTY, 0))
        self._install(image, next_offset)
        if self.cache is not None:
            self.cache.remove_abandoned()
            self._replay_local_copy()
            next_offset = self._next_offset
        self.stats.bootstrap_source = source
        self.stats.bootstrap_offset = next_offset - 1
        self.stats.bootstrap_seconds = time.monotonic() - started
        log.info("Metadata bootstrapped from %s at offset %d in %.2fs", source, next_offset - 1,
                 self.stats.bootstrap_seconds)

    def _replay_local_copy(self) -> None:
        """Replay this broker's own copy of the log from where the image is, as far as it goes
        (the records a stop did not write into the cache); or start the copy afresh there."""
        image, next_offset = self._loader.image, self._next_offset
        try:
            local = self._local = LocalMetadataLog(self._cache_dir)
            if not local.holds(next_offset):
                local.restart_at(next_offset)
                return
            for records in local.records_from(next_offset):
                self._apply(records, fetched=False)
                self.stats.records_replayed_locally += len(records)
        except Exception as e:  # the copy is a cache: one that does not open or replay is not used
            self._install(image, next_offset)  # nothing of it is kept: the image is the bootstrap's again
            self.stats.records_replayed_locally = 0
            if self._local is None:  # it did not open
                self._local_failed(e)
                return
            log.warning("Discarded the broker's copy of the metadata log (%s): fetching from offset %d",
                        e, next_offset)
            try:
                self._local.restart_at(next_offset)  # emptied: a fresh copy from here
            except Exception as again:
                self._local_failed(again)

    def _local_failed(self, e: Exception) -> None:
        """The copy is a cache: without it a restart fetches more, so say why and go on without."""
        log.warning("The broker's copy of the metadata log is not kept any more (%s): a restart fetches "
                    "what the metadata cache lacks", e)
        if self._local is not None:
            self._local.close()
        self._local = None

    def _install(self, image: MetadataImage, next_offset: int) -> None:
        with self._lock:
            self._loader.reset(image)
            self._next_offset = next_offset
            self._applied.notify_all()

    # -- following -----------------------------------------------------------------------------
    def poll(self, wait_ms: int = 0) -> int:
        """Fetch and apply what is committed after ``next_offset`` (waiting up to ``wait_ms`` for
        something new); the number of records applied."""
        try:
            chunk = self._reader.read(self._next_offset, wait_ms=wait_ms)
        except SnapshotRequired as e:
            if e.snapshot_id is None:
                raise SparkraftError(e.error, f"the broker's metadata is at offset {self.applied_offset} "
                                              f"but the quorum's log starts at {e.log_start_offset}") from None
            self._load_snapshot(e)
            return 0
        self.stats.high_watermark = chunk.high_watermark
        if chunk.records:
            self._apply(chunk.records)
        return len(chunk.records)

    def _load_snapshot(self, e: SnapshotRequired) -> None:
        """The log starts past what we hold: take the leader's snapshot (FetchSnapshot) instead."""
        started = time.monotonic()
        first = self._next_offset == self.stats.bootstrap_offset + 1 and self.stats.records_fetched == 0
        image = self._reader.load_snapshot(e.snapshot_id)
        self._install(image, e.snapshot_id.offset)
        with self._lock:  # (a stop takes the copy away under it)
            if self._local is not None:
                self._local.restart_at(e.snapshot_id.offset)
        self.stats.snapshots_fetched += 1
        took = time.monotonic() - started
        self.stats.apply_seconds += took
        if first:  # the bootstrap image was older than the log start: the snapshot is the bootstrap
            self.stats.bootstrap_source = "snapshot"
            self.stats.bootstrap_offset = e.snapshot_id.offset - 1
            self.stats.bootstrap_seconds += took
        log.info("Metadata at offset %d is older than the quorum's log start %d: loaded snapshot %s "
                 "with FetchSnapshot in %.2fs", e.offset - 1, e.log_start_offset, e.snapshot_id, took)
        update = MetadataUpdate(e.snapshot_id.offset - 1, e.snapshot_id.offset - 1, (), image, reloaded=True)
        for listener in self._listeners:
            try:
                listener(update)
            except Exception:
                log.exception("Metadata listener %r failed on a snapshot load", listener)

    def _apply(self, records: list[LogRecord], fetched: bool = True) -> None:
        """Apply ``records`` (fetched from the quorum, or replayed from the local copy). Fetched
        ones stop at a stop, within STOP_CHECK_RECORDS: what is left is fetched after a restart."""
        applied: list[tuple[int, AnyRecord]] = []
        started = time.monotonic()
        with self._lock:
            done = 0
            for r in records:
                if fetched and done % STOP_CHECK_RECORDS == 0 and self._stop.is_set():
                    break
                if r.offset != self._next_offset:
                    raise ReplayError(f"record at offset {r.offset} after {self._next_offset - 1}")
                if not r.control:
                    record = self._loader.replay_frame(r.data, r.offset, r.epoch)
                    if record is not None:  # (None: a block's continuation, applied with its block)
                        applied.append((r.offset, record))
                self._next_offset = r.offset + 1
                done += 1
            records = records[:done]
            image = self._loader.flush()
            if not records:
                return
            if fetched:
                self.stats.records_fetched += len(records)
            self.stats.last_applied_append_ms = records[-1].append_time_ms
            self._applied.notify_all()
            if fetched and self._local is not None:
                try:
                    self._local.append(records)
                except (OSError, SparkraftError) as e:
                    self._local_failed(e)
        self.stats.apply_seconds += time.monotonic() - started
        update = MetadataUpdate(records[0].offset, records[-1].offset, tuple(applied), image)
        for listener in self._listeners:
            try:
                listener(update)
            except Exception:  # a broken listener must not stop metadata
                log.exception("Metadata listener %r failed at offsets %d..%d", listener,
                              update.first_offset, update.last_offset)

    def wait_for(self, offset: int, timeout: float) -> bool:
        """Until ``applied_offset >= offset`` (True) or ``timeout`` seconds pass (False)."""
        with self._applied:
            return self._applied.wait_for(lambda: self._next_offset > offset, timeout)

    def run(self) -> None:
        """Follow the log until ``stop``; retries with backoff when the quorum is unreachable."""
        backoff = self.retry_backoff_s[0]
        try:
            self._follow(backoff)
        finally:
            self._reader.close()  # here, not in stop(): a long poll may still be waiting

    def _follow(self, backoff: float) -> None:
        while not self._stop.is_set():
            try:
                self.poll(self.fetch_wait_ms)
                backoff = self.retry_backoff_s[0]
            except SparkraftError as e:
                if self._stop.is_set():
                    return
                log.warning("Metadata fetch at offset %d failed: %s; retrying in %.1fs", self._next_offset, e,
                            backoff)
                self._stop.wait(backoff)
                backoff = min(self.retry_backoff_s[1], backoff * 2)
            self._maybe_save_cache()

    def _maybe_save_cache(self) -> None:
        """Every ``cache_every_records`` records or ``cache_interval_s``, on a background thread:
        the image is immutable, so it is serialised while the client goes on fetching (at 2M
        partitions a cache takes seconds to write). A big image waits for more records: a cache
        is written once replaying what came since it would cost about what writing it costs (see
        CACHE_COST_IN_RECORDS), so a storm of changes (a cluster-wide leader balance at 2M is half
        a million records) does not have the broker write its whole image five times over; and
        none is written while the client is behind (see cache_due)."""
        if self.cache is None or self._stop.is_set() or (self._cache_writer is not None
                                                         and self._cache_writer.is_alive()):
            return
        with self._lock:  # (a stop flushes and closes the copy under it)
            if self._local is not None and self._cached_offset > self._local.start_offset:
                self._local.release_below(self._cached_offset)
        pending = self._next_offset - self._cached_offset
        due = time.monotonic() - self._last_cache_write >= self.cache_interval_s
        every = max(self.cache_every_records,
                    int(self._loader.image.topics.partition_count() * CACHE_COST_IN_RECORDS))
        if cache_due(pending, every, due, self.lag):
            self._cache_writer = threading.Thread(target=self.save_cache, name="broker-metadata-cache",
                                                  daemon=True)
            self._cache_writer.start()

    def save_cache(self) -> None:
        """Persist the image and the offset it reaches (atomically)."""
        if self.cache is None:
            return
        with self._lock:
            image, next_offset, in_txn = self._loader.image, self._next_offset, self._loader.in_transaction
        self._last_cache_write = time.monotonic()
        if in_txn or next_offset == self._cached_offset:
            return  # mid-transaction the image is behind next_offset: next time
        try:
            self.cache.save(image, next_offset)
        except OSError as e:
            log.warning("Could not write the metadata cache: %s", e)
            return
        self._cached_offset = next_offset
        self.stats.cache_writes += 1

    def _keep_for_restart(self, local: Optional[LocalMetadataLog]) -> None:
        """The local copy of the log flushed (milliseconds), and a cache written only where there
        is none yet, or no copy. A cache being written in the background is not waited for then:
        it replaces the old one atomically, or is left unfinished and removed at the next start."""
        flushed = False
        if local is not None:
            try:
                local.flush()
                flushed = True
            except OSError as e:
                log.warning("Could not flush the broker's copy of the metadata log: %s; writing the cache", e)
            finally:
                local.close()
        if flushed and self.cache.path.exists():
            return
        if self._cache_writer is not None:
            self._cache_writer.join()
        self.save_cache()

    def reopen(self) -> None:
        """Fetch over new connections from now on (rotated TLS key files are read again)."""
        self._reader.reopen()

    def start(self) -> "BrokerMetadataClient":
        """Bootstrap, then follow the log on a background thread."""
        self.bootstrap()
        return self.follow()

    def follow(self) -> "BrokerMetadataClient":
        """Follow the log on a background thread from where the image is (after ``bootstrap``)."""
        self._thread = threading.Thread(target=self.run, name="broker-metadata", daemon=True)
        self._thread.start()
        return self

    def stop(self, save: bool = True) -> None:
        """Stop following; with ``save``, keep what a restart needs (:meth:`_keep_for_restart`).

        Nothing is applied once this returns. It does not wait for the fetching thread: that may
        be in a long poll (``fetch_wait_ms``), after which it ends by itself; a chunk being
        applied stops within STOP_CHECK_RECORDS records (at 2,000,000 partitions, the controlled
        shutdown's ~200,000 changes took the broker seconds to apply, and its exit waited)."""
        self._stop.set()
        with self._lock:  # no chunk is being applied after this, and none starts
            local, self._local = self._local, None
        if save and self.cache is not None:
            self._keep_for_restart(local)
        elif local is not None:
            local.close()
        if self._thread is None:
            self._reader.close()
