"""MigrationDriver: a migrating controller's thread that talks to ZooKeeper (Kafka's KRaftMigrationDriver).

It acts only while its node is the active controller, in rounds:

1. **claim** ZooKeeper for this KRaft epoch (zk_client.MigrationZk.claim; a foreign cluster id or
   a newer claim stops it with one line, kept in ``status()`` and logged once);
2. **read** the whole ZooKeeper-mode cluster and turn it into records (importer.py). In
   PRE_MIGRATION the records go to the controller as one ImportZkMetadataRequest: written with the
   move to MIGRATION as one transaction, or not at all. Either way the image rebuilt from what was
   read is what ZooKeeper holds: the mirror's starting point (after a failover, that makes the first
   round a full reconciliation);
3. **mirror**: diff the last image ZooKeeper got against the newest committed one (zk_view.py) and
   write the difference under the claim. A ZooKeeper outage only makes rounds fail: the quorum never
   waits for ZooKeeper, and the next round that gets through writes everything since the last
   image ZooKeeper took, so it catches up without divergence. A lost session (its ephemeral
   ``/controller`` gone) is claimed again.

Once the committed state is POST_MIGRATION and ZooKeeper holds everything before it, the driver
closes its session and ZooKeeper is not written again. The controller thread is never blocked: the
driver reads the committed image (immutable, swapped whole) directly.
"""
from __future__ import annotations

import base64
import logging
import secrets
import threading
import time
from typing import Any, Optional

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from quorum.controller.api import ImportZkMetadataRequest, MigrationDescription
from quorum.errors import SparkraftError
from quorum.metadata.features import ZkMigrationState
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.loader import image_from_records
from quorum.migration import znodes as z
from quorum.migration.importer import import_records
from quorum.migration.zk_client import Claim, ClaimLost, MigrationRefused, MigrationZk
from quorum.migration.zk_view import zk_writes

log = logging.getLogger(__name__)

ROUND_S = 0.05  # how often the mirror looks for new commits
RETRY_S = 1.0  # after ZooKeeper failed a round
REFUSED_RETRY_S = 5.0  # after a refusal (an operator must fix something)
IMPORT_TIMEOUT_S = 300.0


