"""The migrating controller's ZooKeeper I/O (kazoo): claim the cluster's controllership, read
everything in Kafka's layout, and apply the mirror's writes under the claim.

The claim is Kafka's (KafkaZkClient.tryRegisterKRaftControllerAsActiveController): one multi-op
that replaces ``/controller`` with this node (an ephemeral znode naming its KRaft epoch) and bumps
``/controller_epoch`` conditionally on the version read, so a ZooKeeper-mode controller, or an
older KRaft one, can no longer act. Every later write is a multi-op that starts with a check of
``/controller_epoch``'s version: once another controller claims ZooKeeper, this one's writes fail
as a whole (ClaimLost) and change nothing.

Reads are pipelined (kazoo's async gets, a window at a time): a 200,000-partition cluster is
200,000 state znodes, and one round trip each would take minutes.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, RolledBackError
from kazoo.retry import KazooRetry

from quorum.migration import znodes as z
from quorum.migration.importer import ZkCluster
from quorum.migration.zk_view import ZkWrite

log = logging.getLogger(__name__)

READ_WINDOW = 2000  # gets in flight at once
MAX_OPS = 500  # per multi-op (ZooKeeper's jute.maxbuffer is 1 MiB for the whole request)
MAX_BYTES = 512 * 1024


class MigrationRefused(Exception):
    """ZooKeeper is not this quorum's to take over (another cluster, a newer claim): one line."""


class ClaimLost(Exception):
    """Another controller claimed ZooKeeper after us: our write changed nothing."""


@dataclass(frozen=True)
class Claim:
    kraft_epoch: int
    zk_controller_epoch: int
    epoch_version: int  # /controller_epoch's version after our claim: every write checks it


