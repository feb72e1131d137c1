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
import ipaddress
import json
import logging
import threading
import time
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import parse_qs, urlencode

import jinja2
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from console import history, model, sql_runner
from console.model import ConsoleError, Warehouse
from console.sql_guard import RefusedSql, check
from quorum.metrics.registry import Registry, histogram

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
    env.globals["fleet"] = None  # in a fleet's console: the cluster shown and the others (console/fleet.py)
    return env


class Console:
    """The application's state: the warehouse, the controllers (optional) and the cut streams."""

    def __init__(self, warehouse: str, quorum=None, limits: sql_runner.QueryLimits = sql_runner.QueryLimits()):
        self.wh = Warehouse(warehouse)
        self.quorum = quorum
        self.limits = limits
        self.env = _environment()
        self.env.globals["limits"] = limits
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

        root = request.scope.get("root_path", "")  # /clusters/NAME in a fleet's console (console/fleet.py)

        def link(path: str, **params) -> str:
            """``path`` at the page's cut, with ``params`` (None values left out)."""
            kept = {"at": at, "time": at_time} if (at or at_time) else {}
            query = {k: v for k, v in {**kept, **params}.items() if v not in (None, "")}
            return root + path + ("?" + urlencode(query) if query else "")

        others = {k: v for k, v in request.query_params.items() if k not in ("at", "time", "start")}
        live_link = request.url.path + ("?" + urlencode(others) if others else "")
        html = self.env.get_template(template).render(
            request=request, link=link, live_link=live_link, pinned=bool(at or at_time), at=at, at_time=at_time,
            newest_offset=self.newest_offset, path=request.url.path[len(root):] or "/", root=root, **context)
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

        async def revert(r: Request):
            return await self.page(r, "revert.html", lambda cut: model.revert_plan(self.wh, cut))

        async def audit(r: Request):
            return await self.page(r, "audit.html", lambda cut: {
                **model.audit_page(self.wh, cut, q(r, "principal"), q(r, "resource"), q(r, "outcome"), q(r, "since"),
                                   start(r)),
                **{k: q(r, k) for k in ("principal", "resource", "outcome", "since")}})

        async def record(r: Request):
            return await self.page(r, "record.html", lambda cut: {"record": model.record(self.wh, r.path_params["offset"])})

        async def sql(r: Request):
            """GET shows the box (a link may fill it in); POST, from this console's own pages, runs it."""
            if r.method == "GET":
                return await self.page(r, "sql.html", lambda cut: {"sql": q(r, "q"), "result": None})
            form, refusal = await _posted_form(r)
            if refusal:
                return self.render(r, "error.html", status=403, message=refusal)
            text = form.get("q", "")
            if not text:
                return await self.page(r, "sql.html", lambda cut: {"sql": "", "result": None})
            answer = await self._run_query(r, text, form)
            if isinstance(answer, Response):
                return answer
            return await self.page(r, "sql.html", lambda cut: {"sql": text, "result": {
                "columns": answer.columns, "total": answer.total, "rows": answer.rows}})

        async def sql_csv(r: Request):
            form, refusal = await _posted_form(r)
            if refusal:
                return self.render(r, "error.html", status=403, message=refusal)
            answer = await self._run_query(r, form.get("q", ""), form, as_csv=True)
            if isinstance(answer, Response):
                return answer
            return Response(answer.csv, media_type="text/csv", headers={
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
            Route("/audit", audit), Route("/revert", revert),
            Route("/sql", sql, methods=["GET", "POST"]), Route("/sql.csv", sql_csv, methods=["POST"]),
            Route("/events", events),
            Route("/static/plotly.min.js", plotly_js), Route("/metrics", metrics),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ], not_found

    async def _run_query(self, r: Request, text: str, form: dict, as_csv: bool = False):
        """The query's sql_runner.Answer, or the error page saying why there is none. The query runs
        in a child process (sql_runner.py), off the event loop, and is stopped if the browser goes."""
        gone = threading.Event()

        def work():
            cut = self.wh.resolve(form.get("at") or None, form.get("time") or None)
            return sql_runner.run(self.wh.uri, check(text), cut.offset, SQL_ROWS_SHOWN, as_csv, cancelled=gone.is_set,
                                  limits=self.limits)

        async def watch() -> None:
            while not await r.is_disconnected():
                await asyncio.sleep(0.2)
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            return await run_in_threadpool(work)
        except (ConsoleError, RefusedSql, sql_runner.QueryRefused, ValueError) as e:
            return self.render(r, "error.html", status=400, message=str(e))
        finally:
            watcher.cancel()


def _console_metrics(console: Console):
    """The console's own ``/metrics``: each page's time, and how new the newest cut it shows is."""
    registry = Registry()
    pages = registry.histogram(histogram("sparkraft_console_page_seconds", "Computing and rendering a page, by "
                                         "page.", labels=("page",)))
    registry.gauge("sparkraft_console_newest_cut_offset", "The newest cut's offset the console sees (none yet: no "
                   "sample).", lambda: console.newest_offset)
    return registry, pages


async def _posted_form(r: Request) -> tuple[dict, str]:
    """(the urlencoded form, "") of a POST from this console's own pages; or ({}, why not): a page
    of another site may make a browser post here (a form, an image), but not with our Origin."""
    origin = r.headers.get("origin")
    fetch_site = r.headers.get("sec-fetch-site")
    own = f"{r.url.scheme}://{r.headers.get('host', '')}"
    if (origin is not None and origin != own) or fetch_site not in (None, "same-origin", "none"):
        return {}, f"a query posted from {origin or 'another site'}: the console runs only its own pages' queries"
    body = (await r.body()).decode("utf-8", "replace")
    return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}, ""


class HostCheck:
    """Serves only requests whose Host is one the console is reached by: a name it was told
    (--allow-host, localhost, the --listen host) or an IP address. A name that merely resolves to
    this machine (DNS rebinding: evil.example.com pointed at 127.0.0.1) is refused, so another
    site's page cannot read the console through a browser."""

    def __init__(self, app, names: frozenset[str]):
        self.app, self.names = app, names

    def allows(self, host: str) -> bool:
        name = host.strip().lower()
        name = name[1:name.index("]")] if name.startswith("[") and "]" in name else name.rsplit(":", 1)[0] \
            if name.count(":") == 1 else name
        if name in self.names:
            return True
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return False

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if not self.allows(host):
                response = Response(f"Host {host[:100]!r} is not one this console serves (--allow-host NAME adds "
                                    f"one)\n", status_code=421, media_type="text/plain", headers=SECURITY_HEADERS)
                return await response(scope, receive, send)
        return await self.app(scope, receive, send)


def make_app(warehouse: str, quorum=None, allowed_hosts: tuple[str, ...] = (),
             limits: sql_runner.QueryLimits = sql_runner.QueryLimits()) -> Starlette:
    console = Console(warehouse, quorum, limits)
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
    app.add_middleware(HostCheck, names=frozenset({"localhost", *(h.lower() for h in allowed_hosts)}))
    return app
