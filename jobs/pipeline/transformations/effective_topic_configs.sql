-- Every topic config of every topic as brokers apply it: the topic's own value, else the cluster-level
-- broker config that is its synonym, else Kafka's default; with where the value came from.
CREATE MATERIALIZED VIEW effective_topic_configs AS
SELECT t.name AS topic_name, d.name,
       coalesce(own.value, cluster.value, d.default_value) AS value,
       CASE WHEN own.value IS NOT NULL THEN 'TOPIC_CONFIG'
            WHEN cluster.value IS NOT NULL THEN 'DEFAULT_BROKER_CONFIG'
            ELSE 'DEFAULT_CONFIG' END AS source
FROM topics t CROSS JOIN topic_config_defaults d
LEFT JOIN configs own ON own.resource_type = 'TOPIC' AND own.resource_name = t.name AND own.name = d.name
LEFT JOIN configs cluster ON cluster.resource_type = 'BROKER' AND cluster.resource_name = '' AND cluster.name = d.synonym
