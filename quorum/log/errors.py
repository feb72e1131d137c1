"""The one error a node's on-disk state raises: missing, corrupt or belonging to another node."""
from __future__ import annotations

from quorum.errors import Errors, SparkraftError


class StorageError(SparkraftError):
    """A storage file or directory that cannot be used as it is; the message names the path.

    Prints as ``KAFKA_STORAGE_ERROR: ...`` (or the more precise error given, e.g.
    ``INCONSISTENT_CLUSTER_ID``) so the CLI can report it in one line.
    """

    def __init__(self, message: str, error: Errors = Errors.KAFKA_STORAGE_ERROR):
        super().__init__(error, message)
