-- Partitions whose ISR is smaller than their replica set: a replica has fallen behind or is down.
CREATE MATERIALIZED VIEW under_replicated_partitions AS
SELECT topic_name, `partition`, leader, replicas, isr, cardinality(replicas) - cardinality(isr) AS missing
FROM partitions WHERE cardinality(isr) < cardinality(replicas)
