"""The console of a fleet's warehouse (delta_tables/fleet.py): ``/`` is the fleet's overview, each
cluster's health, size, freshness and recent changes in one table, and ``/clusters/NAME/...`` is
that cluster's console, every page of the one-cluster console (console/app.py) with a cluster
picker in its header.

A cluster's console is made the first time it is asked for (a fleet of forty clusters does not
poll forty warehouses for new cuts until someone looks at them), so a cluster the fleet gained
since the console started is there too. The overview reads the fleet's ``sources`` table and
each cluster's newest cut, kept per cluster until that cut changes.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import threading
import time
from typing import Optional
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from console import model, sql_runner
from console.app import HERE, SECURITY_HEADERS, Console, HostCheck, _environment, _plotly_js
from delta_tables.fleet import read_sources_table

QUIET_TYPES = ("NO_OP_RECORD", "LEADER_CHANGE", "LOG_HOLD_RECORD", "SNAPSHOT")  # not changes anyone made
RECENT_S = 3600.0  # "recent changes": the records of the last hour


class FleetInfo:
    """What a cluster's pages know of the fleet: the cluster shown, and every cluster (the picker)."""

    def __init__(self, fleet: "FleetConsole", name: str):
        self._fleet, self.name = fleet, name

    @property
    def clusters(self) -> list[str]:
        return sorted(self._fleet.places())


