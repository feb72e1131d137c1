"""glibc's mmap threshold raised for sparkraft processes (quorum/allocator.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest


def test_large_buffers_come_from_the_heap_after_tuning():
    """What Python's ``ssl`` reads do, many times: allocate 256 KiB, shrink it to what was read, free
    it. With glibc's default threshold each is a fresh mapping (shrunk before it is freed, it never
    raises the dynamic threshold); once tuned, heap memory is reused. Counted by the process's page
    faults: a fresh mapping faults its pages in every time."""
    script = r"""
import resource, sys
from quorum.allocator import tune_allocator
if sys.argv[1] == "tuned" and not tune_allocator():
    print("skip"); raise SystemExit
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
before = faults()
for _ in range(2000):
    b = bytearray(256 * 1024)  # a read buffer of the size asked for...
    del b[200:]  # ...shrunk to what was read (realloc: mremap of the mapping)
    del b
print(faults() - before)
"""
    counts = {}
    for mode in ("default", "tuned"):
        out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, check=True).stdout
        if out.strip() == "skip":
            pytest.skip("not glibc: nothing to tune")
        counts[mode] = int(out)
    assert counts["default"] > 2000  # at least one fault per fresh mapping
    assert counts["tuned"] < counts["default"] / 10
