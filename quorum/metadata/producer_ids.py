"""The producer id allocator's high mark: PRODUCER_IDS_RECORD."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    next_producer_id: int = -1  # first id of the next block to hand out; -1 before any block

    def records(self) -> Iterator[pb.ProducerIdsRecord]:
        if self.next_producer_id >= 0:  # no broker asked: Kafka writes -1 for broker and epoch
            yield pb.ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                       next_producer_id=self.next_producer_id)


class ProducerIdsDelta:
    def __init__(self, image: ProducerIdsImage) -> None:
        self.image = image
        self.next_producer_id = image.next_producer_id

    def replay_producer_ids(self, record: pb.ProducerIdsRecord) -> None:
        self.next_producer_id = record.next_producer_id

    def apply(self) -> ProducerIdsImage:
        if self.next_producer_id == self.image.next_producer_id:
            return self.image
        return ProducerIdsImage(self.next_producer_id)
