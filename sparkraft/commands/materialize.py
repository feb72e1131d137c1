"""``sparkraft materialize``: run the streaming job that keeps the Delta tables current.

    sparkraft materialize --bootstrap-controller HOST:PORT --warehouse URI --checkpoint URI [--trigger SECONDS]
    sparkraft materialize --source kafka --bootstrap-controller HOST:PORT ...   # an Apache Kafka cluster's
    sparkraft materialize --sources FILE --warehouse URI --checkpoint URI        # a fleet (streaming/fleet_job.py)

A Structured Streaming query reads the committed metadata log (the ``sparkraft`` source) and
merges each micro-batch into the seven tables under ``--warehouse`` (delta-rs), exactly once; Spark's
progress lives in ``--checkpoint``. It runs until SIGTERM/SIGINT; ``--available-now`` catches up
and exits. An unreachable quorum, a warehouse that is not one, or a checkpoint of another cluster
is one line and exit 1; a controller failover while it runs is retried with backoff.
"""
from __future__ import annotations

import argparse

from sparkraft.commands import add_command, add_storage_options, client_security


def register(subparsers) -> None:
    parser = add_command(subparsers, "materialize", "stream the metadata log into the Delta tables",
                         run_materialize, log_default="INFO")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT...]",
                       help="any controllers of the quorum (down or standby ones are fine)")
    which.add_argument("--sources", metavar="FILE",
                       help="a fleet: the clusters a YAML file lists, each into its own tables under --warehouse "
                            "(docs/use/fleet.md)")
    parser.add_argument("--source", choices=("sparkraft", "kafka"), default="sparkraft",
                        help="whose quorum the controllers are: sparkraft's (default) or an Apache Kafka "
                             "cluster's (its controller listener, read with Kafka's own Fetch as an observer)")
    parser.add_argument("--warehouse", required=True, metavar="URI", help="where the seven tables live")
    parser.add_argument("--checkpoint", required=True, metavar="URI", help="the streaming query's checkpoint")
    add_storage_options(parser)
    parser.add_argument("--trigger", type=float, default=1.0, metavar="SECONDS",
                        help="micro-batch interval (default 1)")
    parser.add_argument("--available-now", action="store_true", help="process what is committed, then exit")
    parser.add_argument("--idle-flush", type=float, default=60.0, metavar="SECONDS",
                        help="while only NoOp records arrive (an idle cluster), write them to the tables at most "
                             "this often; a real change is written at once, with them (default 60)")
    parser.add_argument("--max-records-per-trigger", type=int, metavar="N", help="cap each micro-batch")
    parser.add_argument("--writer", choices=("deltalake", "delta-spark"), default="deltalake",
                        help="delta-rs (default, no JVM jars) or Spark with Delta's classes on its classpath")
    parser.add_argument("--remote", metavar="sc://HOST:PORT",
                        help="run the query through a Spark Connect server (the source and the materialiser run "
                             "there; --checkpoint is a path on the server)")
    parser.add_argument("--metrics-listener", metavar="HOST:PORT",
                        help="serve the job's Prometheus metrics (freshness: commit to Delta visible) at /metrics")
    parser.add_argument("--stall-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="a query that makes no progress this long while the log moves on is ended and started "
                             "again; if it will not end, the job exits 1 after as long again (default 60, 0: never)")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="how long to look for the quorum at start (default 15)")


def run_materialize(args: argparse.Namespace) -> int:
    from quorum import failpoints
    from streaming import job

    failpoints.announce()
    if args.trigger < 0:
        raise ValueError(f"--trigger must be >= 0, got {args.trigger}")
    if not args.idle_flush >= 0:
        raise ValueError(f"--idle-flush must be >= 0, got {args.idle_flush}")
    if not args.stall_timeout >= 0:
        raise ValueError(f"--stall-timeout must be >= 0, got {args.stall_timeout}")
    if args.remote and args.writer != "deltalake":
        raise ValueError("--remote runs the delta-rs writer on the Connect server: not with --writer delta-spark")
    if args.sources:
        if args.remote or args.writer != "deltalake" or args.source != "sparkraft":
            raise ValueError("--sources names each cluster's settings in its file: --source, --remote and --writer go "
                             "with one --bootstrap-controller")
        from streaming.fleet_job import run_fleet

        run_fleet(args.sources, args.warehouse, args.checkpoint, available_now=args.available_now,
                  metrics_listener=_host_port(args.metrics_listener) if args.metrics_listener else None)
        return 0
    job.run(args.bootstrap_controller, args.warehouse, args.checkpoint, trigger_s=args.trigger,
            available_now=args.available_now, max_records_per_trigger=args.max_records_per_trigger,
            timeout=args.timeout, writer=args.writer, idle_flush_s=args.idle_flush,
            security=client_security(args), remote=args.remote,
            metrics_listener=_host_port(args.metrics_listener) if args.metrics_listener else None,
            protocol=args.source, stall_after_s=args.stall_timeout)
    return 0


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--metrics-listener {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)
