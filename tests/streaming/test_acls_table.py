"""The ``acls`` table (DESIGN §12): one row per ACL binding at every cut, following CreateAcls and
DeleteAcls through the log; read back by pyarrow and DataFusion, never by the writer."""
from __future__ import annotations

from test_materializer import as_batch, busy_controller, image_table, log_rows, table_rows

from delta_tables.cut import latest_cut
from delta_tables.schemas import ACLS, SCHEMAS, SNAPSHOTS
from delta_tables.sql import query_datafusion
from delta_tables.writer import DeltaRsWriter
from quorum.controller import api
from streaming.materializer import Materializer


def test_the_acls_table_follows_creates_and_deletes_at_each_cut(tmp_path):
    c = busy_controller()  # it holds one ACL already
    c.request(api.CreateAclsRequest((
        api.AclBinding("TOPIC", "orders-", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW"),
        api.AclBinding("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "10.0.0.1", "ALTER", "DENY"))))
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    m.process(as_batch(rows))
    first_cut = latest_cut(str(tmp_path))
    assert table_rows(tmp_path, ACLS) == image_table(c.core.image, ACLS)
    assert len(table_rows(tmp_path, ACLS)) == 3

    c.request(api.DeleteAclsRequest((api.AclBinding("TOPIC", "orders-", "PREFIXED", "User:bob", "*", "WRITE",
                                                    "ALLOW"),)))
    m.process(as_batch(log_rows(c, start=len(rows))))
    assert table_rows(tmp_path, ACLS) == image_table(c.core.image, ACLS)
    assert {r["principal"] for r in table_rows(tmp_path, ACLS)} == {"User:alice", "User:ops"}
    assert len(table_rows(tmp_path, ACLS, first_cut)) == 3  # the older cut still holds bob's

    got = query_datafusion(str(tmp_path), "SELECT principal, host, operation, permission_type, resource_type, "
                                          "resource_name, pattern_type FROM acls WHERE principal = 'User:ops'")
    assert got.to_pylist() == [{"principal": "User:ops", "host": "10.0.0.1", "operation": "ALTER",
                                "permission_type": "DENY", "resource_type": "CLUSTER",
                                "resource_name": "kafka-cluster", "pattern_type": "LITERAL"}]


def test_the_acls_schema_is_the_contracts():
    names = SCHEMAS[ACLS].names
    for column in ("principal", "host", "operation", "permission_type", "resource_type", "resource_name",
                   "pattern_type", "last_offset"):
        assert column in names
    assert "acls_version" in SCHEMAS[SNAPSHOTS].names
