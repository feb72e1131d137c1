"""``sparkraft dump-log --files PATH[,PATH]``: every record of log segments and checkpoints as JSON lines.

Segments (``<20 digits>.log`` in ``<metadata.log.dir>/__cluster_metadata-0``) and checkpoint-format
files (``.checkpoint`` snapshots, a broker's ``metadata-cache``) are the same thing underneath: CRC-
checked batches (quorum/log/batch.py). Each record prints as one JSON object: ``offset``, ``epoch``,
``timestamp`` (the batch's append time, ms), and the record's JSON form (``type``, ``version``,
``data``); control records (LeaderChange, SnapshotHeader/Footer) print with their type names, and
the records of a ``--raft-only`` log, which are opaque bytes, as base64 under ``raw``.

Apache Kafka's own files (its ``__cluster_metadata-0/*.log`` segments and ``*.checkpoint``
snapshots: record batches v2) are recognised by their format and printed the same way, each record
as kafka-dump-log --cluster-metadata-decoder describes it (quorum/kafka_log/), with the batch's
partition leader epoch as ``epoch``; credentials print as "(redacted)", and a record type newer
than this sparkraft knows prints as ``UNKNOWN`` with its ``raw`` bytes and is counted on stderr.

It streams batch by batch (constant memory, fine in a pipe to ``head``). A path that is not a log
is one line on stderr and exit 1; a damaged tail is reported after everything good before it, and
a tail of zeros after the batches (a running node's preallocated room) is the end; a file of only
zeros is damage (one line, exit 1).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from typing import Iterator

from sparkraft.commands import add_command

READ_CHUNK = 4 << 20


class NotALogError(ValueError):
    """A path that holds no batches, or batches damaged partway."""


def register(subparsers) -> None:
    parser = add_command(subparsers, "dump-log", "print the records of log segments and checkpoints as JSON",
                         run_dump_log)
    parser.add_argument("--files", required=True, metavar="PATH[,PATH]",
                        help="segment (.log), .checkpoint or metadata-cache files, sparkraft's or Apache Kafka's, "
                             "or a partition directory")


def _paths(spec: str) -> list[Path]:
    out: list[Path] = []
    for item in (p.strip() for p in spec.split(",") if p.strip()):
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in (".log", ".checkpoint"))
            if not found:
                raise NotALogError(f"{path}: a directory without .log or .checkpoint files")
            out.extend(found)
        elif not path.exists():
            raise NotALogError(f"{path}: no such file")
        else:
            out.append(path)
    if not out:
        raise NotALogError("--files names no file")
    return out


def batches(path: Path) -> Iterator:
    """The batches of ``path``, read in chunks; NotALogError at the first damaged one."""
    from quorum.log.batch import CorruptBatchError, decode_one, scan
    from quorum.log.file_log import zeros_from

    size = path.stat().st_size
    if size == 0:
        raise NotALogError(f"{path}: empty file, not a log")
    position = 0
    buffer = b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(READ_CHUNK)
            buffer += chunk
            used = 0
            try:
                for header in scan(buffer):
                    yield decode_one(buffer, header)
                    used = header.position + header.size
            except CorruptBatchError as e:
                if zeros_from(buffer, used, len(buffer)) and _zeros_to_the_end(f):
                    if position + used == 0:  # zeros where the first batch should be: damage, not an empty log
                        raise _only_zeros(path, size)
                    return  # the active segment's preallocated room after its batches (quorum/log/file_log.py)
                if chunk and len(buffer) - used < (64 << 20):  # maybe a batch cut by the chunk: read more
                    buffer = buffer[used:]
                    position += used
                    continue
                raise NotALogError(f"{path}: {'not a log' if position + used == 0 else 'damaged'} at byte "
                                   f"{position + used}: {e}") from None
            buffer = buffer[used:]
            position += used
            if not chunk:
                if buffer and position == 0 and zeros_from(buffer, 0, len(buffer)):
                    raise _only_zeros(path, size)
                if buffer:
                    raise NotALogError(f"{path}: {len(buffer)} trailing bytes at byte {position} are not a batch")
                return


def _only_zeros(path: Path, size: int) -> NotALogError:
    return NotALogError(f"{path}: only zero bytes ({size} of them), no batch: a preallocated file nothing was "
                        f"written to, or a torn one; not a log")


def _zeros_to_the_end(f) -> bool:
    """Whether the rest of ``f`` is zeros; its position is left where it was."""
    from quorum.log.file_log import zeros_from

    here = f.tell()
    try:
        while chunk := f.read(READ_CHUNK):
            if not zeros_from(chunk, 0, len(chunk)):
                return False
        return True
    finally:
        f.seek(here)


def record_json(offset: int, batch, raw: bytes) -> dict:
    from quorum.log.control_records import decode_control
    from quorum.metadata.partition_block import block_json, is_block
    from quorum.metadata.records import DecodeError, decode_record, to_json

    base = {"offset": offset, "epoch": batch.epoch, "timestamp": batch.append_time_ms}
    if batch.control:
        c = decode_control(raw)
        return {**base, "type": c.type_name, "version": c.data.get("version", 0), "data": c.data}
    try:
        if is_block(raw):  # a checkpoint's partitions of one topic, in one record
            return {**base, **block_json(raw)}
        return {**base, **to_json(decode_record(raw))}
    except (DecodeError, ValueError):
        return {**base, "type": "RAW", "raw": base64.b64encode(raw).decode()}


def kafka_lines(path: Path) -> Iterator[dict]:
    """The records of one of Apache Kafka's segment or snapshot files, as JSON objects."""
    import mmap

    from quorum.kafka_log.batches import KafkaBatchError, read_batches
    from quorum.kafka_log.records import describe

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        position = 0
        try:
            for batch in read_batches(data):
                position = batch.position + batch.size
                for record in batch.records:
                    d = describe(batch.control, record.key, record.value)
                    line = {"offset": record.offset, "epoch": batch.partition_leader_epoch,
                            "timestamp": record.timestamp, "type": d.type, "version": d.version}
                    line.update({"data": d.data} if d.data is not None else {"raw": base64.b64encode(d.raw).decode()})
                    yield line
        except KafkaBatchError as e:
            raise NotALogError(f"{path}: damaged at byte {position}: {e}") from None


def _is_kafkas(path: Path) -> bool:
    from quorum.kafka_log.batches import HEADER_SIZE, batch_size, looks_like_kafka

    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
        try:
            size = batch_size(head) if len(head) == HEADER_SIZE and head[16] == 2 else None
        except ValueError:
            return False
        if size is None:
            return False
        f.seek(0)
        return looks_like_kafka(f.read(size))


def run_dump_log(args: argparse.Namespace) -> int:
    from quorum.kafka_log.records import UNKNOWN

    paths = _paths(args.files)
    out = sys.stdout
    try:
        for path in paths:
            if path.stat().st_size and _is_kafkas(path):
                for line in kafka_lines(path):
                    out.write(json.dumps(line, separators=(",", ":")))
                    out.write("\n")
                continue
            for batch in batches(path):
                for i, raw in enumerate(batch.records):
                    out.write(json.dumps(record_json(batch.base_offset + i, batch, raw), separators=(",", ":")))
                    out.write("\n")
        out.flush()
        if UNKNOWN.by_type:
            print(f"WARNING: records this sparkraft cannot decode were printed raw: {UNKNOWN.summary()}",
                  file=sys.stderr)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0
