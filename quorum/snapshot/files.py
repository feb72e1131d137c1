"""Snapshot files in a node's partition directory (KIP-630 naming), written and found.

A snapshot holds the image after every record before its end offset, in the checkpoint format
(quorum/snapshot/checkpoint.py: CRC'd batches, a SnapshotHeader first, a SnapshotFooter last), so
``dump-log`` and ``shell --snapshot`` read it. It is written to a temporary name, fsynced and
renamed; a crash leaves the old set of snapshots or the new one, and a leftover temporary file is
removed at the next start. A damaged snapshot is skipped (with a warning) for an older one.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from quorum.log import batch as batchcodec
from quorum.log import control_records
from quorum.log.voter_set import VoterSet, raft_state_records
from quorum.metadata.image import MetadataImage
from quorum.snapshot.api import SnapshotError
from quorum.snapshot.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

SUFFIX = ".checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_TEMPORARY = re.compile(r"^\.\d{20}-\d{10}\.checkpoint\..*\.tmp$")  # write_atomically's temp names


@dataclass(frozen=True)
class SnapshotId:
    end_offset: int  # one past the last record the snapshot includes
    epoch: int  # the epoch of that record

    @property
    def name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"


def write_snapshot(directory: Path, image: MetadataImage, snapshot: SnapshotId, cluster_id: str,
                   raft_records: Sequence[bytes] = ()) -> int:
    """Write ``image`` as snapshot ``snapshot`` (with the quorum's ``raft_records``); the file's size."""
    return write_checkpoint(directory / snapshot.name, image, {
        "cluster_id": cluster_id, "end_offset": snapshot.end_offset, "epoch": snapshot.epoch,
        "next_offset": snapshot.end_offset}, raft_records, failpoint="snapshot-half-written")


BOOTSTRAP = SnapshotId(0, 0)


def write_bootstrap_snapshot(directory: Path, cluster_id: str, voters: VoterSet) -> Path:
    """``storage format --standalone | --initial-controllers``: the bootstrap snapshot (0, 0) of a
    dynamic quorum, an empty image after the voter set and kraft.version 1 (KIP-853). The first leader
    copies them into the log, so nodes that fetch the log from its start learn them too."""
    write_snapshot(directory, MetadataImage.EMPTY, BOOTSTRAP, cluster_id, raft_state_records(voters, 1))
    return directory / BOOTSTRAP.name


def write_restored_snapshot(directory: Path, cluster_id: str, image: MetadataImage, end_offset: int,
                            voters: Optional[VoterSet]) -> SnapshotId:
    """``storage format --from-warehouse``: ``image`` (a consistent cut of another cluster's log, up to
    ``end_offset``) as this node's first snapshot, verified before it counts: read back whole, every
    batch's CRC, its header and footer, its record count and cluster (the controller decodes it all
    when it starts; a test compares what it decodes with the cut, field by field). The node's log
    then starts empty at ``end_offset`` (storage.py lines it up), so offsets go on from the cut. Its
    epoch is 0: the restored quorum is a new history whose first leader is elected in epoch 1 (the
    cut's own epoch belongs to the quorum that was lost, and a log may not go back to a lower epoch
    after it). A dynamic quorum's voter set goes in with kraft.version 1."""
    snapshot = SnapshotId(end_offset, 0)
    write_snapshot(directory, image, snapshot, cluster_id, raft_state_records(voters, 1 if voters is not None else 0))
    if list_snapshots(directory)[-1:] != [snapshot]:
        raise SnapshotError(f"snapshot {snapshot.name} is not the newest in {directory} after writing it")
    verify_checkpoint((directory / snapshot.name).read_bytes(), cluster_id, snapshot)
    return snapshot


BOOTSTRAP_METADATA = "bootstrap.checkpoint"  # in the log directory, as Kafka names it


def write_bootstrap_metadata(log_dir: str | Path, cluster_id: str, image: MetadataImage) -> Path:
    """``storage format --release-version / --feature / --add-scram``: metadata the first active
    controller of an empty log writes (feature levels, metadata.version first; SCRAM credentials:
    salted, never the password). Kafka keeps the same in
    ``bootstrap.checkpoint``; every controller should be formatted with the same, since whichever
    is elected first writes its own."""
    path = Path(log_dir) / BOOTSTRAP_METADATA
    write_checkpoint(path, image, {"cluster_id": cluster_id, "bootstrap": True})
    path.chmod(0o600)  # credentials: readable by the node's user only
    return path