class FleetConsole:
    def __init__(self, fleet: str, limits: sql_runner.QueryLimits = sql_runner.QueryLimits()):
        self.fleet, self.limits = fleet.rstrip("/"), limits
        self.env = _environment()
        self.consoles: dict[str, tuple[Console, Starlette]] = {}
        self._lock = asyncio.Lock()
        self._rows: dict[str, tuple[int, dict]] = {}  # cluster -> (its newest cut's offset, its overview row)
        self._rows_lock = threading.Lock()
        self._warehouses: dict[str, model.Warehouse] = {}  # clusters the overview reads, no console made yet
        self._own: Optional[Starlette] = None

    def places(self) -> dict[str, dict]:
        """Each cluster the ``sources`` table lists: its row."""
        table = read_sources_table(self.fleet)
        return {} if table is None else {r["cluster"]: r for r in table.to_pylist()}

    async def cluster_app(self, name: str) -> Optional[Starlette]:
        async with self._lock:
            if name not in self.consoles:
                place = (await run_in_threadpool(self.places)).get(name)
                if place is None or place["state"] == "removed":
                    return None
                console = Console(place["warehouse"], None, self.limits)
                console.env.globals["fleet"] = FleetInfo(self, name)
                routes, not_found = console.routes()
                await console.start()
                self.consoles[name] = (console, Starlette(routes=routes, exception_handlers={404: not_found}))
            return self.consoles[name][1]

    def overview_rows(self) -> list[dict]:
        now = datetime.datetime.now(datetime.timezone.utc)
        rows = []
        for name, place in sorted(self.places().items()):
            if place["state"] == "removed":
                continue
            rows.append({**place, **self._cluster_row(name, place["warehouse"], now)})
        return rows

    def _cluster_row(self, name: str, warehouse: str, now: datetime.datetime) -> dict:
        """One cluster's size, health and recent changes at its newest cut (kept until it changes)."""
        console = self.consoles.get(name)
        with self._rows_lock:
            wh = console[0].wh if console is not None else self._warehouses.setdefault(
                name, model.Warehouse(warehouse))
        try:
            cut = wh.newest()
        except model.ConsoleError as e:
            return {"error": str(e)}
        with self._rows_lock:
            kept = self._rows.get(name)
        if kept is None or kept[0] != cut.offset:
            health = wh.health(cut)
            brokers = wh.table(cut, "brokers").to_pylist()
            index = wh.records_index(cut)
            changes = index.filter(pc.invert(pc.is_in(index.column("type"), value_set=pa.array(QUIET_TYPES))))
            kept = (cut.offset, {
                "cut": cut.offset, "topics": wh.table(cut, "topics").num_rows, "partitions": health.num_rows,
                "offline": pc.sum(health.column("offline")).as_py() or 0,
                "under_replicated": pc.sum(health.column("under_replicated")).as_py() or 0,
                "brokers": len(brokers), "fenced": sum(1 for b in brokers if model.broker_state(b) == "fenced"),
                "created_at": wh.created_at(cut), "append_times": changes.column("append_time")})
            with self._rows_lock:
                self._rows[name] = kept
        row = dict(kept[1])
        times = row.pop("append_times")
        since = pa.scalar(now - datetime.timedelta(seconds=RECENT_S), times.type)
        row["recent_changes"] = (pc.sum(pc.greater_equal(times, since)).as_py() or 0) if len(times) else 0
        row["age_s"] = (now - row["created_at"]).total_seconds() if row["created_at"] else None
        return row

    async def overview(self, request: Request) -> Response:
        started = time.perf_counter()
        rows = await run_in_threadpool(self.overview_rows)
        html = self.env.get_template("fleet.html").render(
            request=request, rows=rows, fleet_uri=self.fleet, root="", path="/", pinned=False, link=lambda p: p,
            quote=quote)
        response = HTMLResponse(html, headers=SECURITY_HEADERS)
        response.headers["Server-Timing"] = f"compute;dur={(time.perf_counter() - started) * 1000:.1f}"
        return response

    async def pick(self, request: Request) -> Response:
        name = request.query_params.get("cluster", "")
        return RedirectResponse(f"/clusters/{quote(name, safe='')}/", status_code=303)

    async def __call__(self, scope, receive, send) -> None:
        """``/clusters/NAME/...`` to that cluster's console (its root path set), the rest to the fleet's."""
        path = scope.get("path", "")
        if scope["type"] in ("http", "websocket") and path.startswith("/clusters/"):
            name, _, rest = path[len("/clusters/"):].partition("/")
            app = await self.cluster_app(name)
            if app is not None:
                if not rest and not path.endswith("/"):
                    return await RedirectResponse(path + "/", status_code=307)(scope, receive, send)
                return await app({**scope, "root_path": f"/clusters/{name}"}, receive, send)
            response = self._error(Request(scope), f"the fleet has no cluster {name!r}", 404)
            return await response(scope, receive, send)
        return await self._own(scope, receive, send)

    def _error(self, request: Request, message: str, status: int) -> HTMLResponse:
        html = self.env.get_template("error.html").render(request=request, message=message, root="",
                                                           path=request.url.path, pinned=False, link=lambda p: p)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    async def stop(self) -> None:
        for console, _ in self.consoles.values():
            await console.stop()


def make_fleet_app(fleet: str, allowed_hosts: tuple[str, ...] = (),
                   limits: sql_runner.QueryLimits = sql_runner.QueryLimits()):
    """The fleet's console as one ASGI application (HostCheck first, as the one-cluster console)."""
    console = FleetConsole(fleet, limits)

    async def not_found(r: Request, exc=None):
        return console._error(r, f"no page {r.url.path}", 404)

    async def plotly_js(r: Request):
        return FileResponse(_plotly_js(), media_type="text/javascript",
                            headers={"Cache-Control": "max-age=86400", **SECURITY_HEADERS})

    @contextlib.asynccontextmanager
    async def lifespan(app):
        try:
            yield
        finally:
            await console.stop()

    console._own = Starlette(routes=[Route("/", console.overview), Route("/pick", console.pick),
                                     Route("/static/plotly.min.js", plotly_js),
                                     Mount("/static", StaticFiles(directory=HERE / "static"), name="static")],
                             exception_handlers={404: not_found}, lifespan=lifespan)
    return HostCheck(console, names=frozenset({"localhost", *(h.lower() for h in allowed_hosts)}))
