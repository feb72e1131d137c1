"""Apache Kafka log files built to exhaust a reader (issue 58): records that decompress without a
bound (gzip, zstd, lz4, snappy), or a count the bytes cannot hold. ``sparkraft dump-log`` and
``sparkraft shell --snapshot`` refuse each in one line naming the file and the byte, exit 1, and
peak far below PEAK_MB; the same readers serve ``materialize --source kafka``."""
from __future__ import annotations

import os
import struct
import subprocess
import zlib

import cramjam
import crc32c
import pytest
from conftest import sparkraft_cmd

from quorum.kafka_log.batches import HEADER, MAX_RECORDS_BYTES

pytestmark = pytest.mark.slow  # a GiB of zeros compressed four ways, and a process per file

PEAK_MB = 500  # a one-shot command's memory, whatever the file holds


def kafka_batch(records: bytes, count: int, codec: int) -> bytes:
    """One record batch v2 of ``count`` records whose records section is ``records`` (already in
    the form the ``codec`` attribute names), with a CRC-32C that holds."""
    header = HEADER.pack(0, HEADER.size - 12 + len(records), 1, 2, 0, codec, max(count - 1, 0), 0, 0, -1, -1, -1,
                         count)
    body = header[21:] + records
    return header[:17] + struct.pack(">I", crc32c.crc32c(body)) + body


def run_measured(args: list[str]) -> tuple[int, str, float]:
    """(exit code, stderr, peak resident MB) of a sparkraft command."""
    with subprocess.Popen(sparkraft_cmd(*args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL) as proc:
        _, status, usage = os.wait4(proc.pid, 0)
        stderr = proc.stderr.read().decode()
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, stderr, usage.ru_maxrss / 1024


def zeros_compressed(codec: str, total: int = 1 << 30) -> bytes:
    """``total`` zero bytes compressed with ``codec``, made 16 MiB at a time (never all in memory)."""
    chunk = bytes(16 << 20)
    if codec == "gzip":
        c = zlib.compressobj(1, zlib.DEFLATED, 31)
        return b"".join(c.compress(chunk) for _ in range(total // len(chunk))) + c.flush()
    c = getattr(cramjam, codec).Compressor()
    for _ in range(total // len(chunk)):
        c.compress(chunk)
    return bytes(c.finish())


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bombs")
    made = {
        "gzip": kafka_batch(zeros_compressed("gzip"), 1, 1),
        "zstd": kafka_batch(zeros_compressed("zstd"), 1, 4),
        "lz4": kafka_batch(zeros_compressed("lz4"), 1, 3),
        "snappy": kafka_batch(bytes(cramjam.snappy.compress_raw(bytes(256 << 20))), 1, 2),
        "count": kafka_batch(bytes(70), 2**31 - 1, 0),  # 2^31-1 records claimed, 70 bytes of them
        "gzip-count": kafka_batch(zlib.compress(bytes(10)), 3, 1),  # not even gzip: damage, one line
    }
    paths = {}
    for name, batch in made.items():
        path = root / "__cluster_metadata-0" / f"{name}" / "00000000000000000000.log"
        path.parent.mkdir(parents=True)
        path.write_bytes(batch)
        paths[name] = path
    return paths


@pytest.mark.parametrize("name, words", [
    ("gzip", f"decompress (gzip) to more than {MAX_RECORDS_BYTES} bytes"),
    ("zstd", f"decompress (zstd) to more than {MAX_RECORDS_BYTES} bytes"),
    ("lz4", f"decompress (lz4) to more than {MAX_RECORDS_BYTES} bytes"),
    ("snappy", f"decompress (snappy) to more than {MAX_RECORDS_BYTES} bytes"),
    ("count", "a batch claiming 2147483647 records"),
    ("gzip-count", "do not decompress as gzip"),
])
def test_dump_log_refuses_a_bomb_in_one_line_naming_file_and_byte(bombs, name, words):
    code, stderr, peak = run_measured(["dump-log", "--files", str(bombs[name])])
    assert code == 1, stderr
    assert stderr.count("\n") == 1 and str(bombs[name]) in stderr and "at byte 0" in stderr and words in stderr, stderr
    assert peak < PEAK_MB, f"dump-log peaked at {peak:.0f} MB"


def test_shell_refuses_a_snapshot_bomb_in_one_line_naming_file_and_byte(tmp_path):
    """A Kafka ``.checkpoint`` whose records claim to be 1 GiB of zstd: `shell --snapshot` reads it
    through the same bounded reader."""
    path = tmp_path / "00000000000000000100-0000000001.checkpoint"
    path.write_bytes(kafka_batch(zeros_compressed("zstd"), 1, 4))
    with subprocess.Popen(sparkraft_cmd("shell", "--snapshot", str(path)), stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        proc.stdin.close()
        _, status, usage = os.wait4(proc.pid, 0)
        stderr = proc.stderr.read().decode()
    assert os.waitstatus_to_exitcode(status) == 1, stderr
    assert stderr.count("\n") == 1 and str(path) in stderr and "at byte 0" in stderr, stderr
    assert f"decompress (zstd) to more than {MAX_RECORDS_BYTES} bytes" in stderr, stderr
    assert usage.ru_maxrss / 1024 < PEAK_MB
