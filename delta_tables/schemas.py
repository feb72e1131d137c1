"""The Delta tables (DESIGN §5, §11 and §12, contract): names, Arrow schemas, keys and layout.

``voters`` is the quorum's voter set, which lives in control records, not in the metadata image: a
dynamic quorum's KRAFT_VOTERS records (directory ids and endpoints included), or, for a static quorum,
the voter ids its LeaderChange records name (directory id Kafka's zero UUID and no endpoints: a
static quorum keeps those in each controller's ``controller.quorum.voters``).

Columns beyond the contract: ``partitions.bucket`` (the table is partitioned by it, so a micro-batch
that changes a few partitions of a 2,000,000-row table rewrites a few small files, not the table)
``records.raw`` (the record's binary frame, so the materialiser can rebuild its image exactly
on restart) and ``acls.acl_id`` (the binding's id in the log, its key).
"""
from __future__ import annotations

import zlib

import pyarrow as pa

TOPICS, PARTITIONS, BROKERS, CONFIGS, ACLS, USERS, VOTERS, RECORDS, SNAPSHOTS, AUDIT = (
    "topics", "partitions", "brokers", "configs", "acls", "users", "voters", "records", "snapshots", "audit")
IMAGE_TABLES = (TOPICS, PARTITIONS, BROKERS, CONFIGS, ACLS, USERS)  # rows of the metadata image
STATE_TABLES = (*IMAGE_TABLES, VOTERS)  # current state, merged by key; voters from control records
# ``audit`` is appended by offset like ``records`` but names no version in a cut: read it up to a cut's offset
ALL_TABLES = (*STATE_TABLES, RECORDS, SNAPSHOTS, AUDIT)

PARTITION_BUCKETS = 128

_ENDPOINT = pa.struct([("name", pa.string()), ("host", pa.string()), ("port", pa.int32()),
                       ("security_protocol", pa.string())])
_INTS = pa.list_(pa.int32())
_VOTER_ENDPOINT = pa.struct([("name", pa.string()), ("host", pa.string()), ("port", pa.int32())])

SCHEMAS: dict[str, pa.Schema] = {
    TOPICS: pa.schema([("topic_id", pa.string()), ("name", pa.string()), ("partition_count", pa.int32()),
                       ("last_offset", pa.int64())]),
    PARTITIONS: pa.schema([("topic_id", pa.string()), ("topic_name", pa.string()), ("partition", pa.int32()),
                           ("replicas", _INTS), ("isr", _INTS), ("leader", pa.int32()), ("leader_epoch", pa.int32()),
                           ("partition_epoch", pa.int32()), ("adding_replicas", _INTS),
                           ("removing_replicas", _INTS), ("last_offset", pa.int64()), ("bucket", pa.int32()),
                           ("elr", _INTS), ("last_known_elr", _INTS), ("directories", pa.list_(pa.string()))]),
    BROKERS: pa.schema([("broker_id", pa.int32()), ("incarnation_id", pa.string()), ("broker_epoch", pa.int64()),
                        ("endpoints", pa.list_(_ENDPOINT)), ("rack", pa.string()), ("fenced", pa.bool_()),
                        ("in_controlled_shutdown", pa.bool_()), ("last_offset", pa.int64()),
                        ("log_dirs", pa.list_(pa.string()))]),
    CONFIGS: pa.schema([("resource_type", pa.string()), ("resource_name", pa.string()), ("name", pa.string()),
                        ("value", pa.string()), ("last_offset", pa.int64())]),
    ACLS: pa.schema([("acl_id", pa.string()), ("principal", pa.string()), ("host", pa.string()),
                     ("operation", pa.string()), ("permission_type", pa.string()), ("resource_type", pa.string()),
                     ("resource_name", pa.string()), ("pattern_type", pa.string()), ("last_offset", pa.int64())]),
    # SCRAM users: which mechanisms and iterations, never salts, keys or passwords
    USERS: pa.schema([("name", pa.string()), ("mechanism", pa.string()), ("iterations", pa.int32()),
                      ("last_offset", pa.int64())]),
    VOTERS: pa.schema([("node_id", pa.int32()), ("directory_id", pa.string()),
                       ("endpoints", pa.list_(_VOTER_ENDPOINT)), ("last_offset", pa.int64())]),
    RECORDS: pa.schema([("offset", pa.int64()), ("epoch", pa.int32()), ("append_time", pa.timestamp("ms", "UTC")),
                        ("type", pa.string()), ("version", pa.int32()), ("data", pa.string()),
                        ("raw", pa.binary())]),
    SNAPSHOTS: pa.schema([("offset", pa.int64()), ("epoch", pa.int32()), ("created_at", pa.timestamp("ms", "UTC")),
                          ("topics_version", pa.int64()), ("partitions_version", pa.int64()),
                          ("brokers_version", pa.int64()), ("configs_version", pa.int64()),
                          ("records_version", pa.int64()), ("voters_version", pa.int64()),
                          ("acls_version", pa.int64()), ("users_version", pa.int64())]),
    AUDIT: pa.schema([("offset", pa.int64()), ("epoch", pa.int32()), ("time", pa.timestamp("ms", "UTC")),
                      ("day", pa.string()), ("principal", pa.string()), ("client_host", pa.string()),
                      ("client_software_name", pa.string()), ("client_software_version", pa.string()),
                      ("listener", pa.string()), ("request", pa.string()), ("resources", pa.list_(pa.string())),
                      ("changes", pa.list_(pa.string())), ("outcome", pa.string()), ("error_code", pa.int32()),
                      ("error_message", pa.string()), ("first_offset", pa.int64()), ("record_count", pa.int32()),
                      ("forwarded_by", pa.string()), ("occurrences", pa.int32()), ("hash", pa.binary())]),
}

