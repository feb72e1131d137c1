"""``metrics.listener=HOST:PORT``: Prometheus scrapes ``GET /metrics`` (a daemon thread)."""
from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from quorum.metrics.registry import Registry

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsServer:
    def __init__(self, host: str, port: int, registry: Registry):
        registry_ = registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                body = registry_.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes are not worth a log line each
                pass

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as e:
            raise OSError(f"metrics.listener {host}:{port}: {e.strerror or e}") from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    def start(self) -> "MetricsServer":
        self._thread.start()
        log.info("Serving Prometheus metrics at http://%s:%d/metrics", self._server.server_address[0], self.port)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
