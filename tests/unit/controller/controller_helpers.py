"""A LocalController with registered, unfenced brokers, and small request builders."""
from __future__ import annotations

from typing import Optional

from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.controller.settings import ControllerSettings


def incarnation(broker_id: int, gen: int = 0) -> str:
    return f"Inc{gen:03d}xxxxxxxxxxxxx{broker_id:03d}"


def register(c: LocalController, broker_id: int, rack: Optional[str] = None, gen: int = 0,
             unfence: bool = True, **kw) -> int:
    reply = c.request(api.RegisterBrokerRequest(broker_id, c.cluster_id, incarnation(broker_id, gen),
                                                (api.BrokerEndpoint("PLAINTEXT", "localhost", 9092 + broker_id),),
                                                rack, **kw))
    if unfence:
        hb = c.request(api.BrokerHeartbeatRequest(broker_id, reply.broker_epoch, c.core.last_committed_offset))
        assert not hb.is_fenced
    return reply.broker_epoch


def controller(brokers: int = 3, racks: Optional[list] = None, **settings) -> tuple[LocalController, dict]:
    c = LocalController(ControllerSettings(seed=7, **settings))
    epochs = {b: register(c, b, racks[b % len(racks)] if racks else None) for b in range(brokers)}
    return c, epochs


def create(c: LocalController, name: str, partitions: int = 1, rf: int = 1, **kw) -> api.CreateTopicResult:
    (result,) = c.request(api.CreateTopicsRequest((api.CreatableTopic(name, partitions, rf, **kw),)))
    return result


def heartbeat(c: LocalController, broker: int, epoch: int, **kw) -> api.BrokerHeartbeatReply:
    return c.request(api.BrokerHeartbeatRequest(broker, epoch, c.core.last_committed_offset, **kw))


def metadata_written(c: LocalController, since: int) -> int:
    """How many metadata records ``c`` appended at or after offset ``since`` (audit entries are not)."""
    from quorum.metadata.records import RecordType

    audit = int(RecordType.AUDIT_RECORD).to_bytes(2, "big")
    return sum(1 for b in (*c.log, *c.uncommitted) if not b.control for i, r in enumerate(b.records)
               if b.base_offset + i >= since and r[:2] != audit)


def metadata_in(op) -> list[bytes]:
    """The metadata records an Operation proposes (its audit entry is not metadata)."""
    from quorum.metadata.records import RecordType

    audit = int(RecordType.AUDIT_RECORD).to_bytes(2, "big")
    return [r for batch in op.batches for r in batch if r[:2] != audit]
