"""What a Kafka listener implements: one table (:class:`ApiTable`) from API key to versions and
handler, per kind of listener: :data:`BROKER` here, the controllers' in controller_apis.py.

ApiVersions advertises exactly the listener's table (each range cut to the versions ``kio`` has
types for). sparkraft brokers carry metadata only: the requests a producer or consumer starts with
(Produce, Fetch, ListOffsets, FindCoordinator, InitProducerId) are answered with an error clients
treat as final (data_plane.py); anything else is unsupported.
:meth:`ApiTable.handle` is the one dispatch: a decoded request in, a kio response out.
"""
from __future__ import annotations

import dataclasses
import secrets
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from quorum.connection_limits import ANSWER_BYTES, AnswerBudget
from quorum.controller import registry
from quorum.controller.audit import MAX_NAME, AuditContext
from quorum.controller.features_control import SUPPORTED as CONTROLLER_FEATURES
from quorum.controller.settings import BROKER_FEATURES
from quorum.errors import Errors
from quorum.kafka import answers, data_plane, forwarding, quorum_answers, schemas
from quorum.kafka.codec import Encoded, Request, materialize, response_type
from quorum.kafka.metadata_answer import MetadataAnswers
from quorum.kafka.sasl import SaslSession, authenticate, handshake
from quorum.metadata.image import MetadataImage
from quorum.security.authorizer import Action
from quorum.security.node_security import PLAINTEXT_NODE, NodeSecurity
from quorum.security.principal import ANONYMOUS, Caller


@dataclass
class KafkaContext:
    """What the handlers need from the broker they run in."""

    broker_id: int
    cluster_id: str
    listener: str  # the listener's name: Metadata names each broker's endpoint on the same one
    image: Callable[[], MetadataImage]  # the broker's current image
    controller: object  # a ControllerClient: forwarded requests go through it (call_committed)
    wait_for: Callable[[int, float], bool]  # BrokerMetadataClient.wait_for(offset, timeout)
    metadata_answers: MetadataAnswers = None  # made for ``listener`` unless given
    # the listener's NodeSecurity: who a connection's client is; its authorizer (if the broker has
    # one) decides the reads here
    security: NodeSecurity = field(default_factory=lambda: PLAINTEXT_NODE)
    caller: Optional[Caller] = None  # who is on the connection (set per connection by the listener)
    software: tuple[str, str] = ("", "")  # the client's name and version, as its ApiVersions (v3+) said
    forwarded_by: str = ""  # a forwarded request's: the principal of the broker that sent the Envelope
    sasl: Optional[SaslSession] = None  # the connection's login, on a SASL_ listener (sasl.py)
    # the broker's own configuration file's keys (DescribeConfigs of this broker: STATIC_BROKER_CONFIG)
    static_configs: dict = field(default_factory=dict)
    apis: Optional["ApiTable"] = None  # what the listener answers: BROKER unless given
    # on a controller's Kafka listener: the quorum behind it (controller_apis.QuorumSide); None on a broker
    quorum: Optional[object] = None
    # the listener's bytes of log in answers not yet written out (connection_limits.AnswerBudget)
    answer_budget: AnswerBudget = field(default_factory=lambda: AnswerBudget(ANSWER_BYTES))
    _acl_lock: threading.Lock = field(default_factory=threading.Lock)
    _decoy_key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def __post_init__(self):
        if self.metadata_answers is None:
            self.metadata_answers = MetadataAnswers(self.listener)
        if self.apis is None:
            self.apis = BROKER

    @property
    def client_host(self) -> str:
        """The connection's client address ("?" outside a connection): what refusals are counted by."""
        return self.caller.host if self.caller else "?"

    def for_caller(self, caller: Caller) -> "KafkaContext":
        """This context for one connection's client (what is kept is shared); on a SASL_ listener,
        with a login of its own that the client must complete first."""
        login = self.security.sasl_login
        session = None if login is None else SaslSession(login.session_lifetime_ms, self._decoy_key)
        return dataclasses.replace(self, caller=caller, sasl=session)

    def for_forwarded(self, caller: Caller) -> "KafkaContext":
        """This context for a request a broker forwarded (an Envelope) for its client ``caller``."""
        return dataclasses.replace(self, caller=caller, sasl=None, software=("", ""),
                                   forwarded_by=self.caller.principal if self.caller else "")

    @property
    def audit_context(self) -> AuditContext:
        """Who sent the request, for its audit entry (quorum/controller/audit.py)."""
        caller = self.caller or Caller(ANONYMOUS, "")
        return AuditContext(caller.principal, caller.host, self.listener, self.software, self.forwarded_by)

    def heard_from(self, req, version: int) -> None:
        """ApiVersions v3+ names the client's software: kept for the connection's audit entries."""
        if version >= 3:
            self.software = (str(getattr(req, "client_software_name", "") or "")[:MAX_NAME],
                             str(getattr(req, "client_software_version", "") or "")[:MAX_NAME])

    @property
    def on_behalf_of(self) -> Optional[tuple[str, str]]:
        """(principal, host) a forwarded request names (KIP-590)."""
        return None if self.caller is None else (self.caller.principal, self.caller.host)

    def may(self, action: Action) -> bool:
        """Whether the connection's client may ``action``, by the broker's authorizer over the ACLs
        of its own image (no authorizer: anything)."""
        security = self.security
        if security.authorizer is None:
            return True
        with self._acl_lock:
            security.authorizer.follow(self.image().acls)
        return security.allows(self.caller or Caller(ANONYMOUS, ""), action)

    @property
    def controller_id(self) -> int:
        """What Metadata and DescribeCluster call the controller. Clients send controller-bound
        requests (CreateTopics...) there; a KRaft broker names a live broker, which forwards them, so
        this broker names itself (it answers only once its own registration is in its image). A
        controller names the active controller where its listener's address is known."""
        if self.quorum is not None:
            return self.quorum.controller_id(self.listener)
        return self.broker_id


