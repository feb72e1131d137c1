"""``metrics.listener=HOST:PORT``: Prometheus scrapes ``GET /metrics``, served by prometheus_client
(its HTTP server, on a daemon thread; the text or OpenMetrics format, as the scraper asks)."""
from __future__ import annotations

import logging

from prometheus_client import start_http_server

from quorum.metrics.registry import Registry

log = logging.getLogger(__name__)


class MetricsServer:
    def __init__(self, host: str, port: int, registry: Registry):
        self.host, self._port, self.registry = host, port, registry
        self._server = self._thread = None
        self.port = port

    def start(self) -> "MetricsServer":
        try:
            self._server, self._thread = start_http_server(self._port, addr=self.host, registry=self.registry.prometheus)
        except OSError as e:
            raise OSError(f"metrics.listener {self.host}:{self._port}: {e.strerror or e}") from None
        self.port = self._server.server_address[1]
        log.info("Serving Prometheus metrics at http://%s:%d/metrics", self.host, self.port)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
