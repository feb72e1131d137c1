"""The SQL box's queries, each run in a child process of its own, with a memory limit, a time limit
and a cancel.

DataFusion through ``deltalake.QueryBuilder`` has neither a memory pool nor a timeout: one
``SELECT * FROM range(300000000)`` took the console to 2.1 GB, a cross join ran 14 s while every
other page waited. Here a query runs in a forked child (a forkserver with the readers imported
once); the console watches the child's resident memory and its time, and kills it past
MEMORY_LIMIT_MB or TIME_LIMIT_S, or as soon as the browser that asked has gone. At most
MAX_RUNNING run at once. What comes back (the first rows, or the CSV) has the warehouse's paths on
the server's disk replaced by ``<warehouse>``: a browser has no business knowing them.
"""
from __future__ import annotations

import multiprocessing
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from quorum.metrics.processes import rss_mb

MEMORY_LIMIT_MB = 512
TIME_LIMIT_S = 30.0
MAX_RUNNING = 2
MAX_CSV_BYTES = 64 << 20  # a larger answer is `sparkraft sql`'s to write, on the reader's own machine
WAIT_FOR_ROOM_S = 5.0
POLL_S = 0.02

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(["delta_tables.sql", "pyarrow.csv"])
_running = threading.BoundedSemaphore(MAX_RUNNING)


@dataclass(frozen=True)
class QueryLimits:
    """What one query may take (``sparkraft console --query-timeout``, ``--query-memory``)."""

    seconds: float = TIME_LIMIT_S
    memory_mb: int = MEMORY_LIMIT_MB

    @property
    def running(self) -> int:
        """How many queries run at once: the console's, not a query's (MAX_RUNNING)."""
        return MAX_RUNNING


class QueryRefused(ValueError):
    """A query that was stopped (memory, time) or could not run: the message says which."""


@dataclass(frozen=True)
class Answer:
    columns: list[str]
    rows: list[dict]  # the first ``rows_wanted``
    total: int
    csv: Optional[bytes] = None  # the whole answer as CSV, when asked


def scrub(text: str, warehouse: str) -> str:
    """``text`` with the warehouse's location (and DataFusion's scratch directories) left out."""
    path = re.sub(r"^file://", "", warehouse).rstrip("/")
    for form in (f"file://{path}", path, path.lstrip("/")):  # DataFusion's plans name it without the /
        text = text.replace(form, "<warehouse>")
    return re.sub(r"/[^\s'\"]*sparkraft-changes-[^\s/'\"]+", "<scratch>", text)


def _child(conn, warehouse: str, sql: str, offset: int, rows_wanted: int, as_csv: bool) -> None:
    """In the child: run the query, send back ("ok", Answer) or ("error", message)."""
    try:
        import io

        import pyarrow as pa
        import pyarrow.csv as pa_csv

        from delta_tables.sql import QueryError, query_datafusion

        try:
            table = query_datafusion(warehouse, sql, offset)
        except QueryError as e:
            conn.send(("error", scrub(str(e), warehouse)))
            return
        text_types = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
        for i, field in enumerate(table.schema):  # EXPLAIN's plans, and any path a row names
            if any(is_type(field.type) for is_type in text_types):
                scrubbed = pa.array([None if v is None else scrub(v, warehouse) for v in table.column(i).to_pylist()],
                                    pa.string())
                table = table.set_column(i, field.with_type(pa.string()), scrubbed)
        csv = None
        if as_csv:
            from console.csv_form import csv_safe

            out = io.BytesIO()
            pa_csv.write_csv(csv_safe(table), out)
            csv = out.getvalue()
            if len(csv) > MAX_CSV_BYTES:
                conn.send(("error", f"the answer is {len(csv):,} bytes of CSV; the console sends up to "
                                    f"{MAX_CSV_BYTES:,} (`sparkraft sql --json` prints any size)"))
                return
        conn.send(("ok", Answer(table.column_names, table.slice(0, rows_wanted).to_pylist(), table.num_rows, csv)))
    except MemoryError:
        conn.send(("error", "the query needs more memory than the console gives one"))
    except Exception as e:
        conn.send(("error", scrub(f"{type(e).__name__}: {e}", warehouse)))
    finally:
        conn.close()


def run(warehouse: str, sql: str, offset: int, rows_wanted: int, as_csv: bool = False,
        cancelled: Callable[[], bool] = lambda: False, limits: QueryLimits = QueryLimits()) -> Answer:
    """The answer to ``sql`` at ``offset``, or QueryRefused saying why not (blocking: run it on a
    worker thread, never on the event loop)."""
    if not _running.acquire(timeout=WAIT_FOR_ROOM_S):
        raise QueryRefused(f"the console is running {MAX_RUNNING} queries already: try again in a moment")
    try:
        receive, send = _context.Pipe(duplex=False)
        child = _context.Process(target=_child, args=(send, warehouse, sql, offset, rows_wanted, as_csv),
                                 daemon=True)
        child.start()
        send.close()
        started = time.monotonic()
        time_limit_s, memory_limit_mb = limits.seconds, limits.memory_mb
        try:
            while not receive.poll(POLL_S):
                if not child.is_alive():
                    raise QueryRefused("the query stopped without an answer")
                if cancelled():
                    raise QueryRefused("cancelled: the page that asked was closed")
                if time.monotonic() - started > time_limit_s:
                    raise QueryRefused(f"the query ran past {time_limit_s:g} s and was stopped")
                if rss_mb(child.pid) > memory_limit_mb:
                    raise QueryRefused(f"the query took more than {memory_limit_mb} MB of memory and was stopped")
            try:
                kind, value = receive.recv()
            except EOFError:
                raise QueryRefused("the query stopped without an answer") from None
        finally:
            if child.is_alive():
                child.kill()
            child.join(5)
            receive.close()
        if kind == "error":
            raise QueryRefused(value)
        return value
    finally:
        _running.release()
