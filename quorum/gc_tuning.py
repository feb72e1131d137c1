"""Garbage-collector settings for processes that hold a metadata image.

An image is millions of small, acyclic objects (partition registrations, tuples, trie nodes).
With CPython's default first-generation threshold (700 allocations) the cyclic collector walks
the newest objects again and again while an image is loaded or a large batch replayed: about a
quarter of the time of loading a 200,000-partition cache. Reference counting frees these objects
anyway (they form no cycles), so collecting rarely costs nothing in memory.

A full collection walks the whole image: 4 to 5 s at 2,000,000 partitions. A million elections
(a balance after a rolling restart) allocate enough survivors to set one off in every process that
holds the image, a quarter of the active controller's time in it; so the oldest generation is
collected after 100 collections of the middle one (5x rarer than before), about every 100 million
allocations. What only a full collection frees is cyclic garbage that lived long, which an image
does not make.
"""
from __future__ import annotations

import gc

GEN0_THRESHOLD = 50_000
GEN1_THRESHOLD = 20
GEN2_THRESHOLD = 100


def tune_gc() -> None:
    """Collect young objects every 50,000 allocations instead of 700, and the oldest generation
    rarely (process-wide)."""
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
