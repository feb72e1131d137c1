"""A broker's Kafka listeners: one KafkaListener per client listener it registers, opened once the
broker's image has its own registration, unfenced (it has caught up with the log; a client's first
Metadata answer then names at least this broker: librdkafka retries an answer naming none), and
closed when the broker stops. Each listener's Metadata answers are warmed before it opens and then
as the image changes (at most once a second), so no client waits for a whole-cluster encoding.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from quorum.kafka.apis import KafkaContext
from quorum.kafka.server import KafkaListener

log = logging.getLogger(__name__)


class KafkaListeners:
    def __init__(self, config, endpoints, cluster_id: str, metadata, controller, broker_epoch: Callable[[], int],
                 stop: threading.Event, quorum=None):
        """``endpoints``: the BrokerEndpoints the broker registers; ``metadata``: its
        BrokerMetadataClient; ``broker_epoch()``: -1 until it is registered; ``quorum``: how
        DescribeQuorum reaches the quorum's leader (quorum_answers.RemoteQuorum)."""
        self.quorum = quorum
        self.config = config
        self.endpoints = endpoints
        self.cluster_id = cluster_id
        self.metadata = metadata
        self.controller = controller
        self.broker_epoch = broker_epoch
        self._stop = stop
        self.listeners: list[KafkaListener] = []
        self._tls: list = []
        self._lock = threading.Lock()
        self.warmed_image = None  # the image the answers were last warmed for

    def start(self) -> "KafkaListeners":
        threading.Thread(target=self._open_when_caught_up, name="kafka-listeners", daemon=True).start()
        return self

    def _open_when_caught_up(self) -> None:
        node_id = self.config.node_id
        while not self._stop.is_set():
            epoch = self.broker_epoch()
            if epoch >= 0 and self.metadata.wait_for(epoch, 0.5):
                mine = self.metadata.image.cluster.broker(node_id)
                if mine is not None and mine.broker_epoch == epoch and not mine.fenced:
                    break
            self._stop.wait(0.1)
        for e in self.endpoints:
            with self._lock:
                if self._stop.is_set():
                    return
                ssl_context = None
                security = self.config.node_security(e.name)  # TLS if SSL; the authorizer, if configured
                if security.tls is not None:
                    self._tls.append(security.tls)
                    ssl_context = security.tls.wire_context()
                ctx = KafkaContext(node_id, self.cluster_id, e.name, lambda: self.metadata.image, self.controller,
                                   self.metadata.wait_for, security=security, static_configs=dict(self.config.given),
                                   quorum=self.quorum)
                ctx.metadata_answers.warm(self.metadata.image)
                try:
                    listener = KafkaListener(ctx, e.host, e.port, ssl_context=ssl_context,
                                             limits=self.config.connection_limits()).start()
                except OSError as err:
                    log.error("Broker %d: cannot listen on %s://%s:%d for Kafka clients: %s", node_id, e.name,
                              e.host, e.port, err)
                    continue
                self.listeners.append(listener)
            log.info("Broker %d: Kafka clients are answered on %s://%s:%d (metadata and admin requests; no "
                     "Produce or Fetch)", node_id, e.name, e.host, listener.port)
        self._keep_warm()

    def _keep_warm(self) -> None:
        """Encode what each image change touched for the Metadata layouts clients use, off the
        request path, once it has stopped changing (see MetadataAnswers.warm); an answer asked
        meanwhile encodes what it needs itself. A pass that took S seconds waits 9 S before the
        next: warming never takes more than a tenth of the broker's time (sampled during a rolling
        restart at 2M, passes every second took a third of it: topics there change every few
        seconds, each a tenth of its partitions). No pass runs while the broker's metadata is
        behind the quorum, and a pass stops where it finds the broker behind: replaying a
        million-election balance at 2M, passes took a fifth of the broker's CPU for topics the next
        records changed again."""
        previous, pause = None, 1.0
        while not self._stop.wait(pause):
            pause = 1.0
            image = self.metadata.image
            if image is self.warmed_image or self.metadata.lag > 0:
                continue
            started = time.monotonic()
            with self._lock:
                answers = [listener.ctx.metadata_answers for listener in self.listeners]
            postponed = 0
            try:
                for a in answers:
                    a.warm(image, settled=previous, behind=lambda: self.metadata.lag > 0)
                    postponed += a.postponed
            except Exception:  # a bug here must not stop the answers, only their warming
                log.exception("Broker %d: warming Metadata answers failed; they are encoded when asked",
                              self.config.node_id)
                return
            previous = image
            self.warmed_image = None if postponed else image  # what was postponed: the next pass
            pause = max(1.0, 9 * (time.monotonic() - started))

    def reload_tls(self) -> None:
        for tls in self._tls:
            tls.reload()

    def stop(self) -> None:
        with self._lock:
            for listener in self.listeners:
                listener.stop()
            self.listeners.clear()