KEYS: dict[str, tuple[str, ...]] = {
    TOPICS: ("topic_id",),
    PARTITIONS: ("topic_id", "partition"),
    BROKERS: ("broker_id",),
    CONFIGS: ("resource_type", "resource_name", "name"),
    ACLS: ("acl_id",),
    USERS: ("name", "mechanism"),
    VOTERS: ("node_id",),
}

PARTITION_BY: dict[str, list[str]] = {PARTITIONS: ["bucket"], AUDIT: ["day"]}

ROW_OF: dict[str, str] = {  # what one row is, for the reference docs
    TOPICS: "One row per live topic.",
    PARTITIONS: "One row per live partition (`elr`, `last_known_elr`: KIP-966's eligible leader replicas; "
                "`directories`: each replica's log directory where known, KIP-858).",
    BROKERS: "One row per registered broker (`log_dirs`: its online log directories, a Kafka broker's).",
    CONFIGS: "One row per config set on a topic, a broker or the cluster (`resource_name` empty: the cluster).",
    ACLS: "One row per ACL binding.",
    USERS: "One row per SCRAM credential: the mechanism and iterations, never a salt, a key or a password.",
    VOTERS: "One row per controller in the quorum's voter set (from control records, not the image).",
    RECORDS: "One row per record of the metadata log, kept for good: the history. `data` is the record as "
             "JSON (credentials `(redacted)`); `raw` its frame, credentials cleared.",
    SNAPSHOTS: "One row per consistent cut: the log offset and the version of each table at it. "
               "`--as-of-offset N` reads every table at the newest cut at or below N.",
    AUDIT: "One row per audit entry (docs/use/audit.md): who (`principal`, `client_host`, the client's software, "
           "`listener`, `forwarded_by`) asked for what (`request`, `resources`, `changes`: a password-type "
           "config's value never, only `(sensitive)`), the `outcome` (`done`, `denied`, `refused`) and the "
           "records it wrote (`first_offset`, `record_count`); `occurrences` > 1 counts refusals alike; `hash` "
           "chains each entry on the one before (`sparkraft audit --verify`). Partitioned by `day`.",
}


def partition_bucket(topic_id: str) -> int:
    """The ``partitions`` table's bucket of a topic: all of a topic's partitions share one."""
    return zlib.crc32(topic_id.encode()) % PARTITION_BUCKETS
