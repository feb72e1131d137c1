"""``sparkraft console`` on a fleet's warehouse (console/fleet.py), as a process: ``/`` is the fleet's
overview, each cluster's figures equal its tables read independently at its newest cut; every page
of a cluster's console is under ``/clusters/NAME/``, its links stay there and its header picks
another cluster; an unknown cluster is a 404 saying so."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fleet_warehouse import build_fleet  # noqa: E402
from test_console_server import Console  # noqa: E402

from delta_tables.cut import latest_cut, read_table, tables_at  # noqa: E402
from delta_tables.fleet import cluster_warehouse  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_fleets_console_shows_every_cluster_and_each_clusters_pages(tmp_path):
    fleet = build_fleet(tmp_path / "fleet")
    console = Console(Path(fleet))
    try:
        status, page, _ = console.get("/")
        assert status == 200, page
        for name in ("east", "west"):
            where = cluster_warehouse(fleet, name)
            tables = tables_at(where, latest_cut(where))
            row = re.search(rf'<tr class="cluster-row" data-cluster="{name}">(.*?)</tr>', page, re.S).group(1)
            cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            assert f'href="/clusters/{name}/"' in cells[0]
            assert cells[3] == f"{read_table(tables['topics']).num_rows:,}"
            assert cells[4] == f"{read_table(tables['partitions']).num_rows:,}"
            assert cells[8] == f"{latest_cut(where).offset:,}"
        status, page, _ = console.get("/clusters/west/topics")
        assert status == 200, page
        west = read_table(tables_at(cluster_warehouse(fleet, "west"), None)["topics"]).column("name").to_pylist()
        assert west and all(name in page for name in west)
        for where in ("/topics", f"/topics/{west[0]}", "/partitions", "/records", "/audit", "/timeline", "/sql", "/"):
            status, page, _ = console.get(f"/clusters/west{where}")
            assert status == 200, (where, page)
            links = re.findall(r'(?:href|action|src)="(/[^"]*)"', page)  # every link stays in west's console
            assert links and all(link.startswith("/clusters/west/") or link in ("/", "/pick") for link in links), links
        assert '<option value="east">' in page and '<option value="west" selected>' in page  # the picker
        status, page, _ = console.get("/pick?cluster=east")  # followed to east's overview
        assert status == 200 and 'id="topic-count"' in page and '<option value="east" selected>' in page
        assert console.get("/clusters/west/static/console.css")[0] == 200
        status, page, _ = console.get("/clusters/south/")
        assert status == 404 and "the fleet has no cluster &#39;south&#39;" in page
    finally:
        console.close()
