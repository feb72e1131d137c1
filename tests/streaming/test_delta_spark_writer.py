"""The delta-spark writer, where Delta's JVM classes are on Spark's classpath (not on a machine that
cannot reach Maven, where this is skipped and the refusal is tested instead)."""
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
        pytest.skip("Delta's JVM classes are not on Spark's classpath here (Maven is unreachable)")
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaSparkWriter(str(tmp_path), spark))
    m.process(as_batch(rows[: len(rows) // 2]))
    m.process(as_batch(rows))
    cut = latest_cut(str(tmp_path))
    assert cut.offset == c.end_offset - 1
    assert_tables_equal_image(tmp_path, c.core.image, cut)
