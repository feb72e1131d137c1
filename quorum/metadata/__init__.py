"""The cluster metadata: records, and the image every node builds by replaying them.

Kafka's design (apache/kafka ``metadata/``, ``org.apache.kafka.image``), rebuilt in Python:

- **Records** (``records``): versioned protobuf messages with Kafka's type ids, framed as
  ``<u16 type><u16 version><payload>`` inside a quorum batch, with a JSON form for humans and the
  ``records`` table. Old readers skip fields they do not know; unknown types are kept, not fatal.
- **Image** (``image``): an immutable ``MetadataImage`` of per-domain sub-images (features,
  cluster, topics, configs, client quotas, producer ids, ACLs, SCRAM credentials) and the provenance (offset, epoch)
  of the last record it contains. Images are what the controller, brokers, snapshots and the
  materialiser read; ``records()`` turns one back into the records that rebuild it (a snapshot).
- **Delta** (``delta``): ``MetadataDelta(image)`` replays records into sub-deltas created on first
  use; ``apply()`` builds the next image and shares every sub-image, topic and trie node that did
  not change. Cost is proportional to the delta, not the image: the maps are ``PMap``s (``pmap``),
  hash tries whose updates copy only the path to the changed key. That is what makes a
  2-million-partition image cheap to advance record by record.
- **Loader** (``loader``): decides when a delta becomes the published image, which is where
  Begin/End/AbortTransaction are honoured (records of a transaction appear together or not at all).
- **Invariants** (``invariants``): what a well-behaved controller keeps true, for property tests.

Only replay changes state; nothing here does I/O.
"""
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.errors import ReplayError
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.loader import MetadataLoader
from quorum.metadata.records import (
    DecodeError,
    MetadataRecord,
    RecordType,
    UnknownRecord,
    decode_record,
    encode_record,
    from_json,
    to_json,
)

__all__ = [
    "DecodeError", "MetadataDelta", "MetadataImage", "MetadataLoader", "MetadataRecord",
    "Provenance", "RecordType", "ReplayError", "UnknownRecord", "decode_record", "encode_record",
    "from_json", "to_json",
]