def supported_features(features, version: int) -> list[dict]:
    """ApiVersions' supported features from (name, lowest, highest): in v0-v3 a feature whose lowest
    version is 0 is left out (Kafka's KAFKA-17011: clients before v4 refuse such a range, and the
    Java client of Kafka 3.7 ends its network thread on one)."""
    return [{"name": n, "min_version": lo, "max_version": hi} for n, lo, hi in features if lo > 0 or version >= 4]


def api_versions_answer(ctx: KafkaContext, version: int, supported, finalized_levels, epoch: int) -> dict:
    """ApiVersions from the listener's table and a node's features: ``supported`` (name, lowest,
    highest) and ``finalized_levels`` (name, level) read at metadata offset ``epoch``."""
    finalized = [{"name": n, "max_version_level": level, "min_version_level": level}
                 for n, level in sorted(finalized_levels) if level > 0]
    return {"error_code": 0, "api_keys": ctx.apis.api_keys(), "throttle_time": 0,
            "supported_features": supported_features(supported, version),
            "finalized_features_epoch": epoch, "finalized_features": finalized}


def api_versions(ctx: KafkaContext, req, version: int) -> dict:
    ctx.heard_from(req, version)
    image = ctx.image()
    features = [*BROKER_FEATURES, ("metadata.version", *CONTROLLER_FEATURES["metadata.version"])]
    return api_versions_answer(ctx, version, features, image.features.levels.items(), image.offset)


def registry_answers(listener: str, modules) -> dict[int, tuple[int, int, Callable]]:
    """What a ``listener`` ("broker" or "controller") answers of the controller's requests: each
    registry row's Kafka API (quorum/controller/registry.py) at the versions its row gives this
    listener, answered by the function named after the API as kio names it (schemas.api_name:
    CreateTopics, ``create_topics``) in the first of ``modules`` (modules, or dicts of a listener's own) that has
    one. A row naming a function no module has fails at import (LookupError)."""
    out = {}
    for row in registry.ROWS:
        kafka = row.kafka
        versions = kafka.versions(listener) if kafka is not None else None
        if versions is None:
            continue
        name = schemas.api_name(kafka.key)
        found = [m[name] if isinstance(m, dict) else getattr(m, name) for m in modules
                 if (name in m if isinstance(m, dict) else hasattr(m, name))]
        if not found:
            raise LookupError(f"{kafka.name} ({kafka.key}) is served on a {listener}'s Kafka listener, "
                              f"but no {name} answers it")
        out[kafka.key] = (*versions, found[0])
    return out


