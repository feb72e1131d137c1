"""The metadata log as Kafka names it: one partition of this topic, with this fixed topic id
(Kafka's ``Uuid.METADATA_TOPIC_ID``, ``AAAAAAAAAAAAAAAAAAAAAQ``)."""
import uuid

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
