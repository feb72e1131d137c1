"""Writing files so that a crash leaves either the old or the new version, never a mix."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from quorum import failpoints


def fsync_directory(path: str | os.PathLike) -> None:
    """Make the creation, renaming or deletion of entries in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike, data: bytes, failpoint: str = "") -> None:
    """Replace ``path`` by ``data``: write a temp file beside it, fsync, rename, fsync the directory.
    ``failpoint``: the point (quorum/failpoints.py) a test may fail this write at, half written."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)
            if failpoint and failpoints.armed(failpoint):
                f.write(data[:len(data) // 2])
                f.flush()
                failpoints.hit(failpoint)
                data = data[len(data) // 2:]
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_directory(path.parent)
