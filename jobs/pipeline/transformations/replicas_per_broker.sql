-- Each registered broker's leaderships and replicas, with its rack: the balance of the cluster.
CREATE MATERIALIZED VIEW replicas_per_broker AS
SELECT b.broker_id, b.rack, b.fenced,
       count_if(p.leader = b.broker_id) AS leaders,
       count(p.topic_name) AS replicas
FROM brokers b LEFT JOIN (SELECT topic_name, leader, explode(replicas) AS replica FROM partitions) p
  ON p.replica = b.broker_id
GROUP BY b.broker_id, b.rack, b.fenced
