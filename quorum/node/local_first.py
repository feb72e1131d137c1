"""What a controller's Kafka listener sends its writes through: this controller itself when it is
the active one (no loopback gRPC hop: a CreateTopics through the listener took 2.4 ms more than
over gRPC with that hop, at p50), else the active controller through a ControllerClient, as a
broker forwards (KIP-590). Either way the request is authorized as the Kafka client's principal.
"""
from __future__ import annotations

import concurrent.futures
from typing import Optional

from quorum.errors import Errors, SparkraftError
from quorum.rpc import request_actions
from quorum.security.principal import ANONYMOUS, Caller

DEFAULT_TIMEOUT_S = 30.0


class LocalFirstController:
    def __init__(self, node, remote):
        """``node``: the ControllerNode; ``remote``: a ControllerClient to its quorum."""
        self.node = node
        self.remote = remote

    def call_committed(self, request, timeout: Optional[float] = None,
                       on_behalf_of: Optional[tuple[str, str]] = None, context=None) -> tuple[object, int]:
        """(reply, committed offset at or past the request's records), as ControllerClient's;
        ``context``: who sent it (an AuditContext), for its audit entry."""
        node = self.node
        if node.is_active:
            principal, host = on_behalf_of or (ANONYMOUS, "")
            caller = Caller(principal, host, authenticated=principal != ANONYMOUS)
            security = node.security

            def check():
                return request_actions.refusal(security, caller, request, node.topic_name)

            try:
                release = node.hold_client_slot(False)
            except SparkraftError:
                release = None  # every local slot is busy: the remote path queues nothing either
            if release is not None:
                future = node.submit(request, check if security.authorizer is not None else None, context)
                future.add_done_callback(lambda _f: release())
                try:
                    reply = future.result(timeout or DEFAULT_TIMEOUT_S)
                    return reply, node.last_committed_offset()
                except concurrent.futures.TimeoutError:
                    raise SparkraftError(Errors.REQUEST_TIMED_OUT, "not committed before the deadline; the change "
                                                                   "may still be committed") from None
                except SparkraftError as e:
                    if e.error is not Errors.NOT_CONTROLLER:  # lost the leadership meanwhile: ask the new one
                        raise
        return self.remote.call_committed(request, timeout, on_behalf_of, context)

    def close(self) -> None:
        self.remote.close()
