"""Who votes: replica keys and voter sets (KIP-853), as they travel in KRAFT_VOTERS control records.

A replica is a (node id, directory id) pair. The directory id is the random id ``storage format``
writes into ``meta.properties``, so a node whose disk was wiped and formatted again comes back with
a new one: under its old id it is a stranger to the voter set, an observer, and can never vote with
a log it lost. A voter of a static quorum (``controller.quorum.voters``, kraft.version 0) has no
directory id; any replica with its node id is that voter.

A VoterSet is immutable; ``with_voter`` and ``without_voter`` return the changed set, one voter at
a time (Raft's single-server change: any majority of the old set meets any majority of the new).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Optional

from quorum.log import control_records

# Kafka's Uuid.ZERO_UUID: how a directory id nobody told is shown (a static voter's, a peer's that
# did not say)
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass(frozen=True, slots=True, order=True)
class ReplicaKey:
    id: int
    directory_id: Optional[str] = None  # None: unknown (a static voter, or a peer that did not say)

    def __str__(self) -> str:
        return f"{self.id}" if self.directory_id is None else f"{self.id}:{self.directory_id}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str  # the listener's name, e.g. CONTROLLER
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    key: ReplicaKey
    endpoints: tuple[Endpoint, ...] = ()

    def matches(self, key: ReplicaKey) -> bool:
        """Is ``key`` this voter? A voter without a directory id (static) is its node id."""
        return key.id == self.key.id and (self.key.directory_id is None
                                          or key.directory_id == self.key.directory_id)


class VoterSet(Mapping[int, Voter]):
    """The voters by node id (one voter per node id)."""

    __slots__ = ("_voters", "_ids")

    def __init__(self, voters: Iterable[Voter] = ()):
        by_id: dict[int, Voter] = {}
        for v in voters:
            if v.key.id in by_id:
                raise ValueError(f"node {v.key.id} is in the voter set twice")
            by_id[v.key.id] = v
        self._voters = by_id
        self._ids = frozenset(by_id)

    @classmethod
    def static(cls, ids: Iterable[int], endpoints: Optional[Mapping[int, tuple[Endpoint, ...]]] = None) -> "VoterSet":
        """The voters of ``controller.quorum.voters``: node ids without directory ids."""
        return cls(Voter(ReplicaKey(i), (endpoints or {}).get(i, ())) for i in ids)

    def __getitem__(self, node_id: int) -> Voter:
        return self._voters[node_id]

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._voters))

    def __len__(self) -> int:
        return len(self._voters)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VoterSet) and self._voters == other._voters

    def __hash__(self) -> int:
        return hash(frozenset(self._voters.values()))

    def __repr__(self) -> str:
        return f"VoterSet({', '.join(str(self._voters[i].key) for i in self)})"

    @property
    def ids(self) -> frozenset[int]:
        return self._ids

    @property
    def replica_keys(self) -> tuple[ReplicaKey, ...]:
        return tuple(self._voters[i].key for i in self)

    @property
    def majority(self) -> int:
        return len(self._voters) // 2 + 1

    def is_voter(self, key: ReplicaKey) -> bool:
        v = self._voters.get(key.id)
        return v is not None and v.matches(key)

    def with_voter(self, voter: Voter) -> "VoterSet":
        if voter.key.id in self._voters:
            raise ValueError(f"node {voter.key.id} is already a voter")
        return VoterSet([*self._voters.values(), voter])

    def without_voter(self, key: ReplicaKey) -> "VoterSet":
        if not self.is_voter(key):
            raise ValueError(f"{key} is not a voter")
        return VoterSet(v for i, v in self._voters.items() if i != key.id)

    @classmethod
    def parse(cls, text: str, listener: str = "CONTROLLER") -> "VoterSet":
        """``storage format --initial-controllers``: ``ID@HOST:PORT:DIRECTORY_ID,...`` (Kafka's form).
        ValueError, naming the entry, for anything else."""
        voters = []
        for entry in (e.strip() for e in text.split(",")):
            node, at, rest = entry.partition("@")
            host, _, tail = rest.rpartition(":") if rest.count(":") >= 2 else ("", "", "")
            host, _, port = host.rpartition(":") if host else ("", "", "")
            if not at or not node.isdigit() or not host or not port.isdigit() or not tail:
                raise ValueError(f"{entry!r} is not ID@HOST:PORT:DIRECTORY_ID")
            if not 0 < int(port) < 65536:
                raise ValueError(f"{entry!r}: port {port} is not in 1..65535")
            voters.append(Voter(ReplicaKey(int(node), tail), (Endpoint(listener, host.strip("[]"), int(port)),)))
        try:
            return cls(voters)
        except ValueError as e:
            raise ValueError(f"--initial-controllers: {e}") from None

    # -- as a control record ----------------------------------------------------------------
    def encode(self) -> bytes:
        return control_records.encode_control(control_records.KRAFT_VOTERS, {"version": 0, "voters": [
            {"id": v.key.id, "directory_id": v.key.directory_id,
             "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in v.endpoints]}
            for v in (self._voters[i] for i in self)]})

    @classmethod
    def from_control(cls, data: dict) -> "VoterSet":
        """The set a decoded KRAFT_VOTERS record holds (ValueError if it is malformed)."""
        try:
            return cls(Voter(ReplicaKey(int(v["id"]), v.get("directory_id")),
                             tuple(Endpoint(str(e["name"]), str(e["host"]), int(e["port"]))
                                   for e in v.get("endpoints", ())))
                       for v in data["voters"])
        except (KeyError, TypeError) as e:
            raise ValueError(f"malformed voters record: {e}") from None


def raft_state_records(voters: Optional[VoterSet], kraft_version: int) -> list[bytes]:
    """The control records a snapshot carries for the quorum: none for a static quorum."""
    if voters is None and not kraft_version:
        return []
    out = [control_records.kraft_version(kraft_version)]
    if voters is not None:
        out.append(voters.encode())
    return out