# api key -> (lowest, highest version implemented, handler) of what is not a controller request but
# a broker's and a controller's Kafka listeners both answer, with the same handler: the SASL login,
# DescribeQuorum from the quorum's leader, and AlterConfigs (Kafka's older form of
# IncrementalAlterConfigs, sent to the active controller as that)
KAFKA_ONLY_SHARED: dict[int, tuple[int, int, Callable]] = {
    17: (1, 1, handshake),  # v0 (SASL tokens outside Kafka's framing) is not served
    36: (0, 2, authenticate),
    55: (0, 2, quorum_answers.describe_quorum),  # a broker asks the quorum's leader, as Kafka's brokers forward it
    33: (0, 2, forwarding.alter_configs),
}

# a broker's listener: the registry's requests it serves, the shared ones, and what only a broker answers
IMPLEMENTED: dict[int, tuple[int, int, Callable]] = {
    **registry_answers("broker", [{"api_versions": api_versions}, answers, forwarding]),
    **KAFKA_ONLY_SHARED,
    35: (1, 4, answers.describe_log_dirs),  # its replicas, no data: what kafka-reassign-partitions reads
    # refused, so that data clients give up at once (data_plane.py)
    0: (3, 13, data_plane.produce),
    1: (4, 18, data_plane.fetch),
    2: (1, 11, data_plane.list_offsets),
    10: (0, 6, data_plane.find_coordinator),
    22: (0, 6, data_plane.init_producer_id),
}


@dataclass
class Pending:
    """A handler's answer that waits on ``future`` (a long-polling Fetch) without holding a handler
    thread: the listener awaits the future, at most ``timeout`` seconds, then calls ``finish()`` on
    a handler thread for the answer (the response dict)."""

    future: object  # a concurrent.futures.Future
    timeout: float
    finish: Callable[[], object]
    held: int = 0  # bytes of the listener's AnswerBudget this answer holds until it is written out


# the admin requests a Kafka broker forwards to the controller in an Envelope (KIP-590): the
# registry's rows that say so, AlterConfigs, and DescribeQuorum (kafka-metadata-quorum --bootstrap-server)
FORWARDED = frozenset({row.kafka.key for row in registry.ROWS
                       if row.kafka is not None and row.kafka.forwarded} | {33, 55})


class ApiTable:
    """One kind of listener's requests: ``implemented`` maps an API key to (lowest, highest version
    implemented, handler); what is advertised is that cut to the versions ``kio`` has types for;
    ``forwardable`` is what of it an Envelope may carry."""

    def __init__(self, name: str, implemented: dict[int, tuple[int, int, Callable]]):
        self.name = name
        self.implemented = implemented
        self.supported: dict[int, tuple[int, int]] = {}
        for key, (lo, hi, _handler) in implemented.items():
            versions = schemas.versions(key)
            lo, hi = max(lo, min(versions)), min(hi, max(versions))
            if lo <= hi:
                self.supported[key] = (lo, hi)
        self.forwardable = {k: v for k, v in self.supported.items() if k in FORWARDED}

    def api_keys(self) -> list[dict]:
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(self.supported.items())]

    def handle(self, ctx: KafkaContext, request: Request):
        """The kio response to ``request`` (already checked against ``supported``), or its Encoded body."""
        _lo, _hi, handler = self.implemented[request.api_key]
        answer = handler(ctx, request.body, request.api_version)
        if isinstance(answer, Pending):
            finish = answer.finish
            return dataclasses.replace(answer, finish=lambda: self._materialize(request, finish()))
        return self._materialize(request, answer)

    @staticmethod
    def _materialize(request: Request, answer):
        if isinstance(answer, Encoded):
            return answer
        return materialize(response_type(request.api_key, request.api_version), answer)

    def unsupported_api_versions_response(self):
        """ApiVersions v0 with UNSUPPORTED_VERSION: what a client that asked in a version this
        listener does not know reads, to pick one it does."""
        return materialize(response_type(18, 0), {"error_code": Errors.UNSUPPORTED_VERSION,
                                                  "api_keys": self.api_keys()})


BROKER = ApiTable("broker", IMPLEMENTED)
SUPPORTED: dict[int, tuple[int, int]] = BROKER.supported  # a broker's listener's: what tests check against
