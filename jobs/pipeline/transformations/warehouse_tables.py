"""The state tables `sparkraft materialize` keeps (``sparkraft.warehouse``), as temporary views
under the names `sparkraft sql` gives them, so that a view of this pipeline is the same SQL:
``SELECT ... FROM partitions``. Read by Delta's own Spark reader, each run at its newest version.
Beside them ``topic_config_defaults``: each topic config's default and the cluster-level broker
config that overrides it (Kafka's synonym)."""
from pyspark import pipelines as dp
from pyspark.sql.types import StringType, StructField, StructType

from delta_tables.schemas import IMAGE_TABLES
from quorum.controller.configs_control import TOPIC_CONFIGS


def _state_view(name: str) -> None:
    @dp.temporary_view(name=name, comment=f"the warehouse's {name} table, as `sparkraft sql` reads it")
    def view():
        return spark.read.format("delta").load(f"{spark.conf.get('sparkraft.warehouse')}/{name}")  # noqa: F821


for _name in IMAGE_TABLES:
    _state_view(_name)


@dp.temporary_view(comment="each topic config's default, and its cluster-level synonym")
def topic_config_defaults():
    rows = [(name, d.synonym, d.default) for name, d in sorted(TOPIC_CONFIGS.items())]
    schema = StructType([StructField(c, StringType()) for c in ("name", "synonym", "default_value")])
    return spark.createDataFrame(rows, schema)  # noqa: F821 (a schema given: a DDL string would be analysed)
