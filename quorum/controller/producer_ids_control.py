"""AllocateProducerIds (Kafka's ProducerIdControlManager): blocks of 1000 ids from a high mark."""
from __future__ import annotations

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.image import MetadataImage

BLOCK_SIZE = 1000
LONG_MAX = (1 << 63) - 1


def allocate(image: MetadataImage, req: api.AllocateProducerIdsRequest
             ) -> tuple[list[pb.ProducerIdsRecord], api.ProducerIdsBlock]:
    broker = image.cluster.broker(req.broker_id)
    if broker is None:
        raise SparkraftError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker {req.broker_id} is not registered.")
    if broker.broker_epoch != req.broker_epoch:
        raise SparkraftError(Errors.STALE_BROKER_EPOCH, f"Expected broker epoch {broker.broker_epoch}, "
                                                        f"but got broker epoch {req.broker_epoch}")
    first = max(image.producer_ids.next_producer_id, 0)
    if first > LONG_MAX - BLOCK_SIZE:
        raise SparkraftError(Errors.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds.")
    record = pb.ProducerIdsRecord(broker_id=req.broker_id, broker_epoch=req.broker_epoch,
                                  next_producer_id=first + BLOCK_SIZE)
    return [record], api.ProducerIdsBlock(first, BLOCK_SIZE)
