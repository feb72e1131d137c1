"""The ``users`` table (DESIGN §12): one row per SCRAM user and mechanism at every cut, with its
iterations and never a salt, a key or a password: not in ``users``, not in the ``records`` table's
JSON or raw frames, not in a snapshot row. Read back by pyarrow and DataFusion, never by the writer."""
from __future__ import annotations

from pathlib import Path

from test_materializer import as_batch, busy_controller, image_table, log_rows, table_rows

from delta_tables.cut import latest_cut
from delta_tables.schemas import SCHEMAS, SNAPSHOTS, USERS
from delta_tables.sql import query_datafusion
from delta_tables.writer import DeltaRsWriter
from quorum.controller import api
from quorum.log.api import OffsetAndEpoch
from quorum.security.scram import MECHANISMS
from quorum.snapshot.checkpoint import write_checkpoint
from streaming.materializer import Materializer
from streaming.source import snapshot_row

SALT = b"a-salt-to-look-for-in-every-file"


def upsert(user: str, mechanism: str = "SCRAM-SHA-512", iterations: int = 4096) -> api.ScramCredentialUpsertion:
    m = MECHANISMS[mechanism]
    return api.ScramCredentialUpsertion(user, mechanism, iterations, SALT, m.salted_password("pw", SALT, iterations))


def triples(rows) -> list[tuple]:
    return sorted((r["name"], r["mechanism"], r["iterations"]) for r in rows)


def secrets_of(image) -> list[bytes]:
    return [v for c in image.scram.credentials.values() for v in (c.salt, c.stored_key, c.server_key)]


def assert_no_secret_in(warehouse: Path, secrets: list[bytes]) -> None:
    for path in warehouse.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in secrets:
                assert secret not in data, f"a credential reached {path}"


def test_the_users_table_follows_credentials_and_holds_no_secret(tmp_path):
    c = busy_controller()
    c.request(api.AlterUserScramCredentialsRequest(upsertions=(
        upsert("alice"), upsert("alice", "SCRAM-SHA-256", 8192), upsert("bob"))))
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    m.process(as_batch(rows))
    first_cut = latest_cut(str(tmp_path))
    assert table_rows(tmp_path, USERS) == image_table(c.core.image, USERS)
    assert triples(table_rows(tmp_path, USERS)) == [("alice", "SCRAM-SHA-256", 8192), ("alice", "SCRAM-SHA-512", 4096),
                                                    ("bob", "SCRAM-SHA-512", 4096)]
    secrets = secrets_of(c.core.image)

    c.request(api.AlterUserScramCredentialsRequest(deletions=(api.ScramCredentialDeletion("bob", "SCRAM-SHA-512"),),
                                                   upsertions=(upsert("alice", iterations=10000),)))
    m.process(as_batch(log_rows(c, start=len(rows))))
    assert triples(table_rows(tmp_path, USERS)) == [
        ("alice", "SCRAM-SHA-256", 8192), ("alice", "SCRAM-SHA-512", 10000)]
    assert len(table_rows(tmp_path, USERS, first_cut)) == 3  # the older cut still has bob
    got = query_datafusion(str(tmp_path), "SELECT name, iterations FROM users WHERE mechanism = 'SCRAM-SHA-512'")
    assert got.to_pylist() == [{"name": "alice", "iterations": 10000}]
    records = query_datafusion(str(tmp_path), "SELECT data FROM records WHERE type = 'USER_SCRAM_CREDENTIAL_RECORD'")
    assert len(records) == 4 and all('"salt":"(redacted)"' in r["data"] for r in records.to_pylist())
    assert_no_secret_in(tmp_path, secrets + secrets_of(c.core.image))

    # a materialiser restarted on the warehouse rebuilds its image from the redacted raw frames
    again = Materializer(DeltaRsWriter(tmp_path))
    again.process(as_batch([]))
    assert table_rows(tmp_path, USERS) == image_table(c.core.image, USERS)


def test_a_snapshot_row_carries_users_without_their_secrets(tmp_path):
    c = busy_controller()
    c.request(api.AlterUserScramCredentialsRequest(upsertions=(upsert("carol"),)))
    end = c.end_offset
    path = tmp_path / "snapshot.checkpoint"
    write_checkpoint(path, c.core.image, {"end_offset": end, "epoch": 1})
    assert SALT in path.read_bytes()
    wh = tmp_path / "wh"
    Materializer(DeltaRsWriter(wh)).process(as_batch([snapshot_row(OffsetAndEpoch(end, 1), path.read_bytes())]))
    assert table_rows(wh, USERS) == [{"name": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    assert_no_secret_in(wh, secrets_of(c.core.image))


def test_the_users_schema_is_the_contracts():
    assert SCHEMAS[USERS].names == ["name", "mechanism", "iterations", "last_offset"]
    assert "users_version" in SCHEMAS[SNAPSHOTS].names
