"""A node's security settings in one place: its listener's TLS, how callers get their principal, the
authorizer, and how the node itself connects to others (DESIGN §12).

Node principals act for their own node. Under mutual TLS a controller's certificate must map to
``controller.quorum.voter.principal`` with its node id filled in (``User:controller-{node.id}`` by
default) and a broker's to ``broker.principal`` (``User:broker-{node.id}``). So a request claiming
to come from voter 2 is taken only from voter 2's principal (a stranger with a valid certificate
cannot vote or count towards a commit), and a broker registers and heartbeats only for itself,
whatever the ACLs say.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Optional

from quorum.errors import Errors, SparkraftError
from quorum.security.authorizer import Action, Authorizer, cluster_action
from quorum.security.client import PLAINTEXT, ClientSecurity
from quorum.security.principal import (
    ANONYMOUS,
    FORWARDED_HOST,
    FORWARDED_PRINCIPAL,
    Caller,
    PrincipalMapper,
    certificate_subject,
    der_subject,
    endpoint_host,
    peer_host,
)
from quorum.security.sasl_server import SaslLogin, ScramAuthenticator
from quorum.security.tls import ServerTls

log = logging.getLogger(__name__)

NODE_ID_FIELD = "{node.id}"
DEFAULT_VOTER_PRINCIPAL = "User:controller-{node.id}"
DEFAULT_BROKER_PRINCIPAL = "User:broker-{node.id}"
MAX_CACHED_CERTIFICATES = 4096  # wire_caller's memory of certificates it has mapped


@dataclass
class NodeSecurity:
    tls: Optional[ServerTls] = None  # None: the listener is PLAINTEXT
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    authorizer: Optional[Authorizer] = None  # None: no authorizer.class.name, everything allowed
    client: ClientSecurity = PLAINTEXT  # how this node reaches its peers and the controllers
    voter_principal: str = DEFAULT_VOTER_PRINCIPAL
    broker_principal: str = DEFAULT_BROKER_PRINCIPAL
    scram: Optional[ScramAuthenticator] = None  # SASL/SCRAM logins and their tokens (TLS controller listeners)
    sasl_login: Optional[SaslLogin] = None  # a Kafka listener whose clients log in first (SASL_SSL, SASL_PLAINTEXT)
    # certificate (DER) -> its caller, for wire_caller: the mapping is worked out once per certificate
    _wire_callers: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def mutual_tls(self) -> bool:
        """Callers prove who they are with a certificate: node identities are checked by principal."""
        return self.tls is not None and self.tls.mutual

    def authorizing_caller(self, context) -> Optional[Caller]:
        """The caller, where an authorizer decides; else None, without working it out (a request's hot
        path), though a SCRAM token that is presented must still verify. SparkraftError
        SASL_AUTHENTICATION_FAILED if it does not."""
        if self.authorizer is not None:
            return self.caller(context)
        if self.scram is not None:
            self.scram.principal_of(context.invocation_metadata())
        return None

    def caller(self, context) -> Caller:
        """Who sent this gRPC request (see quorum/security/principal.py); a presented SCRAM token that
        does not verify raises SparkraftError SASL_AUTHENTICATION_FAILED. A request a broker
        forwards for a Kafka client is the client's (``forwarded_caller``)."""
        host = peer_host(context.peer())
        metadata = context.invocation_metadata() or ()
        direct = None
        if self.scram is not None:
            principal = self.scram.principal_of(metadata)
            if principal is not None:
                direct = Caller(principal, host, authenticated=True)
        if direct is None:
            direct = self._by_certificate(host, certificate_subject(context.auth_context())) \
                if self.tls is not None else Caller(ANONYMOUS, host)
        named = dict(metadata)
        if FORWARDED_PRINCIPAL not in named:
            return direct
        return self.forwarded_caller(direct, named[FORWARDED_PRINCIPAL], named.get(FORWARDED_HOST, ""))

    def forwarded_caller(self, direct: Caller, principal: str, host: str) -> Caller:
        """The client a request was forwarded for (KIP-590), if ``direct`` may forward: a node's own
        principal by certificate (a broker, or a combined node), a super user, or a caller allowed
        CLUSTER_ACTION on the cluster (what Kafka's Envelope requires). Else SparkraftError
        CLUSTER_AUTHORIZATION_FAILED: a client cannot name someone else by sending the metadata."""
        trusted = self.node_id_of(direct) is not None or self.is_super_user(direct) or (
            self.authorizer is not None and self.allows(direct, cluster_action("CLUSTER_ACTION")))
        if not trusted:
            raise SparkraftError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                                 f"{direct.principal} may not forward requests for other principals "
                                 f"(CLUSTER_ACTION on the cluster)")
        if not principal.startswith("User:") or len(principal) > 1024:
            raise SparkraftError(Errors.INVALID_REQUEST, "a forwarded principal must be User:<name>")
        return Caller(principal, host[:256], authenticated=principal != ANONYMOUS)

    def wire_caller(self, peer: str, certificate: Optional[bytes]) -> Caller:
        """Who is on a wire connection (quorum/wire/) from ``peer`` ("host:port") that presented the
        verified ``certificate`` (DER; None without mutual TLS). The wire carries no SCRAM login:
        its callers are known by certificate or not at all, as a gRPC caller without a token is."""
        return self.connection_caller(endpoint_host(peer), certificate)

    def connection_caller(self, host: str, certificate: Optional[bytes]) -> Caller:
        """Who is on a TCP connection from ``host`` that presented the verified ``certificate`` (DER;
        None without mutual TLS): the wire's, and a Kafka listener's before any SASL login."""
        if self.tls is None or certificate is None:
            return Caller(ANONYMOUS, host)
        known = self._wire_callers.get(certificate)  # a connection's every request shows the same one
        if known is None:
            if len(self._wire_callers) >= MAX_CACHED_CERTIFICATES:
                self._wire_callers.clear()
            known = self._wire_callers[certificate] = self._by_certificate("", der_subject(certificate))
        return Caller(known.principal, host, known.authenticated, known.by_certificate)

    def _by_certificate(self, host: str, subject: Optional[str]) -> Caller:
        if subject is not None:
            principal = self.mapper.principal(subject)
            if principal is not None:
                return Caller(principal, host, authenticated=True, by_certificate=True)
            log.warning("no ssl.principal.mapping.rules rule applies to certificate %s: treated as %s",
                        subject, ANONYMOUS)
        return Caller(ANONYMOUS, host)

    def allows(self, caller: Caller, action: Action) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(caller.principal, caller.host, action)

    def is_super_user(self, caller: Caller) -> bool:
        return self.authorizer is not None and self.authorizer.is_super_user(caller.principal)

    def is_voter(self, caller: Caller, node_id: int) -> bool:
        return caller.by_certificate and caller.principal == self.voter_principal.replace(NODE_ID_FIELD, str(node_id))

    def is_broker(self, caller: Caller, node_id: int) -> bool:
        return caller.by_certificate and caller.principal == self.broker_principal.replace(NODE_ID_FIELD, str(node_id))

    def node_id_of(self, caller: Caller) -> Optional[int]:
        """The node id a voter's or broker's principal names, if it is one of them (``is_voter`` or
        ``is_broker`` of that id holds)."""
        for template in (self.voter_principal, self.broker_principal):
            head, sep, tail = template.partition(NODE_ID_FIELD)
            p = caller.principal
            if sep and caller.by_certificate and p.startswith(head) and p.endswith(tail):
                middle = p[len(head):len(p) - len(tail)]
                if middle.isdigit() and len(middle) <= 10:
                    return int(middle)
        return None


PLAINTEXT_NODE = NodeSecurity()
