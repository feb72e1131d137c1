"""``sparkraft pipeline init --folder DIR --warehouse URI``.

Writes a Spark Declarative Pipeline (``spark-pipeline.yml`` and ``transformations/``, copied from
jobs/pipeline/) that Spark's own ``spark-pipelines dry-run`` and ``run`` take: the metadata log as a
streaming table (the warehouse's ``records``), and the operators' materialized views (offline,
under-replicated and under-min-ISR partitions, effective topic configs, replicas per broker and per
rack, broker liveness) over the state tables ``sparkraft materialize`` keeps in the warehouse. A
view of one's own is one more ``.sql`` file in ``transformations/``.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from sparkraft.commands import add_command, add_group

SPEC = """\
# A Spark Declarative Pipeline over a sparkraft cluster's metadata (sparkraft pipeline init).
# spark-pipelines run: from this folder, with Delta's connector (sparkraft pipeline init printed how).
name: sparkraft
storage: {storage}
configuration:
  spark.sql.sources.default: delta
  sparkraft.warehouse: {warehouse}
libraries:
  - glob:
      include: transformations/**
"""


def transformations() -> Path:
    """The shipped transformations: jobs/pipeline/transformations, found beside this package (in
    the repository and in an installed wheel alike) rather than by importing ``jobs``, whose
    modules import this package."""
    return Path(__file__).resolve().parents[2] / "jobs" / "pipeline" / "transformations"


def register(subparsers) -> None:
    commands = add_group(subparsers, "pipeline", "the metadata tables as a Spark Declarative Pipeline")
    init = add_command(commands, "init", "write a Spark Declarative Pipeline (spark-pipeline.yml and its "
                       "transformations) for spark-pipelines run", run_init)
    init.add_argument("--folder", required=True, metavar="DIR", help="a new or empty folder for the pipeline")
    init.add_argument("--warehouse", required=True, metavar="URI",
                      help="the warehouse `sparkraft materialize` keeps: the views read its state tables")


def run_init(args: argparse.Namespace) -> int:
    from delta_tables.cut import tables_at
    from delta_tables.spark_session import DELTA_CONFS, DELTA_PACKAGE

    folder = Path(args.folder).resolve()
    if folder.exists() and any(folder.iterdir()):
        raise ValueError(f"{folder} is not empty: give a new or empty folder (a pipeline's files and "
                         f"tables live there)")
    warehouse = args.warehouse if "://" in args.warehouse else str(Path(args.warehouse).resolve())
    tables_at(warehouse, None)  # the views read its tables: a wrong warehouse is said now, not mid-run
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(transformations(), folder / "transformations",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "spark-pipeline.yml").write_text(SPEC.format(storage=(folder / "storage").as_uri(),
                                                           warehouse=warehouse))
    confs = " ".join(f"--conf {key}={value}" for key, value in DELTA_CONFS.items())
    print(f"Wrote a Spark Declarative Pipeline in {folder}: {len(list((folder / 'transformations').iterdir()))} "
          f"files in transformations/. Run it (its tables land in {folder / 'spark-warehouse'}) with:")
    print(f"cd {folder} && spark-pipelines --packages {DELTA_PACKAGE} {confs} run")
    return 0
