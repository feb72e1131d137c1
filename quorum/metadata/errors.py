"""Errors of the metadata image."""
from __future__ import annotations


class ReplayError(ValueError):
    """A record cannot be replayed onto the image: it names a topic, partition, broker or ACL the
    image does not have (or has already). The log is broken or replayed out of order; the delta is
    left as it was before the record."""
