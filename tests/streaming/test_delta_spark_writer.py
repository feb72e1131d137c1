"""The delta-spark writer (Delta's connector, resolved by scripts/fetch_jars.py, which .ci/run runs):
the same tables as the delta-rs writer, row for row at each cut. Where the connector is not
resolved the refusal is tested and the comparison skipped."""
from __future__ import annotations

import pytest
from test_materializer import as_batch, assert_tables_equal_image, busy_controller, log_rows

pytestmark = pytest.mark.slow



def test_delta_spark_writer_refuses_clearly_without_delta_classes_or_writes_the_same_tables(spark, tmp_path):
    from delta_tables.cut import latest_cut
    from delta_tables.spark_writer import DeltaClassesMissing, DeltaSparkWriter, delta_classes_present
    from streaming.materializer import Materializer

    if not delta_classes_present(spark):
        with pytest.raises(DeltaClassesMissing, match="spark.jars.packages"):
            DeltaSparkWriter(str(tmp_path), spark)
        pytest.skip("Delta's connector is not resolved here (python scripts/fetch_jars.py)")
    from delta_tables.cut import read_table, tables_at
    from delta_tables.writer import DeltaRsWriter

    c = busy_controller()
    rows = log_rows(c)
    by_spark, by_rs = tmp_path / "spark", tmp_path / "rs"
    for wh, writer in ((by_spark, DeltaSparkWriter(str(by_spark), spark)), (by_rs, DeltaRsWriter(str(by_rs)))):
        m = Materializer(writer)
        for end in (len(rows) // 3, 2 * len(rows) // 3, len(rows)):
            m.process(as_batch(rows[:end]))
    cut = latest_cut(str(by_spark))
    assert cut.offset == c.end_offset - 1
    assert_tables_equal_image(by_spark, c.core.image, cut)
    for offset in (rows[len(rows) // 3 - 1][0], rows[2 * len(rows) // 3 - 1][0], cut.offset):
        ours, theirs = (tables_at(str(wh), latest_cut(str(wh), offset)) for wh in (by_spark, by_rs))
        for name in ours:
            if name == "snapshots":
                continue  # its versions column names each writer's own table versions
            a, b = (sorted(map(str, read_table(t[name]).to_pylist())) for t in (ours, theirs))
            assert a == b, f"{name} at offset {offset}"
