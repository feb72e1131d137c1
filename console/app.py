"""The console's web application: Starlette routes over console/model.py and console/history.py.

Every page takes ``at`` (an offset) or ``time`` (ISO 8601) and then shows the cluster as of that
cut; without either it shows the newest cut and follows new ones: ``/events`` is a stream of
server-sent events, one per new cut, on which an open page fetches itself again (console.js).

Reading Delta tables blocks, so each page is computed in Starlette's thread pool; one poller task
looks for new cuts for all the streams. Bad input (ConsoleError, a refused or failing query) is a
page with the message and status 400 (404 for an unknown topic, broker or record), and changes
nothing. Responses forbid framing, sniffing and scripts from anywhere but the console itself.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import json
import logging
import time
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import urlencode

import jinja2
import pyarrow as pa
import pyarrow.csv as pa_csv
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from console import history, model
from console.model import ConsoleError, Warehouse
from console.sql_guard import RefusedSql, check
from delta_tables.cut import plain_types

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SQL_ROWS_SHOWN = 1000
POLL_S = 0.2  # how often the poller looks for a new cut (a look reads only the log entries added)
KEEPALIVE_S = 15.0
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def _plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _format_time(value) -> str:
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    return "" if value is None else str(value)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["time"] = _format_time
    env.filters["ids"] = lambda ids: ", ".join(str(i) for i in ids or ()) or "—"
    env.filters["ms_time"] = lambda ms: "never" if ms is None or ms < 0 else _format_time(
        datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc))
    env.filters["number"] = lambda n: f"{n:,}" if isinstance(n, int) else n
    return env


class Console:
    """The application's state: the warehouse, the controllers (optional) and the cut streams."""

    def __init__(self, warehouse: str, quorum=None):
        self.wh = Warehouse(warehouse)
        self.quorum = quorum
        self.env = _environment()
        self.newest_offset: Optional[int] = None
        self._changed = asyncio.Event()
        self._poller: Optional[asyncio.Task] = None
        self.metrics, self.page_seconds = _console_metrics(self)

    # the cut streams ------------------------------------------------------------------------------

    async def _poll(self) -> None:
        while True:
            try:
                offset = (await run_in_threadpool(self.wh.newest)).offset
            except ConsoleError:
                offset = None  # no cut yet
            except Exception as e:  # the store hiccuped: say so once a poll, keep polling
                log.warning("cannot read the newest cut: %s", e)
                offset = self.newest_offset
            if offset != self.newest_offset:
                self.newest_offset = offset
                self._changed.set()
                self._changed = asyncio.Event()
            await asyncio.sleep(POLL_S)

    async def start(self) -> None:
        self._poller = asyncio.create_task(self._poll())

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        if self.quorum is not None:
            self.quorum.close()

    async def events(self, request: Request):
        sent = None
        while not await request.is_disconnected():
            if self.newest_offset != sent and self.newest_offset is not None:
                sent = self.newest_offset
                yield f"event: cut\ndata: {json.dumps({'offset': sent})}\n\n"
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), KEEPALIVE_S)
            except asyncio.TimeoutError:
                yield ": keepalive\n\n"

    # pages ------------------------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200, **context) -> HTMLResponse:
        at, at_time = request.query_params.get("at", ""), request.query_params.get("time", "")

        def link(path: str, **params) -> str:
            """``path`` at the page's cut, with ``params`` (None values left out)."""
            kept = {"at": at, "time": at_time} if (at or at_time) else {}
            query = {k: v for k, v in {**kept, **params}.items() if v not in (None, "")}
            return path + ("?" + urlencode(query) if query else "")

        others = {k: v for k, v in request.query_params.items() if k not in ("at", "time", "start")}
        live_link = request.url.path + ("?" + urlencode(others) if others else "")
        html = self.env.get_template(template).render(
            request=request, link=link, live_link=live_link, pinned=bool(at or at_time), at=at, at_time=at_time,
            newest_offset=self.newest_offset, path=request.url.path, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    async def page(self, request: Request, template: str, compute: Callable[..., dict]) -> Response:
        """``template`` with what ``compute(cut)`` returns, at the page's cut; bad input is an error page."""
        started = time.perf_counter()
        try:
            def work() -> dict:
                cut = self.wh.resolve(request.query_params.get("at"), request.query_params.get("time"))
                return {"cut": cut, "cut_created_at": self.wh.created_at(cut), "first_cut": self._first_cut(),
                        **compute(cut)}
            context = await run_in_threadpool(work)
        except (ConsoleError, RefusedSql, ValueError) as e:
            status = 404 if isinstance(e, model.NotFound) else 400
            return self.render(request, "error.html", status=status, message=str(e))
        response = self.render(request, template, **context)
        took = time.perf_counter() - started
        self.page_seconds.labels(template.removesuffix(".html")).observe(took)
        response.headers["Server-Timing"] = f"compute;dur={took * 1000:.1f}"
        return response

    def _first_cut(self) -> int:
        cuts = self.wh.cuts()
        return cuts.column("offset")[0].as_py() if cuts.num_rows else 0

    def routes(self) -> list:
        q = lambda r, name, default="": r.query_params.get(name, default)  # noqa: E731
        start = lambda r: model.parse_offset(q(r, "start", "0"), "start")  # noqa: E731

        async def overview(r: Request):
            quorum = await run_in_threadpool(self.quorum.describe) if self.quorum is not None else None
            return await self.page(r, "overview.html", lambda cut: {"o": model.overview(self.wh, cut),
                                                                      "quorum": quorum})

        async def topics(r: Request):
            return await self.page(r, "topics.html", lambda cut: {
                "topics": model.topics_page(self.wh, cut, q(r, "q"), start(r), q(r, "only")),
                "search": q(r, "q"), "only": q(r, "only")})

        async def partitions(r: Request):
            return await self.page(r, "partitions.html", lambda cut: {
                "partitions": model.partitions_page(self.wh, cut, q(r, "q"), q(r, "leader"), q(r, "only"), start(r)),
                "search": q(r, "q"), "leader": q(r, "leader"), "only": q(r, "only")})

        async def topic(r: Request):
            return await self.page(r, "topic.html", lambda cut: model.topic(self.wh, cut, r.path_params["name"], start(r)))

        async def brokers(r: Request):
            return await self.page(r, "brokers.html", lambda cut: model.brokers(self.wh, cut))

        async def broker(r: Request):
            return await self.page(r, "broker.html", lambda cut: model.broker(self.wh, cut, r.path_params["id"], start(r)))

        async def timeline(r: Request):
            return await self.page(r, "timeline.html", lambda cut: {"timeline": history.timeline(self.wh)})

        async def diff(r: Request):
            def compute(cut):
                if not q(r, "from") and not q(r, "to"):
                    return {"diff": None}
                a, b = history.resolve_pair(self.wh, q(r, "from"), q(r, "to"))
                return {"diff": history.diff(self.wh, a, b)}
            return await self.page(r, "diff.html", compute)

        async def records(r: Request):
            return await self.page(r, "records.html", lambda cut: {
                **model.records_page(self.wh, cut, q(r, "first"), q(r, "last"), start(r), q(r, "type")),
                "first": q(r, "first"), "last": q(r, "last"), "type": q(r, "type")})

        async def record(r: Request):
            return await self.page(r, "record.html", lambda cut: {"record": model.record(self.wh, r.path_params["offset"])})

        async def sql(r: Request):
            def compute(cut):
                text = q(r, "q")
                if not text:
                    return {"sql": "", "result": None}
                table = self._query(text, cut)
                return {"sql": text, "result": {"columns": table.column_names, "total": table.num_rows,
                                                "rows": table.slice(0, SQL_ROWS_SHOWN).to_pylist()}}
            return await self.page(r, "sql.html", compute)

        async def sql_csv(r: Request):
            try:
                def work() -> bytes:
                    cut = self.wh.resolve(q(r, "at"), q(r, "time"))
                    out = io.BytesIO()
                    pa_csv.write_csv(_csv_safe(self._query(q(r, "q"), cut)), out)
                    return out.getvalue()
                body = await run_in_threadpool(work)
            except (ConsoleError, RefusedSql, ValueError) as e:
                return self.render(r, "error.html", status=400, message=str(e))
            return Response(body, media_type="text/csv", headers={
                **SECURITY_HEADERS, "Content-Disposition": 'attachment; filename="sparkraft-query.csv"'})

        async def events(r: Request):
            return StreamingResponse(self.events(r), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-store", **SECURITY_HEADERS})

        async def plotly_js(r: Request):
            return FileResponse(_plotly_js(), media_type="text/javascript",
                                headers={"Cache-Control": "max-age=86400", **SECURITY_HEADERS})

        async def metrics(r: Request):
            return Response(self.metrics.render(), media_type=CONTENT_TYPE_LATEST)

        async def not_found(r: Request, exc=None):
            return self.render(r, "error.html", status=404, message=f"no page {r.url.path}")

        return [
            Route("/", overview), Route("/topics", topics), Route("/partitions", partitions), Route("/topics/{name:path}", topic),
            Route("/brokers", brokers), Route("/brokers/{id}", broker), Route("/timeline", timeline),
            Route("/diff", diff), Route("/records", records), Route("/records/{offset}", record),
            Route("/sql", sql), Route("/sql.csv", sql_csv), Route("/events", events),
            Route("/static/plotly.min.js", plotly_js), Route("/metrics", metrics),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ], not_found

    def _query(self, text: str, cut) -> pa.Table:
        from delta_tables.sql import QueryError, query_datafusion

        sql = check(text)
        try:
            return query_datafusion(self.wh.uri, sql, cut.offset)
        except QueryError as e:
            raise ConsoleError(str(e)) from None


def _console_metrics(console: Console):
    """The console's own ``/metrics``: each page's time, and how new the newest cut it shows is."""
    from quorum.metrics.registry import Registry, histogram

    registry = Registry()
    pages = registry.histogram(histogram("sparkraft_console_page_seconds", "Computing and rendering a page, by "
                                         "page.", labels=("page",)))
    registry.gauge("sparkraft_console_newest_cut_offset", "The newest cut's offset the console sees (none yet: no "
                   "sample).", lambda: console.newest_offset)
    return registry, pages


def _csv_safe(table: pa.Table) -> pa.Table:
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


def make_app(warehouse: str, quorum=None) -> Starlette:
    console = Console(warehouse, quorum)
    routes, not_found = console.routes()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await console.start()
        try:
            yield
        finally:
            await console.stop()

    app = Starlette(routes=routes, exception_handlers={404: not_found}, lifespan=lifespan, max_body_size=1 << 20)
    app.state.console = console
    return app
