-- Partitions without a leader: nothing can be produced to or consumed from them.
CREATE MATERIALIZED VIEW offline_partitions AS
SELECT topic_name, `partition`, replicas, isr, elr, last_known_elr
FROM partitions WHERE leader = -1
