"""The sparkraft CLI with fsync turned off, for the "fsync off" comparison only.

``python -m bench.fsync_off controller start --config FILE`` is ``sparkraft controller start``
except that ``os.fsync`` and ``os.fdatasync`` do nothing in this process: writes stay in the page
cache, as PySyncObj's do. The log still does all its bookkeeping (``flush()`` still marks what it
wrote as flushed), so Raft runs unchanged; only the disk wait is gone. Never use this for data you
want to keep: a power cut loses acknowledged records.
"""
from __future__ import annotations

import os
import sys


def _no_sync(fd: int) -> None:
    """Stands in for os.fsync / os.fdatasync."""


def main() -> int:
    os.fsync = _no_sync  # before sparkraft is imported, so no module binds the real ones
    os.fdatasync = _no_sync
    from sparkraft.cli import main as sparkraft_main

    return sparkraft_main()


if __name__ == "__main__":
    sys.exit(main())
