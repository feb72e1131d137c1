"""The downstream-stream example of docs/use/downstream.md, run as it stands: Delta's streaming
change-feed source over a warehouse where a broker was fenced counts each broker's ISR shrinks as
delta-rs's reading of the same change feed does."""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)
from test_sql_engines import warehouse  # noqa: E402,F401  (fixture: a broker fenced, ISRs shrunk)

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "use" / "downstream.md"


def _example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/use/downstream.md has one example"
    return blocks[0]


def _shrinks_by_delta_rs(wh: str) -> Counter:
    from deltalake import DeltaTable

    import pyarrow as pa

    rows = pa.table(DeltaTable(f"{wh}/partitions").load_cdf(starting_version=0).read_all()).to_pylist()
    before = {(r["topic_id"], r["partition"], r["_commit_version"]): r["isr"] for r in rows
              if r["_change_type"] == "update_preimage"}
    out: Counter = Counter()
    for r in rows:
        if r["_change_type"] == "update_postimage":
            for broker in set(before[(r["topic_id"], r["partition"], r["_commit_version"])]) - set(r["isr"]):
                out[broker] += 1
    return out


def test_the_documented_change_feed_stream_counts_isr_shrinks_per_broker(warehouse, spark, tmp_path):  # noqa: F811
    from delta_tables.spark_writer import delta_classes_present
    from streaming import job

    if not delta_classes_present(spark):
        pytest.skip("Delta's connector is not resolved here (python scripts/fetch_jars.py)")
    wh, bootstrap = warehouse
    job.run(bootstrap, wh, str(tmp_path / "ck"), available_now=True, spark=spark, max_records_per_trigger=20)
    out = str(tmp_path / "out")
    exec(_example(), {"spark": spark, "warehouse": wh, "out": out})
    counted = Counter()
    for r in spark.read.format("delta").load(f"{out}/isr_shrinks").collect():
        counted[r["broker"]] += r["count"]
    expected = _shrinks_by_delta_rs(wh)
    assert expected[103] > 0, "the fixture's fenced broker left ISRs"
    assert counted == expected