class MigrationZk:
    def __init__(self, connect: str, session_timeout_ms: int = 18000):
        self.connect = connect
        self.zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                              connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
                              command_retry=None, logger=logging.getLogger("kazoo.client.migration"))
        self.session_lost = False  # the session (and our ephemeral /controller) is gone: claim again
        self.zk.add_listener(self._on_state)
        self._parents: set[str] = set()  # znodes known to exist (parents of the mirror's creates)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self.session_lost = True

    def start(self, timeout_s: float = 10.0) -> None:
        self.zk.start(timeout_s)

    def close(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # closing after ZooKeeper went away
            log.debug("closing the ZooKeeper client", exc_info=True)

    # ------------------------------------------------------------------ the claim
    def cluster_id(self) -> Optional[str]:
        try:
            data, _ = self.zk.get(z.CLUSTER_ID)
        except NoNodeError:
            return None
        return z.decode_cluster_id(data)

    def claim(self, node_id: int, kraft_epoch: int, cluster_id: str) -> Claim:
        """Become the cluster's controller in ZooKeeper; MigrationRefused if it is not ours to take."""
        found = self.cluster_id()
        if found is None:
            raise MigrationRefused(f"ZooKeeper at {self.connect} holds no Kafka cluster ({z.CLUSTER_ID} is missing)")
        if found != cluster_id:
            raise MigrationRefused(f"ZooKeeper at {self.connect} holds cluster {found}, not this quorum's cluster "
                                   f"{cluster_id}: format the controllers with --cluster-id {found}")
        for _ in range(5):  # a race with another claimer: read again
            self.session_lost = False
            try:
                data, epoch_stat = self.zk.get(z.CONTROLLER_EPOCH)
                epoch = z.decode_controller_epoch(data)
            except NoNodeError:
                data, epoch_stat, epoch = None, None, 0
            try:
                current, controller_stat = self.zk.get(z.CONTROLLER)
                holder = z.decode_controller(current)
            except NoNodeError:
                holder, controller_stat = None, None
            if holder is not None and holder.kraft_controller_epoch is not None:
                if holder.kraft_controller_epoch > kraft_epoch or (
                        holder.kraft_controller_epoch == kraft_epoch and holder.broker_id != node_id):
                    raise MigrationRefused(f"ZooKeeper's controller is KRaft controller {holder.broker_id} of the newer "
                                           f"epoch {holder.kraft_controller_epoch} (this one is {kraft_epoch})")
            t = self.zk.transaction()
            if epoch_stat is None:
                t.create(z.CONTROLLER_EPOCH, str(epoch + 1).encode())
            else:
                t.set_data(z.CONTROLLER_EPOCH, str(epoch + 1).encode(), version=epoch_stat.version)
            if controller_stat is not None:
                t.delete(z.CONTROLLER, version=controller_stat.version)
            t.create(z.CONTROLLER, z.encode_controller(node_id, kraft_epoch), ephemeral=True)
            results = t.commit()
            if not any(isinstance(r, Exception) for r in results):
                version = 0 if epoch_stat is None else epoch_stat.version + 1
                log.info("Controller %d claimed ZooKeeper's cluster %s: controller epoch %d (KRaft epoch %d)",
                         node_id, cluster_id, epoch + 1, kraft_epoch)
                return Claim(kraft_epoch, epoch + 1, version)
        raise MigrationRefused("another controller keeps claiming ZooKeeper at the same time")

    # ------------------------------------------------------------------ reading the cluster
    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def _get_many(self, paths: list[str]) -> list[Optional[tuple[bytes, object]]]:
        """(data, stat) of each path, None where it does not exist; pipelined."""
        out: list[Optional[tuple[bytes, object]]] = []
        for start in range(0, len(paths), READ_WINDOW):
            pending = [self.zk.get_async(p) for p in paths[start:start + READ_WINDOW]]
            for result in pending:
                try:
                    out.append(result.get())
                except NoNodeError:
                    out.append(None)
        return out

    def read_cluster(self) -> ZkCluster:
        """Everything the import takes from ZooKeeper; MalformedZnode names the first bad znode."""
        cluster = ZkCluster(cluster_id=self.cluster_id())
        ids = self._children(z.BROKER_IDS)
        for name, got in zip(ids, self._get_many([f"{z.BROKER_IDS}/{i}" for i in ids])):
            if got is not None:
                if not name.isdigit():
                    raise z.MalformedZnode(f"{z.BROKER_IDS}/{name}", "not a broker id")
                cluster.brokers.append(z.decode_broker(int(name), got[0]))
        names = self._children(z.TOPICS)
        for name, got in zip(names, self._get_many([z.topic_path(n) for n in names])):
            if got is not None:
                cluster.topics.append(z.decode_topic(name, got[0]))
        keys = [(t.name, p) for t in cluster.topics for p in sorted(t.replicas)]
        for (topic, p), got in zip(keys, self._get_many([z.partition_state_path(t, p) for t, p in keys])):
            if got is not None:
                cluster.states[(topic, p)] = z.decode_partition_state(topic, p, got[0], got[1].version)
        self._read_configs(cluster)
        self._read_acls(cluster)
        try:
            data, _ = self.zk.get(z.PRODUCER_ID_BLOCK)
            if data:
                cluster.producer_id_block_end = z.decode_producer_id_block(data)[1]
        except NoNodeError:
            pass
        return cluster

    def _read_configs(self, cluster: ZkCluster) -> None:
        keys = []
        for kind in z.CONFIG_ENTITY_TYPES:
            for segment in self._children(f"{z.CONFIG}/{kind}"):
                keys.append((kind, segment))
                if kind == "users":
                    keys += [(kind, f"{segment}/clients/{c}")
                             for c in self._children(f"{z.CONFIG}/users/{segment}/clients")]
        paths = [f"{z.CONFIG}/{kind}/{segment}" for kind, segment in keys]
        for key, path, got in zip(keys, paths, self._get_many(paths)):
            if got is not None and got[0]:
                cluster.configs[key] = z.decode_config(path, got[0])

    def _read_acls(self, cluster: ZkCluster) -> None:
        keys = []
        for pattern, root in ((z.LITERAL, z.LITERAL_ACLS), (z.PREFIXED, f"{z.EXTENDED_ACLS}/prefixed")):
            for rtype in self._children(root):
                if rtype not in z.RESOURCE_TYPES:
                    raise z.MalformedZnode(f"{root}/{rtype}", "not a Kafka resource type")
                keys += [(pattern, rtype, name) for name in self._children(f"{root}/{rtype}")]
        paths = [z.acl_path(*k) for k in keys]
        for key, path, got in zip(keys, paths, self._get_many(paths)):
            if got is not None and got[0]:
                cluster.acls[key] = z.decode_acls(path, got[0])

    # ------------------------------------------------------------------ mirroring
    def apply(self, writes: list[ZkWrite], claim: Claim, migration: bytes) -> None:
        """Apply the mirror's writes, then ``/migration`` (how far ZooKeeper is), in multi-ops that each
        check the claim. ClaimLost if another controller claimed ZooKeeper; KazooException (retried
        by the caller from the same image) if ZooKeeper is away."""
        created = {w.path for w in writes if w.create and w.data is not None}
        self._ensure_parents(w.parent for w in writes if w.create and w.parent not in created)
        for chunk in _chunks(writes):
            self._commit(chunk, claim)
        exists = self.zk.exists(z.MIGRATION) is not None
        self._commit([ZkWrite(z.MIGRATION, migration, create=not exists)], claim)

    def _ensure_parents(self, parents: Iterable[str]) -> None:
        for parent in sorted(set(parents) - self._parents):
            self.zk.ensure_path(parent)
            self._parents.add(parent)

    def _commit(self, chunk: list[ZkWrite], claim: Claim, again: bool = True) -> None:
        t = self.zk.transaction()
        t.check(z.CONTROLLER_EPOCH, claim.epoch_version)
        for w in chunk:
            if w.data is None:
                t.delete(w.path)
            elif w.create:
                t.create(w.path, w.data, sequence=w.sequential)
            else:
                t.set_data(w.path, w.data)
        results = t.commit()
        failed = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if not failed:
            return
        index, error = failed[0]
        if index == 0 or isinstance(error, BadVersionError):
            raise ClaimLost(f"{z.CONTROLLER_EPOCH} is no longer at version {claim.epoch_version}: another "
                            f"controller claimed ZooKeeper")
        if again and isinstance(error, (NodeExistsError, NoNodeError)):
            # A round that failed half way left some of its znodes: write each as ZooKeeper has it now.
            found = [x for w in chunk if (x := self._as_found(w)) is not None]
            if found:
                self._commit(found, claim, again=False)
            return
        raise KazooException(f"{chunk[index - 1].path}: {type(error).__name__}")

    def _as_found(self, w: ZkWrite) -> Optional[ZkWrite]:
        """``w`` as a create or a set by whether its znode exists now; None: a delete already done."""
        if w.sequential:
            return w
        exists = self.zk.exists(w.path) is not None
        if w.data is None:
            return w if exists else None
        return ZkWrite(w.path, w.data, create=not exists)


def _chunks(writes: list[ZkWrite]) -> list[list[ZkWrite]]:
    chunks: list[list[ZkWrite]] = []
    current: list[ZkWrite] = []
    size = 0
    for w in writes:
        n = len(w.path) + len(w.data or b"") + 32
        if current and (len(current) >= MAX_OPS or size + n > MAX_BYTES):
            chunks.append(current)
            current, size = [], 0
        current.append(w)
        size += n
    if current:
        chunks.append(current)
    return chunks

