"""What a controller's Kafka listener answers (KIP-919: Kafka's admin tools and AdminClient given
``--bootstrap-controller``): :data:`CONTROLLER`, an ApiTable like a broker's, over the same
handlers where the request is the same, through the :class:`QuorumSide` of the controller it runs in.

A controller serves Kafka's protocol on its first controller listener, beside Raft and sparkraft's
own protocols (one port: quorum/wire/shared_port.py), unless that listener's wire has a port of its
own (``controller.quorum.wire.port``); and on each of its ``controller.listener.names`` after the
first. As on Apache Kafka's controllers:

- DescribeCluster describes the controllers (endpoint type 2; a broker endpoint type is refused with
  UNSUPPORTED_ENDPOINT_TYPE), each at its address on the listener the request came in on, and names
  the active controller where that address is known;
- there is no Metadata request: topics are described through a broker;
- DescribeQuorum, AddRaftVoter and RemoveRaftVoter are served, from and through the quorum's leader.

Writes are handed to this controller when it is the active one, else forwarded to the active
controller as a broker forwards them (KIP-590); either way on behalf of the connection's principal,
so any controller answers any request. A write's answer waits until this controller has replayed
it, so the client's next read here shows it.
"""
from __future__ import annotations

import logging
import threading
import time

from quorum.controller import api
from quorum.controller.api import DescribeFeaturesRequest
from quorum.errors import Errors, SparkraftError
from quorum.kafka import answers, broker_answers, forwarding, raft_answers
from quorum.kafka.apis import KAFKA_ONLY_SHARED, ApiTable, KafkaContext, api_versions_answer, registry_answers
from quorum.kafka.controller_registration import ControllerRegistrar
from quorum.kafka.quorum_answers import add_raft_voter, remove_raft_voter
from quorum.kafka.server import KafkaListener
from quorum.kafka_log.export import ExportCache
from quorum.wire.first_bytes import Protocol

log = logging.getLogger(__name__)

CONTROLLER_ENDPOINTS = 2  # DescribeCluster's endpoint_type for controllers (KIP-919)


class QuorumSide:
    """What a controller's Kafka listener needs of the controller and its quorum: the committed
    image's offset here, the quorum's Raft calls (DescribeQuorum and voter changes go to the leader,
    through ``raft``: a RaftClient), and where each controller listens for Kafka clients."""

    def __init__(self, node, raft, own_endpoints: dict[str, tuple[str, int]]):
        self.node = node  # the ControllerNode: its committed offset, its leader, its voters' endpoints
        self.raft = raft
        self.own_endpoints = own_endpoints  # listener name -> (host, port) of this controller's listeners
        self.snapshots = raft_answers.SnapshotCache()  # the snapshot Kafka's brokers fetch, in Kafka's format
        self.exported = ExportCache()  # the log's batches Kafka's brokers fetch, in Kafka's format

    def level_at(self, offset: int) -> int:
        """The metadata.version of the log's records at ``offset`` (what Kafka's brokers fetch is
        exported at it)."""
        return self.node.core.versions.level_at(offset)

    def wait_for(self, offset: int, timeout: float) -> bool:
        """Whether this controller has replayed up to ``offset`` within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.node.last_committed_offset() < offset:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def controllers(self, listener: str) -> list[tuple[int, str, int]]:
        """(id, host, port) of each voter with a ``listener`` endpoint known here: its registration
        in the log (KIP-919: every controller registers its Kafka listeners), else the voter set's
        endpoints in a dynamic quorum; and always this controller's own."""
        node_id = self.node.node_id
        found: dict[int, tuple[str, int]] = {}
        registered = self.node.core.image.cluster.controllers
        for voter_id in sorted(self.node.raft.voters):
            for e in self.node.raft.endpoints_of(voter_id):
                if e.name == listener:
                    found[voter_id] = (e.host, e.port)
            registration = registered.get(voter_id)
            for e in registration.endpoints if registration is not None else ():
                if e.name == listener:
                    found[voter_id] = (e.host, e.port)
        if listener in self.own_endpoints:
            found[node_id] = self.own_endpoints[listener]
        return [(i, *found[i]) for i in sorted(found)]

    def describe_quorum(self):
        """The leader's QuorumDescription (voters with their endpoints): from this node when it
        leads (no loopback hop), else from the leader through ``raft``."""
        import concurrent.futures
        import dataclasses

        raft = self.node.raft
        if raft.status().state == "Leader":
            try:
                d = raft.describe_quorum(timeout=5.0)
                return dataclasses.replace(d, voters=tuple(
                    dataclasses.replace(v, endpoints=raft.endpoints_of(v.replica_id)) for v in d.voters))
            except (SparkraftError, concurrent.futures.TimeoutError):
                pass  # no longer the leader: ask the one that is
        return self.raft.describe_quorum()

    def features(self):
        """The controller's FeaturesDescription: what it supports, and the finalized levels (with
        kraft.version, which the Raft log holds), as ``sparkraft features describe`` reads them."""
        return self.node.read(DescribeFeaturesRequest())

    def controller_id(self, listener: str) -> int:
        """The active controller if a client can reach it on ``listener``, else this controller
        (which forwards writes there)."""
        leader = self.node.leader_id()
        if leader is not None and any(i == leader for i, _h, _p in self.controllers(listener)):
            return leader
        return self.node.node_id


# --- ApiVersions ------------------------------------------------------------------------------------

def api_versions(ctx: KafkaContext, req, version: int) -> dict:
    """The controller's table, and its features as a controller sees them (kraft.version among
    them, which a broker does not advertise: Kafka's controllers do)."""
    ctx.heard_from(req, version)
    d = ctx.quorum.features()
    return api_versions_answer(ctx, version, d.supported, d.finalized, d.epoch)


