"""Apache Kafka's metadata.version levels, the numbering sparkraft's log uses: each level's release
name and what it changes in the records (the facts of MetadataVersion in Kafka's server-common, as
Kafka 4.4's classes report them); and how levels sparkraft wrote before it used Kafka's numbering
(its own 1-4) read now.

sparkraft's extension of the log, partition change blocks, is a feature of its own,
``sparkraft.version`` (:data:`SPARKRAFT_VERSION`), next to Kafka's: Kafka's brokers and tools see
Kafka's names and levels only.
"""
from __future__ import annotations

import re

from quorum.errors import Errors, SparkraftError

# level -> Kafka's name for it (MetadataVersion.version()), from 3.0-IV1 (level 1) on
RELEASES: dict[int, str] = dict(enumerate((
    "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1",
    "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0",
    "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.0-IV2", "4.0-IV3", "4.1-IV0", "4.1-IV1", "4.2-IV0", "4.2-IV1", "4.3-IV0",
    "4.4-IV0", "4.4-IV1", "4.4-IV2",
), start=1))

# where Kafka's levels change what the log holds
SCRAM = 11  # 3.5-IV2: UserScramCredentialRecord
METADATA_TRANSACTIONS = 13  # 3.6-IV1: Begin/End/AbortTransactionRecord
CONTROLLER_REGISTRATION = 15  # 3.7-IV0: RegisterControllerRecord (KIP-919)
DIRECTORY_ASSIGNMENT = 17  # 3.7-IV2: log directories in registrations and partitions (KIP-858)
ELR = 23  # 4.0-IV1: eligible leader replicas in partition records (KIP-966)
CORDONED_LOG_DIRS = 30  # 4.3-IV0: RegisterBrokerRecord v4 (KIP-1066)
CIDR_ACLS = 32  # 4.4-IV1: an ACL's host may be a CIDR block
CONTROLLER_UNREGISTRATION = 33  # 4.4-IV2: UnregisterControllerRecord

SPARKRAFT_VERSION = "sparkraft.version"
CHANGE_BLOCKS = 1  # sparkraft.version 1: many partition changes in one PartitionChangeBlockRecord

# sparkraft's own metadata.version levels of before (1: base, 2: reassignment, 3: ELR, 4: change
# blocks) -> (Kafka's level that holds the same, sparkraft.version)
LEGACY: dict[int, tuple[int, int]] = {1: (14, 0), 2: (14, 0), 3: (ELR, 0), 4: (ELR, CHANGE_BLOCKS)}

# record API key -> [(first level, version written from it), ...]: the versions Kafka's controller
# writes a record at (registerBrokerRecordVersion, partitionRecordVersion, ... in MetadataVersion);
# a record not here is written at version 0
_RECORD_VERSIONS: dict[int, tuple[tuple[int, int], ...]] = {
    0: ((7, 1), (8, 2), (DIRECTORY_ASSIGNMENT, 3), (CORDONED_LOG_DIRS, 4)),  # RegisterBrokerRecord
    3: ((7, 0), (DIRECTORY_ASSIGNMENT, 1), (ELR, 2)),  # PartitionRecord
    5: ((7, 0), (DIRECTORY_ASSIGNMENT, 1), (ELR, 2)),  # PartitionChangeRecord
}
# BrokerRegistrationChangeRecord's version follows what it changes, as Kafka writes it: 0 fencing, 1
# controlled shutdown, 2 log directories (export.py)


def record_version(api_key: int, level: int) -> int:
    """The version Kafka writes record ``api_key`` at, at metadata.version ``level``."""
    version = 0
    for first, v in _RECORD_VERSIONS.get(api_key, ()):
        if level >= first:
            version = v
    return version


def release(level: int) -> str:
    """Kafka's name of ``level`` ("3.9-IV0"), or the number where Kafka has none."""
    return RELEASES.get(level, str(level))


def from_legacy(level: int) -> tuple[int, int]:
    """A metadata.version level as written in the log: (Kafka's level, the sparkraft.version it
    implies, 0 for none). sparkraft's own levels 1-4 read as Kafka's level that holds the same."""
    return LEGACY.get(level, (level, 0))


def supported_range(lo: int, hi: int) -> tuple[int, int]:
    """A broker's supported metadata.version range as registered: a sparkraft broker of before
    registered its own levels (1 to at most 4), read as Kafka's; Kafka's brokers name 7 or more."""
    if 0 < hi <= max(LEGACY):
        return from_legacy(lo)[0], from_legacy(hi)[0]
    return lo, hi


_NAME = re.compile(r"^(\d+\.\d+)(?:-IV(\d+))?$")


def parse_level(text: str) -> int:
    """``--release-version``'s value: Kafka's name ("3.9-IV0"; a release alone, "3.9", is its newest
    level) or a level number; sparkraft's own levels 1-4 of before read as Kafka's (LEGACY)."""
    text = text.strip()
    if text.isdigit():
        return from_legacy(int(text))[0]
    m = _NAME.match(text)
    if m:
        release_name, iv = m.group(1), m.group(2)
        found = [lvl for lvl, name in RELEASES.items()
                 if name.split("-")[0] == release_name and (iv is None or name == f"{release_name}-IV{iv}")]
        if found:
            return max(found)
    raise SparkraftError(Errors.INVALID_UPDATE_VERSION, f"Unknown metadata.version {text!r}: give Kafka's name "
                                                        f"(3.6-IV2 ... {RELEASES[max(RELEASES)]}) or its level")
