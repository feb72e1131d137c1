"""A query's answer in the form a CSV file can hold."""
from __future__ import annotations

import json

import pyarrow as pa

from delta_tables.cut import plain_types


def csv_safe(table: pa.Table) -> pa.Table:
    """Columns CSV cannot hold (lists, structs) as their JSON text; Arrow's view types as plain ones."""
    table = plain_types(table)
    columns = []
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_nested(column.type):
            column = pa.array([None if v is None else json.dumps(v, default=str) for v in column.to_pylist()],
                              pa.string())
        columns.append(column)
    return pa.table(dict(zip(table.column_names, columns)))