def read_bootstrap_metadata(log_dir: str | Path) -> tuple:
    """The records of the log directory's bootstrap metadata (none if there is no such file);
    SnapshotError if it is damaged: a controller must not start an empty log without them."""
    path = Path(log_dir) / BOOTSTRAP_METADATA
    try:
        _, image = read_checkpoint(path)
    except FileNotFoundError:
        return ()
    except CheckpointError as e:
        raise SnapshotError(str(e)) from None
    return tuple(image.features.records()) + tuple(image.scram.records())


def verify_checkpoint(data: bytes, cluster_id: str, snapshot: SnapshotId) -> dict:
    """Check a snapshot's bytes without decoding its records (CRC of every batch, header, footer,
    record count, cluster and id); its header. Raises SnapshotError."""
    try:
        headers = list(batchcodec.scan(data))
    except batchcodec.CorruptBatchError as e:
        raise SnapshotError(f"snapshot {snapshot.name} is damaged: {e}") from None
    if len(headers) < 2 or not headers[0].control or not headers[-1].control:
        raise SnapshotError(f"snapshot {snapshot.name} is incomplete (no header or footer)")
    first = batchcodec.decode(data[headers[0].position:headers[0].position + headers[0].size])[0]
    last = batchcodec.decode(data[headers[-1].position:headers[-1].position + headers[-1].size])[0]
    head, foot = control_records.decode_control(first.records[0]), control_records.decode_control(last.records[0])
    if head.type != control_records.SNAPSHOT_HEADER or foot.type != control_records.SNAPSHOT_FOOTER:
        raise SnapshotError(f"snapshot {snapshot.name} does not begin with a header and end with a footer")
    count = sum(h.count for h in headers[1:-1])
    if count != foot.data.get("records"):
        raise SnapshotError(f"snapshot {snapshot.name} holds {count} records, its footer says "
                            f"{foot.data.get('records')}")
    if head.data.get("cluster_id") != cluster_id:
        raise SnapshotError(f"snapshot {snapshot.name} belongs to cluster {head.data.get('cluster_id')}, "
                            f"not {cluster_id}")
    if (head.data.get("end_offset"), head.data.get("epoch")) != (snapshot.end_offset, snapshot.epoch):
        raise SnapshotError(f"snapshot {snapshot.name} says it ends at offset {head.data.get('end_offset')} "
                            f"in epoch {head.data.get('epoch')}")
    return head.data


def list_snapshots(directory: Path) -> list[SnapshotId]:
    """The snapshots in ``directory``, oldest first (by name; not checked)."""
    out = []
    for entry in directory.iterdir() if directory.is_dir() else ():
        m = _NAME.match(entry.name)
        if m:
            out.append(SnapshotId(int(m.group(1)), int(m.group(2))))
    return sorted(out, key=lambda s: (s.end_offset, s.epoch))


def remove_temporaries(directory: Path) -> None:
    for entry in directory.iterdir() if directory.is_dir() else ():
        if _TEMPORARY.match(entry.name):
            log.warning("Removing %s, a snapshot left half-written by a crash", entry)
            entry.unlink()


def load_latest(directory: Path, cluster_id: str) -> Optional[tuple[SnapshotId, MetadataImage]]:
    """The newest snapshot that reads back whole and belongs to ``cluster_id``; None if there is none.
    Damaged or foreign ones are skipped with a warning and left on disk (evidence, not garbage)."""
    for snapshot in reversed(list_snapshots(directory)):
        path = directory / snapshot.name
        try:
            header, image = read_checkpoint(path)
        except (CheckpointError, OSError) as e:
            log.warning("Skipping snapshot %s: %s", path, e)
            continue
        if header.get("cluster_id") != cluster_id or header.get("end_offset") != snapshot.end_offset:
            log.warning("Skipping snapshot %s: it belongs to cluster %s at offset %s, not this log", path,
                        header.get("cluster_id"), header.get("end_offset"))
            continue
        return snapshot, image
    return None
