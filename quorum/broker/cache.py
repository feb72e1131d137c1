"""MetadataCache: a broker's metadata image on its own disk, so a restart fetches only what it missed.

One file, ``<dir>/metadata-cache``, in the checkpoint format (quorum/snapshot/checkpoint.py, the
same as the controllers' snapshots), so ``sparkraft dump-log`` reads it. The header names the
cluster, the offset the image reaches (its provenance) and the next log offset to fetch. It is
replaced atomically (temp file, fsync, rename), so a crash leaves the old cache or the new one.

A cache of another cluster, or one that fails its CRCs or misses its footer, raises CheckpointError:
the broker discards it and bootstraps another way; it is never half-loaded.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from quorum.metadata.image import MetadataImage
from quorum.snapshot.checkpoint import CheckpointError, read_checkpoint, write_checkpoint

CACHE_FILE = "metadata-cache"


class MetadataCache:
    def __init__(self, directory: str | os.PathLike, cluster_id: str):
        self.path = Path(directory) / CACHE_FILE
        self.cluster_id = cluster_id

    def save(self, image: MetadataImage, next_offset: int) -> None:
        write_checkpoint(self.path, image, {"cluster_id": self.cluster_id, "next_offset": next_offset})

    def load(self) -> Optional[tuple[MetadataImage, int]]:
        """(image, next offset), None if there is no cache; CheckpointError if it is unusable."""
        try:
            header, image = read_checkpoint(self.path)
        except FileNotFoundError:
            return None
        if header.get("cluster_id") != self.cluster_id:
            raise CheckpointError(f"{self.path} belongs to cluster {header.get('cluster_id')}, not {self.cluster_id}")
        return image, int(header["next_offset"])

    def remove_abandoned(self) -> None:
        """Delete what a write cut short by the process's exit left (write_atomically's temp files)."""
        for leftover in self.path.parent.glob(f".{CACHE_FILE}.*.tmp"):
            leftover.unlink(missing_ok=True)

    def discard(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
