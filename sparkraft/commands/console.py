"""``sparkraft console --warehouse URI [--bootstrap-controller HOST:PORT] [--listen HOST:PORT]``.

A read-only web console over the warehouse (console/; a fleet's, without ``--cluster``: the fleet's
overview and every cluster's pages, console/fleet.py): the cluster as of the newest cut, following
new ones live, or as of any cut of its history; what changed between two cuts; SQL. With
``--bootstrap-controller`` the overview also shows the quorum (``--command-config``: how to reach
the controllers). Listening beyond 127.0.0.1 needs ``--tls-config`` (console/serve.py).
"""
from __future__ import annotations

import argparse

from sparkraft.commands import add_cluster_option, add_command, add_storage_options, client_security, cluster_warehouse


def register(subparsers) -> None:
    parser = add_command(subparsers, "console", "serve a web console of the cluster's metadata, now and at any "
                         "cut of its history (read-only)", run_console, log_default="INFO")
    parser.add_argument("--warehouse", required=True, metavar="URI", help="the warehouse the streaming job writes")
    add_storage_options(parser)
    add_cluster_option(parser)
    parser.add_argument("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT...]",
                        help="the controllers, to show the quorum (leader, epoch, each voter's lag)")
    parser.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                        help="where to serve (default 127.0.0.1:8080; any other address needs --tls-config)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="a host name browsers reach the console by (repeatable; localhost, the --listen host "
                             "and IP addresses always are): any other Host is refused (DNS rebinding)")
    parser.add_argument("--query-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="the SQL box stops a query that runs longer (default 30)")
    parser.add_argument("--query-memory", type=int, default=512, metavar="MB",
                        help="the SQL box stops a query whose process grows past this (default 512)")
    parser.add_argument("--tls-config", metavar="FILE",
                        help="properties with ssl.keystore.location, ssl.truststore.location and ssl.client.auth: "
                             "serve HTTPS (client certificates as the login when required)")


def run_console(args: argparse.Namespace) -> None:
    from console.app import make_app
    from console.model import Warehouse
    from console.serve import bind_listener, check_exposure, parse_listen, serve, tls_settings
    from console.sql_runner import QueryLimits

    if args.query_timeout <= 0 or args.query_memory <= 0:
        raise ValueError("--query-timeout and --query-memory must be positive")
    host, port = parse_listen(args.listen)
    tls = tls_settings(args.tls_config)
    check_exposure(host, tls)
    from delta_tables.fleet import is_fleet

    if is_fleet(args.warehouse) and not args.cluster:  # the fleet's console: every cluster, a picker
        run_fleet_console(args, host, port, tls)
        return
    args.warehouse = cluster_warehouse(args)
    Warehouse(args.warehouse).cuts()  # a warehouse that cannot be read is one line now, not a page later
    quorum = None
    if args.bootstrap_controller:
        from console.quorum_view import QuorumView

        quorum = QuorumView(args.bootstrap_controller, client_security(args))
    sock = bind_listener(host, port)
    scheme = "https" if tls else "http"
    print(f"Console at {scheme}://{host}:{port}/ (warehouse {args.warehouse})", flush=True)
    limits = QueryLimits(args.query_timeout, args.query_memory)
    stopped_by = serve(make_app(args.warehouse, quorum, (host, *args.allow_host), limits), sock, tls)
    print(f"Stopped ({stopped_by or 'shut down'})", flush=True)


def run_fleet_console(args: argparse.Namespace, host: str, port: int, tls) -> None:
    from console.fleet import make_fleet_app
    from console.serve import bind_listener, serve
    from console.sql_runner import QueryLimits

    if args.bootstrap_controller:
        raise ValueError("--bootstrap-controller names one cluster's controllers: on a fleet's warehouse, add "
                         "--cluster NAME")
    sock = bind_listener(host, port)
    scheme = "https" if tls else "http"
    print(f"Console at {scheme}://{host}:{port}/ (the fleet at {args.warehouse})", flush=True)
    app = make_fleet_app(args.warehouse, (host, *args.allow_host), QueryLimits(args.query_timeout, args.query_memory))
    stopped_by = serve(app, sock, tls)
    print(f"Stopped ({stopped_by or 'shut down'})", flush=True)
