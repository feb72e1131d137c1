"""The console's SQL box runs reads only.

DataFusion, which ``sparkraft sql`` runs on, also writes files (``COPY ... TO '/path'``) and reads
any file the server can (``CREATE EXTERNAL TABLE ... LOCATION``): fine for a command line run by
someone who can read those files anyway, not for a page served to others. So a statement is run
only if, outside its string literals, quoted names and comments, it is one statement, begins with
SELECT, WITH, VALUES or EXPLAIN, and names none of the words that write, create or read files.
"""
from __future__ import annotations

import re

READS = ("select", "with", "values", "explain")
REFUSED = ("copy", "create", "insert", "update", "delete", "drop", "alter", "set", "prepare", "execute",
           "deallocate", "truncate", "merge", "external", "location", "describe", "show")
_HIDDEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|--[^\n]*|/\*.*?\*/", re.S)
_WORD = re.compile(r"[A-Za-z_]+")
MAX_SQL_CHARS = 20_000


class RefusedSql(ValueError):
    """A statement the console does not run."""


def check(sql: str) -> str:
    """``sql`` without a trailing semicolon, or RefusedSql saying why it is not run."""
    if len(sql) > MAX_SQL_CHARS:
        raise RefusedSql(f"the query is {len(sql):,} characters long; the console runs up to {MAX_SQL_CHARS:,}")
    bare = _HIDDEN.sub(" ", sql)
    stripped = bare.strip().rstrip(";").strip()
    if not stripped:
        raise RefusedSql("no query: write a SELECT, e.g. SELECT name, partition_count FROM topics")
    if ";" in stripped:
        raise RefusedSql("one statement at a time")
    words = [w.lower() for w in _WORD.findall(stripped)]
    if words[0] not in READS:
        raise RefusedSql(f"the console runs reads only (SELECT, WITH, VALUES, EXPLAIN), not {words[0].upper()}")
    written = sorted({w for w in words if w in REFUSED})
    if written:
        raise RefusedSql(f"the console runs reads only: {written[0].upper()} is not run here "
                         f"(`sparkraft sql` runs any statement on your own machine)")
    return sql.strip().rstrip(";")
