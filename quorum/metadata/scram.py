"""SCRAM credentials by user and mechanism: USER_SCRAM_CREDENTIAL and REMOVE_USER_SCRAM_CREDENTIAL
records (Kafka's ScramImage). Each holds what RFC 5802 lets a server keep: salt, iterations,
StoredKey and ServerKey; never the password. The exchange itself is quorum/security/scram.py."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.errors import ReplayError
from quorum.metadata.mapdelta import MapDelta
from quorum.metadata.pmap import EMPTY, PMap

MECHANISM_NAMES = {pb.ScramMechanism.SCRAM_SHA_256: "SCRAM-SHA-256",
                   pb.ScramMechanism.SCRAM_SHA_512: "SCRAM-SHA-512"}
MECHANISM_CODES = {name: code for code, name in MECHANISM_NAMES.items()}
KEY_BYTES = {pb.ScramMechanism.SCRAM_SHA_256: 32, pb.ScramMechanism.SCRAM_SHA_512: 64}  # the hash's size
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # as Kafka bounds them


def mechanism_name(code: int) -> str:
    return MECHANISM_NAMES.get(code, f"UNKNOWN({code})")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


UserMechanism = tuple[str, int]  # (user name, pb.ScramMechanism code)


@dataclass(frozen=True, slots=True)
class ScramImage:
    credentials: PMap[UserMechanism, ScramCredential] = EMPTY

    def credential(self, user: str, mechanism: int) -> Optional[ScramCredential]:
        return self.credentials.get((user, mechanism))

    def users(self) -> dict[str, dict[int, ScramCredential]]:
        """Every user's credentials by mechanism (for describing; a scan)."""
        out: dict[str, dict[int, ScramCredential]] = {}
        for (user, mechanism), credential in self.credentials.items():
            out.setdefault(user, {})[mechanism] = credential
        return out

    def records(self) -> Iterator[pb.UserScramCredentialRecord]:
        for user, mechanism in sorted(self.credentials):
            c = self.credentials[(user, mechanism)]
            yield pb.UserScramCredentialRecord(name=user, mechanism=mechanism, salt=c.salt,
                                               stored_key=c.stored_key, server_key=c.server_key,
                                               iterations=c.iterations)


class ScramDelta:
    def __init__(self, image: ScramImage) -> None:
        self.image = image
        self.credentials: MapDelta[UserMechanism, ScramCredential] = MapDelta(image.credentials)

    def replay_user_scram_credential(self, r: pb.UserScramCredentialRecord) -> None:
        self.credentials.set((r.name, r.mechanism), ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations))

    def replay_remove_user_scram_credential(self, r: pb.RemoveUserScramCredentialRecord) -> None:
        key = (r.name, r.mechanism)
        if key not in self.credentials:
            raise ReplayError(f"cannot remove the {mechanism_name(r.mechanism)} credential of user {r.name!r}: "
                              f"it has none")
        self.credentials.remove(key)

    def apply(self) -> ScramImage:
        credentials = self.credentials.apply()
        return self.image if credentials is self.image.credentials else ScramImage(credentials)
