"""Which records the timeline marks: elections, reassignments and fencings, told from a record's
type and its JSON (``records.data``), matched as text by Arrow for a whole file of records at once."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

# mark -> (record type, a regular expression its JSON matches)
MARKS: dict[str, tuple[str, str]] = {
    "election": ("PARTITION_CHANGE_RECORD", r'"leader":'),
    "reassignment": ("PARTITION_CHANGE_RECORD", r'"adding_replicas":\[\d'),
    "fencing": ("BROKER_REGISTRATION_CHANGE_RECORD", r'"fenced":true'),
}


def with_marks(records: pa.Table) -> pa.Table:
    """``records`` (with ``type`` and ``data``) without ``data``, and a boolean column per mark."""
    out = records
    for mark, (record_type, pattern) in MARKS.items():
        column = pc.and_(pc.equal(records.column("type"), record_type),
                         pc.match_substring_regex(records.column("data"), pattern))
        if mark == "fencing":
            column = pc.or_(column, pc.equal(records.column("type"), "FENCE_BROKER_RECORD"))
        out = out.append_column(mark, column)
    return out.drop_columns(["data"])
