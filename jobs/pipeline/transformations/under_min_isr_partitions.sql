-- Partitions whose ISR is below the topic's effective min.insync.replicas: producers with acks=all fail.
CREATE MATERIALIZED VIEW under_min_isr_partitions AS
SELECT p.topic_name, p.`partition`, p.leader, p.isr, CAST(c.value AS INT) AS min_insync_replicas
FROM partitions p JOIN effective_topic_configs c ON c.topic_name = p.topic_name AND c.name = 'min.insync.replicas'
WHERE cardinality(p.isr) < CAST(c.value AS INT)
