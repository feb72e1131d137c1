"""AlterUserScramCredentials and DescribeUserScramCredentials (Kafka's ScramControlManager).

The client sends the salt and the salted password; the controller derives StoredKey and ServerKey
(quorum/security/scram.py) and writes them in a UserScramCredentialRecord. A user's changes in one
request apply together or not at all, with Kafka's errors: UNACCEPTABLE_CREDENTIAL (empty name,
iterations out of 4096..16384, a salt or salted password that cannot be one), UNSUPPORTED_SASL_MECHANISM,
DUPLICATE_RESOURCE (the same user and mechanism twice), RESOURCE_NOT_FOUND (deleting what is not there).
"""
from __future__ import annotations

from google.protobuf.message import Message

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.image import MetadataImage
from quorum.metadata.scram import MECHANISM_NAMES, mechanism_name
from quorum.security.scram import MECHANISMS, Mechanism, check_iterations

MAX_SALT_BYTES = 1024
MAX_NAME_CHARS = 1024


def _mechanism(name: str) -> Mechanism:
    m = MECHANISMS.get(name.upper())
    if m is None:
        raise SparkraftError(Errors.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {name!r}")
    return m


def _check_name(name: str) -> None:
    if not name:
        raise SparkraftError(Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise SparkraftError(Errors.UNACCEPTABLE_CREDENTIAL, f"Username longer than {MAX_NAME_CHARS} characters")


def _upsert(u: api.ScramCredentialUpsertion) -> pb.UserScramCredentialRecord:
    m = _mechanism(u.mechanism)
    try:
        check_iterations(u.iterations)
    except ValueError as e:
        raise SparkraftError(Errors.UNACCEPTABLE_CREDENTIAL, str(e)) from None
    if not 0 < len(u.salt) <= MAX_SALT_BYTES:
        raise SparkraftError(Errors.UNACCEPTABLE_CREDENTIAL, f"The salt must be 1..{MAX_SALT_BYTES} bytes")
    if len(u.salted_password) != m.key_bytes:
        raise SparkraftError(Errors.UNACCEPTABLE_CREDENTIAL, f"A {m.name} salted password is {m.key_bytes} bytes, "
                                                             f"not {len(u.salted_password)}")
    c = m.credential(u.salted_password, u.salt, u.iterations)
    return pb.UserScramCredentialRecord(name=u.name, mechanism=m.code, salt=c.salt, stored_key=c.stored_key,
                                        server_key=c.server_key, iterations=c.iterations)


def alter(image: MetadataImage, req: api.AlterUserScramCredentialsRequest
          ) -> tuple[list[Message], tuple[api.UserResult, ...]]:
    changes = [(d.name, d) for d in req.deletions] + [(u.name, u) for u in req.upsertions]
    by_user: dict[str, list] = {}
    for name, change in changes:
        by_user.setdefault(name, []).append(change)
    records: list[Message] = []
    results = []
    for user, user_changes in by_user.items():
        try:
            _check_name(user)
            seen: set[str] = set()
            user_records: list[Message] = []
            for change in user_changes:
                m = _mechanism(change.mechanism)
                if m.name in seen:
                    raise SparkraftError(Errors.DUPLICATE_RESOURCE, f"A user credential cannot be altered twice "
                                                                    f"in the same request ({user}, {m.name})")
                seen.add(m.name)
                if isinstance(change, api.ScramCredentialDeletion):
                    if image.scram.credential(user, m.code) is None:
                        raise SparkraftError(Errors.RESOURCE_NOT_FOUND, f"Attempt to delete a user credential "
                                                                        f"that does not exist ({user}, {m.name})")
                    user_records.append(pb.RemoveUserScramCredentialRecord(name=user, mechanism=m.code))
                else:
                    user_records.append(_upsert(change))
        except SparkraftError as e:
            results.append(api.UserResult(user, e.error, e.message))
            continue
        records += user_records
        results.append(api.UserResult(user))
    return records, tuple(results)


def describe(image: MetadataImage, req: api.DescribeUserScramCredentialsRequest) -> tuple[api.UserScramCredentials, ...]:
    if req.users:  # by key, not a scan
        users = {name: {code: c for code in MECHANISM_NAMES if (c := image.scram.credential(name, code))}
                 for name in dict.fromkeys(req.users)}
    else:
        users = image.scram.users()
    out = []
    for name in sorted(users) if not req.users else users:
        creds = users[name]
        if not creds:
            out.append(api.UserScramCredentials(name, Errors.RESOURCE_NOT_FOUND,
                                                f"Attempt to describe a user credential that does not exist: {name}"))
            continue
        out.append(api.UserScramCredentials(name, credentials=tuple(
            (mechanism_name(code), c.iterations) for code, c in sorted(creds.items()))))
    return tuple(out)
