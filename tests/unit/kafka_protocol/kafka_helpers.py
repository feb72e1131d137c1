"""A broker's Kafka handlers over an in-memory controller: what the kafka_protocol tests share."""
from __future__ import annotations

from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.kafka.apis import KafkaContext
from quorum.uuids import random_uuid

PORT = 9092


class InMemoryController:
    """The broker's controller client, answered by a LocalController (commits at once)."""

    def __init__(self, c: LocalController):
        self.c = c

    def call_committed(self, request, timeout=None, on_behalf_of=None, context=None):
        return self.c.request(request), self.c.end_offset - 1


def broker_with_orders(port: int = PORT):
    c = LocalController()
    for b in (1, 2):
        epoch = c.request(api.RegisterBrokerRequest(b, c.cluster_id, random_uuid(), (
            api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", port + b - 1),), f"rack-{b}")).broker_epoch
        c.request(api.BrokerHeartbeatRequest(b, epoch, c.end_offset))
    c.request(api.CreateTopicsRequest((api.CreatableTopic("orders", 4, 2),)))
    ctx = KafkaContext(1, c.cluster_id, "PLAINTEXT", lambda: c.core.image, InMemoryController(c), lambda o, t: True)
    return c, ctx
