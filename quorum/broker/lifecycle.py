"""BrokerLifecycle: register with the active controller, heartbeat, and shut down in a controlled way.

Kafka's BrokerLifecycleManager, reduced to what sparkraft's brokers need today:

1. **Register** with a fresh incarnation id (a new Uuid per process start), the broker's listeners
   as endpoints, and its rack. The reply's broker epoch is the offset of the RegisterBrokerRecord.
   Retried until it succeeds or the broker is stopped (controllers may still be electing).
2. **Heartbeat** every ``broker.heartbeat.interval.ms``, reporting the broker's metadata offset.
   The broker stays fenced until it reports an offset at or past its registration record. A
   heartbeat answered STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED (the controller forgot or
   replaced this registration) makes it register again.
3. **Controlled shutdown**: heartbeats with ``want_shutdown`` until the controller answers
   ``should_shutdown`` (its leaderships have moved away), bounded by a timeout.

The metadata offset a heartbeat reports comes from ``offset_source``: a broker process passes its
:class:`~quorum.broker.metadata_client.BrokerMetadataClient`'s applied offset, so it is unfenced only
once its own image has caught up with its registration. Without one (simulated brokers in the
benchmarks) it reports the controller's committed offset from DescribeCluster instead.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from quorum.controller import api
from quorum.errors import Errors, SparkraftError

log = logging.getLogger(__name__)

_REREGISTER = {Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED}


@dataclass(frozen=True, slots=True)
class BrokerState:
    broker_epoch: int  # -1 until registered
    fenced: bool
    in_controlled_shutdown: bool
    metadata_offset: int  # the last offset reported


class BrokerLifecycle:
    def __init__(self, client, broker_id: int, cluster_id: str, incarnation_id: str,
                 endpoints: tuple[api.BrokerEndpoint, ...], rack: Optional[str],
                 heartbeat_interval_ms: int = 2000, offset_source: Optional[Callable[[], int]] = None):
        self.client = client  # a ControllerClient
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.incarnation_id = incarnation_id
        self.endpoints = endpoints
        self.rack = rack
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.offset_source = offset_source
        self.state = BrokerState(-1, True, False, -1)
        self._stop = threading.Event()

    def stop(self) -> None:
        """Make ``run`` return (from a signal handler or another thread)."""
        self._stop.set()

    # -- registration ----------------------------------------------------------------------
    def register(self) -> int:
        """Register until it succeeds (or ``stop``); returns the broker epoch."""
        request = api.RegisterBrokerRequest(self.broker_id, self.cluster_id, self.incarnation_id,
                                            self.endpoints, self.rack)
        while not self._stop.is_set():
            try:
                reply = self.client.register_broker(request)
            except SparkraftError as e:
                if e.error in (Errors.NETWORK_EXCEPTION, Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT,
                               Errors.DUPLICATE_BROKER_REGISTRATION):
                    # DUPLICATE: our previous incarnation's session has not expired yet
                    log.info("Broker %d: registration not accepted yet (%s); retrying", self.broker_id, e)
                    self._stop.wait(min(1.0, self.heartbeat_interval_s))
                    continue
                raise
            self.state = BrokerState(reply.broker_epoch, True, False, self.state.metadata_offset)
            log.info("Broker %d registered (incarnation %s, broker epoch %d)", self.broker_id,
                     self.incarnation_id, reply.broker_epoch)
            return reply.broker_epoch
        return -1

    # -- heartbeats ------------------------------------------------------------------------
    def metadata_offset(self) -> int:
        """The broker's applied metadata offset (see the module docstring)."""
        if self.offset_source is not None:
            return self.offset_source()
        try:
            return self.client.describe_cluster(timeout=self.heartbeat_interval_s).metadata_offset
        except SparkraftError:
            return self.state.metadata_offset

    def heartbeat(self, want_shutdown: bool = False, timeout: Optional[float] = None
                  ) -> Optional[api.BrokerHeartbeatReply]:
        """One heartbeat, tried for ``timeout`` seconds (the heartbeat interval by default); None if
        it failed (logged). Re-registers when the controller asks for it."""
        offset = max(self.metadata_offset(), self.state.metadata_offset)
        request = api.BrokerHeartbeatRequest(self.broker_id, self.state.broker_epoch, offset,
                                             want_shutdown=want_shutdown)
        try:
            reply = self.client.broker_heartbeat(request, timeout=timeout or max(1.0, self.heartbeat_interval_s))
        except SparkraftError as e:
            if e.error in _REREGISTER and not want_shutdown:
                log.warning("Broker %d: %s; registering again", self.broker_id, e)
                self.register()
            else:
                log.info("Broker %d: heartbeat failed: %s", self.broker_id, e)
            return None
        old = self.state
        self.state = BrokerState(old.broker_epoch, reply.is_fenced, want_shutdown, offset)
        if old.fenced != reply.is_fenced:
            log.info("Broker %d is %s (metadata offset %d)", self.broker_id,
                     "fenced" if reply.is_fenced else "unfenced", offset)
        return reply

    def run(self) -> None:
        """Register, then heartbeat every interval until ``stop``."""
        if self.register() < 0:
            return
        while not self._stop.is_set():
            started = time.monotonic()
            self.heartbeat()
            self._stop.wait(max(0.0, self.heartbeat_interval_s - (time.monotonic() - started)))

    # -- controlled shutdown ---------------------------------------------------------------
    def controlled_shutdown(self, timeout: float) -> bool:
        """Ask to shut down until the controller says we may (True), or ``timeout`` seconds pass."""
        if self.state.broker_epoch < 0:
            return True
        deadline = time.monotonic() + timeout
        interval = min(0.25, self.heartbeat_interval_s)
        log.info("Broker %d: controlled shutdown requested", self.broker_id)
        while time.monotonic() < deadline:
            # Tried until the deadline: the controller answers once it has moved every leadership
            # (seconds at 2M partitions), and a heartbeat given up on at the interval left the
            # broker learning that up to two seconds late.
            reply = self.heartbeat(want_shutdown=True, timeout=max(1.0, deadline - time.monotonic()))
            if reply is not None and reply.should_shutdown:
                log.info("Broker %d: controlled shutdown complete", self.broker_id)
                return True
            time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
        log.warning("Broker %d: controlled shutdown not confirmed within %.1fs", self.broker_id, timeout)
        return False
