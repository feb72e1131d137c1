-- Leaderships and replicas per rack (brokers without a rack under NULL).
CREATE MATERIALIZED VIEW replicas_per_rack AS
SELECT rack, count(*) AS brokers, sum(leaders) AS leaders, sum(replicas) AS replicas
FROM replicas_per_broker GROUP BY rack
