"""``sparkraft catalog register --warehouse URI [--database sparkraft] [--remote sc://HOST:PORT]``.

Registers the warehouse's ten tables in Spark's persistent session catalog (delta_tables/catalog.py),
or, for a fleet's warehouse, its ``sources`` table and a view of every cluster's tables for each,
once: from then on a fresh Spark session with Delta's connector reads ``sparkraft.partitions`` with
no path, always at the table's newest version. Locally the catalog is the embedded Derby metastore
in ./metastore_db (run Spark from the same folder); Spark's own configuration (hive-site.xml,
spark-defaults.conf in $SPARK_CONF_DIR) names any other metastore. ``--remote`` registers them in
a Spark Connect server's catalog instead.
"""
from __future__ import annotations

import argparse
import os

from sparkraft.commands import add_command, add_group, add_storage_options

DERBY_LOCKED = ("the embedded Derby metastore in ./metastore_db is open in another Spark process, and Derby allows "
                "one at a time: stop that one, or configure a Hive metastore service (hive.metastore.uris)")


def register(subparsers) -> None:
    commands = add_group(subparsers, "catalog", "the metadata tables in Spark's catalog")
    reg = add_command(commands, "register", "register the warehouse's tables in Spark's persistent catalog, "
                      "as external Delta tables (idempotent)", run_register)
    reg.add_argument("--warehouse", required=True, metavar="URI")
    add_storage_options(reg)
    reg.add_argument("--database", default="sparkraft", metavar="NAME",
                     help="the catalog database to hold them (default sparkraft)")
    reg.add_argument("--remote", metavar="sc://HOST:PORT",
                     help="a Spark Connect server's catalog (it needs Delta's connector and a persistent metastore)")


def run_register(args: argparse.Namespace) -> int:
    from delta_tables import catalog
    from delta_tables.cut import tables_at
    from delta_tables.fleet import is_fleet
    from delta_tables.schemas import ALL_TABLES
    from delta_tables.spark_session import DELTA_CONFS, DELTA_PACKAGE

    fleet = is_fleet(args.warehouse)
    if not fleet:
        tables_at(args.warehouse, None)  # a wrong warehouse is one line before a JVM starts
    if args.remote:
        from streaming.job import remote_spark_session

        spark = remote_spark_session(args.remote)
        where = f"the catalog of the Spark Connect server at {args.remote}"
        if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
            where += (" (warning: its catalog is in memory, so they last until the server stops: start it with "
                      "--conf spark.sql.catalogImplementation=hive for a persistent metastore)")
    else:
        from delta_tables.spark_session import configure_s3a, local_spark_session

        if catalog.derby_in_use(os.getcwd()):
            raise ValueError(DERBY_LOCKED)
        spark = local_spark_session("sparkraft-catalog", delta=True, hive=True)
        configure_s3a(spark)
        uris = spark.sparkContext._jsc.hadoopConfiguration().get("hive.metastore.uris")
        where = f"the Hive metastore at {uris}" if uris else (
            f"the embedded Derby metastore in {os.path.join(os.getcwd(), 'metastore_db')} (a Spark session started "
            f"in {os.getcwd()} finds it)")
    if fleet:
        added = catalog.register_fleet(spark, args.warehouse, args.database)
        print(f"Registered the fleet's sources table and {len(added) - (added[:1] == ['sources'])} views of every "
              f"cluster's tables in {args.database}, in {where}.")
    else:
        added = catalog.register(spark, args.warehouse, args.database)
        kept = len(ALL_TABLES) - len(added)
        print(f"Registered {len(added)} table{'s' if len(added) != 1 else ''} in {args.database}"
              + (f" ({kept} already were)" if kept else "") + f", in {where}.")
    confs = " ".join(f"--conf {key}={value}" for key, value in DELTA_CONFS.items())
    print(f"Query them with: spark-sql --packages {DELTA_PACKAGE} {confs} -e 'SELECT * FROM {args.database}.partitions'")
    return 0
