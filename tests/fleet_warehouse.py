"""A fleet's warehouse made without a job, for the tests of what reads one (the console, the
catalog): the busy controller's history (tests/streaming/test_materializer.py) materialised whole
as cluster ``east`` and its first half as ``west``, by the real materialiser, with the fleet's
``sources`` table naming them."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "streaming"))
from test_materializer import as_batch, busy_controller, log_rows  # noqa: E402

from delta_tables.fleet import cluster_warehouse, status_row, write_sources  # noqa: E402
from delta_tables.writer import DeltaRsWriter  # noqa: E402
from streaming.materializer import Materializer  # noqa: E402
from streaming.sources_file import ClusterSource  # noqa: E402


def build_fleet(root: Path) -> str:
    fleet = str(root)
    rows = log_rows(busy_controller())
    status = []
    for name, part in (("east", rows), ("west", rows[:len(rows) // 2])):
        where = cluster_warehouse(fleet, name)
        m = Materializer(DeltaRsWriter(where))
        for i in range(0, len(part), 7):
            m.process(as_batch(part[i:i + 7]))
        status.append(status_row(name, ClusterSource(name, "127.0.0.1:1"), where, "running", f"id-{name}",
                                 m.next_offset - 1, 0, m.last_cut_at))
    write_sources(fleet, status)
    return fleet
