"""A controller registers itself with the active controller (KIP-919): once it has loaded the log
and metadata.version is 3.7-IV0 or later, it sends its Kafka listeners and the feature levels it
supports, under a fresh incarnation id per process, until the committed image holds exactly that;
then it only watches, and registers again if the image stops saying so (a new active controller
replayed a different registration, or metadata.version was just raised to a level with them).

Its own requests go to the core directly when it is the active controller, else to the active one
over the quorum's client (authorized as this controller's principal, or CLUSTER_ACTION)."""
from __future__ import annotations

import logging
import threading

from quorum.controller import api
from quorum.controller.controllers_control import registration_record
from quorum.controller.features_control import SUPPORTED
from quorum.errors import Errors, SparkraftError
from quorum.metadata.cluster import ControllerRegistration
from quorum.metadata.versions import CONTROLLER_REGISTRATION
from quorum.uuids import random_uuid

log = logging.getLogger(__name__)

WATCH_S = 1.0  # how often a registered controller looks at the image again
RETRY_S = (0.2, 5.0)  # backoff after a refused or failed registration: first, most


class ControllerRegistrar:
    def __init__(self, node, remote, endpoints: tuple[api.BrokerEndpoint, ...]):
        """``node``: the ControllerNode; ``remote``: a ControllerClient to its quorum."""
        self.node = node
        self.remote = remote
        self.request = api.RegisterControllerRequest(
            node.node_id, random_uuid(), endpoints,
            tuple((name, lo, hi) for name, (lo, hi) in sorted(SUPPORTED.items())))
        self.wanted = ControllerRegistration.from_record(registration_record(self.request))

    def registered(self) -> bool:
        return self.node.core.image.cluster.controllers.get(self.node.node_id) == self.wanted

    def run(self, stop: threading.Event) -> None:
        delay, announced = RETRY_S[0], False
        while not stop.wait(delay):
            registered = self.registered()
            if registered or (self.node.core.image.features.metadata_version or 0) < CONTROLLER_REGISTRATION:
                announced = announced or registered
                delay = WATCH_S
                continue
            try:
                self._send()
            except (SparkraftError, TimeoutError, OSError) as e:
                delay = min(RETRY_S[1], max(RETRY_S[0], delay * 2))
                log.debug("Controller %d: registration not taken yet (%s); again in %.1f s", self.node.node_id, e,
                          delay)
                continue
            if not announced:
                log.info("Controller %d registered its listeners %s (incarnation %s)", self.node.node_id,
                         ", ".join(f"{e.name}://{e.host}:{e.port}" for e in self.request.endpoints) or "(none)",
                         self.request.incarnation_id)
                announced = True
            delay = RETRY_S[0]

    def _send(self) -> None:
        node = self.node
        if node.is_active:
            try:
                node.submit(self.request, None).result(10.0)
                return
            except SparkraftError as e:
                if e.error is not Errors.NOT_CONTROLLER:
                    raise
        self.remote.call_committed(self.request, 10.0)