class MigrationDriver:
    def __init__(self, node: Any, connect: str, session_timeout_ms: int = 18000):
        self.node = node  # the ControllerNode
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self._zk: Optional[MigrationZk] = None
        self._claim: Optional[Claim] = None
        self._mirrored: Optional[MetadataImage] = None  # what ZooKeeper holds, as an image
        self._force_topics: tuple[str, ...] = ()
        self._finished = False
        self.error = ""  # why the migration cannot go on (status; logged once)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.rounds = 0  # mirror rounds that wrote something (tests, metrics)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "MigrationDriver":
        self._thread = threading.Thread(target=self._run, name=f"migration-{self.node.node_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._close()

    def status(self, committed_offset: int) -> MigrationDescription:
        """The driver's half of DescribeMigration (the state comes from the log)."""
        claim, mirrored = self._claim, self._mirrored
        known = claim is not None and mirrored is not None
        mirrored_offset = mirrored.offset if known else -1
        if self._finished:
            lag = 0  # finalized, and ZooKeeper got everything before it
        elif not known:
            lag = -1  # no claim, or ZooKeeper not read yet
        else:
            lag = max(0, committed_offset - mirrored_offset)
        return MigrationDescription(state="", zk_controller_epoch=claim.zk_controller_epoch if claim else -1,
                                    dual_write_lag_records=lag, mirrored_offset=mirrored_offset, error=self.error)

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        while not self._stop.is_set():
            pause = ROUND_S
            try:
                pause = self._round()
            except MigrationRefused as e:
                self._refused(str(e))
                pause = REFUSED_RETRY_S
            except z.MalformedZnode as e:
                self._refused(f"cannot import from ZooKeeper: {e}")
                self._mirrored = None
                pause = REFUSED_RETRY_S
            except ClaimLost as e:
                log.warning("Controller %d: %s; claiming it again", self.node.node_id, e)
                self._claim = None
                self._mirrored = None
            except (KazooException, KazooTimeoutError, OSError) as e:
                if not self.error.startswith("ZooKeeper"):
                    log.warning("Controller %d: ZooKeeper at %s is not answering (%s); the quorum goes on, "
                                "the mirror catches up when it answers", self.node.node_id, self.connect,
                                type(e).__name__)
                self.error = f"ZooKeeper at {self.connect} is not answering ({type(e).__name__})"
                pause = RETRY_S
            except SparkraftError as e:  # the import was refused or the node lost leadership meanwhile
                self._refused(f"the import was not written: {e}")
                self._mirrored = None
                pause = RETRY_S
            except Exception:
                log.error("Controller %d: the migration driver failed a round", self.node.node_id, exc_info=True)
                self._mirrored = None
                pause = REFUSED_RETRY_S
            self._stop.wait(pause)

    def _refused(self, message: str) -> None:
        if message != self.error:
            log.error("Controller %d: ZooKeeper migration: %s", self.node.node_id, message)
        self.error = message

    def _round(self) -> float:
        """One round; the pause before the next."""
        epoch = self.node.active_epoch
        if epoch is None or self._finished:
            if self._claim is not None:  # no longer active: the next active controller takes over
                self._claim, self._mirrored = None, None
            return ROUND_S * 4
        image = self.node.core.image
        state = image.features.zk_migration_state
        if state == ZkMigrationState.NONE:
            if image.features.metadata_version is not None:
                self._refused("this cluster was created in KRaft mode (migration state NONE): there is nothing to "
                              "migrate; remove zookeeper.metadata.migration.enable")
            return REFUSED_RETRY_S
        if state == ZkMigrationState.POST_MIGRATION and self._mirrored is None:
            self._finish(image)  # finalized before this controller mirrored anything: nothing left to write
            return ROUND_S
        zk = self._client()
        if self._claim is None or self._claim.kraft_epoch != epoch or zk.session_lost:
            self._mirrored = None
            self._claim = zk.claim(self.node.node_id, epoch, self.node.core.cluster_id)
        if self._mirrored is None:
            self._load(zk, image, state)
            image = self.node.core.image
        if image is not self._mirrored:
            writes = zk_writes(self._mirrored, image, self._claim.zk_controller_epoch, self._force_topics)
            zk.apply(writes, self._claim, z.encode_migration(self.node.node_id, epoch, image.offset,
                                                             image.provenance.epoch))
            if writes:
                self.rounds += 1
            self._mirrored, self._force_topics = image, ()
        self.error = ""
        if image.features.zk_migration_state == ZkMigrationState.POST_MIGRATION:
            self._finish(image)
        return ROUND_S

    def _load(self, zk: MigrationZk, image: MetadataImage, state: int) -> None:
        """Read ZooKeeper; import it in PRE_MIGRATION; start the mirror from what it holds."""
        started = time.monotonic()
        cluster = zk.read_cluster()
        imported = import_records(cluster, _random_uuid, image.topics.ids_by_name)
        if state == ZkMigrationState.PRE_MIGRATION:
            read_s = time.monotonic() - started
            self.node.submit(ImportZkMetadataRequest(tuple(imported.records), self._claim.zk_controller_epoch)
                             ).result(IMPORT_TIMEOUT_S)
            log.info("Controller %d imported the ZooKeeper-mode cluster: %d brokers, %d topics, %d partitions, "
                     "%d records (read %.1f s, written %.1f s); migration state MIGRATION, dual writes on",
                     self.node.node_id, len(cluster.brokers), len(cluster.topics), cluster.partition_count,
                     len(imported.records), read_s, time.monotonic() - started - read_s)
        self._mirrored = image_from_records(imported.records, Provenance(-1, -1))
        self._force_topics = imported.topics_without_id

    def _finish(self, image: MetadataImage) -> None:
        log.info("Controller %d: the migration is finalized (offset %d); ZooKeeper is no longer written",
                 self.node.node_id, image.offset)
        self._finished = True
        self._close()

    def _client(self) -> MigrationZk:
        if self._zk is None:
            zk = MigrationZk(self.connect, self.session_timeout_ms)
            try:
                zk.start(self.session_timeout_ms / 1000)
            except BaseException:
                zk.close()
                raise
            self._zk = zk
        return self._zk

    def _close(self) -> None:
        zk, self._zk = self._zk, None
        if zk is not None:
            zk.close()


def _random_uuid() -> str:
    """A Kafka Uuid (22 characters of URL-safe base64) for an imported topic without an id or an ACL:
    the driver's own, so that it never draws on the controller thread's generator."""
    while True:
        s = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode()[:22]
        if s[0] != "-":
            return s
