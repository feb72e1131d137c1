"""How one operation's records become log batches: at most ``max_records`` records and
``max_bytes`` bytes each, so that a follower can always fetch a batch whole. An operation that
needs more than one batch is wrapped in Begin/EndTransaction markers, so readers (the loader,
brokers, the lakehouse) see all of it or none of it (Kafka's KIP-868)."""
from __future__ import annotations

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.change_block import CONTINUATION_BYTES
from quorum.metadata.records import encode_record


def batches(encoded: list[bytes], name: str, max_records: int, max_bytes: int,
            transaction: bool = False) -> list[list[bytes]]:
    """``encoded`` records as one batch, or as a transaction over several (``transaction``: a
    transaction however few they are)."""
    chunks = chunk(encoded, max_records, max_bytes)
    if len(chunks) <= 1 and not transaction:
        return chunks
    wrapped = ([encode_record(pb.BeginTransactionRecord(name=name))] + encoded
               + [encode_record(pb.EndTransactionRecord())])
    return chunk(wrapped, max_records, max_bytes)


def chunk(encoded: list[bytes], max_records: int, max_bytes: int) -> list[list[bytes]]:
    """Consecutive runs of ``encoded`` of at most ``max_records`` records and ``max_bytes`` bytes (a
    record larger than that alone). A partition change block and its continuations count as one
    record of their length and size: row i of a block is read from the block, so they share a batch."""
    chunks: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    i, n = 0, len(encoded)
    while i < n:
        end = i + 1
        while end < n and encoded[end] == CONTINUATION_BYTES:
            end += 1
        span = end - i
        span_size = len(encoded[i]) + (span - 1) * len(CONTINUATION_BYTES)
        if current and (len(current) + span > max_records or size + span_size > max_bytes):
            chunks.append(current)
            current, size = [], 0
        current.extend(encoded[i:end])
        size += span_size
        i = end
    if current:
        chunks.append(current)
    return chunks