# --- DescribeCluster ------------------------------------------------------------------------------

def describe_cluster(ctx: KafkaContext, req, version: int) -> dict:
    if getattr(req, "endpoint_type", 1) != CONTROLLER_ENDPOINTS:
        return {"error_code": Errors.UNSUPPORTED_ENDPOINT_TYPE, "error_message":
                "a controller describes controllers (endpoint type 2) only: ask a broker for brokers",
                "cluster_id": ctx.cluster_id, "brokers": []}
    controllers = [{"broker_id": i, "host": host, "port": port, "rack": None, "is_fenced": False}
                   for i, host, port in ctx.quorum.controllers(ctx.listener)]
    return {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
            "endpoint_type": CONTROLLER_ENDPOINTS, "cluster_id": ctx.cluster_id, "controller_id": ctx.controller_id,
            "brokers": controllers, "cluster_authorized_operations": answers.AUTHORIZED_OPERATIONS_OMITTED}


# api key -> (lowest, highest version implemented, handler): what Kafka's ControllerApis answers of
# the requests an admin client sends (not the quorum's own Vote, Fetch, ... nor broker registration)
CONTROLLER = ApiTable("controller", {
    # the registry's requests a controller serves: its own view where it differs from a broker's
    # (ApiVersions, DescribeCluster), Apache Kafka's brokers' requests (broker_answers.py: their
    # lifecycle, ISR changes, producer ids), the admin reads and writes as a broker answers them
    **registry_answers("controller", [{"api_versions": api_versions, "describe_cluster": describe_cluster},
                                      broker_answers, answers, forwarding]),
    **KAFKA_ONLY_SHARED,
    80: (0, 1, add_raft_voter),
    81: (0, 0, remove_raft_voter),
    1: (13, 18, raft_answers.fetch),  # the metadata log, to Apache Kafka's brokers
    59: (0, 1, raft_answers.fetch_snapshot),
    58: (0, 0, broker_answers.envelope),  # the admin requests Kafka's brokers forward
})


class ControllerKafkaListeners:
    """A controller's Kafka listeners: one KafkaListener per controller listener after the first,
    and one fed by the first listener's one port, opened once the controller has loaded its log,
    closed when it stops."""

    def __init__(self, config, node, cluster_id: str, forwarding, raft):
        """``forwarding``: what writes go through (``call_committed`` as a ControllerClient's:
        quorum/node/local_first.py); ``raft``: a RaftClient to the quorum (DescribeQuorum when this
        node does not lead, and voter changes). Both are closed with the listeners."""
        self.config = config
        own = {name: (host, port) for name, host, port in config.more_controller_listeners()}
        self.shared_port = node.raft.shared_port  # the first listener's, if it has one
        if self.shared_port is not None:
            own = {config.controller_listener_name: (node.raft.listen[0], node.raft.port), **own}
        self.names = list(own)
        self.own = own
        self.forwarding = forwarding
        self.raft = raft
        self.side = QuorumSide(node, self.raft, own)
        self.node = node
        self.cluster_id = cluster_id
        self.listeners: list = []
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def start(self, stop: threading.Event) -> "ControllerKafkaListeners":
        """Open the listeners once the controller has loaded its log (heard from a quorum and
        replayed what it was told was committed), as Kafka's controller enables its request
        processing only once its authorizer and SCRAM credentials are loaded: before that, a login
        or an ACL would be judged on an image that may lack them."""
        self._stop = stop
        if self.names:
            threading.Thread(target=self._open_when_loaded, name="controller-kafka-listeners", daemon=True).start()
        return self

    def _open_when_loaded(self) -> None:
        while not self.node.loaded:
            if self._stop.wait(0.05):
                return
        for name in self.names:
            host, port = self.own[name]
            shared = name == self.config.controller_listener_name  # its connections come from the one port
            security = self.config.node_security(name)
            ssl_context = security.tls.wire_context() if security.tls is not None else None
            ctx = KafkaContext(self.config.node_id, self.cluster_id, name, lambda: self.node.core.image,
                               self.forwarding, self.side.wait_for, security=security,
                               static_configs=dict(self.config.given), apis=CONTROLLER, quorum=self.side)
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    listener = KafkaListener(ctx, host, None if shared else port, ssl_context=ssl_context,
                                             limits=self.config.connection_limits()).start()
                except OSError as err:
                    log.error("Controller %d: cannot listen on %s://%s:%d for Kafka clients: %s",
                              self.config.node_id, name, host, port, err)
                    continue
                self.listeners.append(listener)
                if shared:
                    listener.port = port
                    self.shared_port.route(Protocol.KAFKA, listener.adopt)
            log.info("Controller %d: Kafka's brokers and admin clients are answered on %s://%s:%d%s",
                     self.config.node_id, name, host, port if shared else listener.port,
                     " (with the quorum and sparkraft's clients)" if shared else " (--bootstrap-controller)")
        # this thread stays: it registers the listeners in the log (KIP-919) and keeps them registered
        endpoints = tuple(api.BrokerEndpoint(kl.ctx.listener, self.own[kl.ctx.listener][0], kl.port,
                                             self.config.security_protocol(kl.ctx.listener))
                          for kl in list(self.listeners))
        ControllerRegistrar(self.node, self.forwarding.remote, endpoints).run(self._stop)

    def reload_tls(self) -> None:
        for listener in self.listeners:
            tls = listener.ctx.security.tls
            if tls is not None:
                tls.reload()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            if self.shared_port is not None:
                self.shared_port.route(Protocol.KAFKA, None, "the controller is stopping")
            for listener in self.listeners:
                listener.stop()
            self.listeners.clear()
        self.forwarding.close()
        self.raft.close()

