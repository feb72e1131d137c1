"""glibc malloc's settings for sparkraft processes.

glibc serves an allocation above its mmap threshold (128 KiB to start with) with a fresh ``mmap``
and gives it back with ``munmap``. Python's ``ssl`` objects allocate the size asked for on every
read and shrink it afterwards, and the event loop asks for 256 KiB: on a wire listener with TLS,
mmap, mremap and munmap took ~15 % of the leader's event-loop time (py-spy, 64 writers). With
the threshold at 4 MiB those buffers come from the heap and are reused (and the heap is trimmed
only past 8 MiB free at its top, or every freed buffer would go back to the kernel instead).
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 4 << 20
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES  # what glibc's own dynamic rule would set


def tune_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds (process-wide); False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
            and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
