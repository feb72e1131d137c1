-- Each broker's registrations, fencings, unfencings and controlled shutdowns, in log order, from the
-- metadata log itself: when a broker was down, and for how long.
CREATE MATERIALIZED VIEW broker_liveness AS
SELECT CAST(get_json_object(data, '$.broker_id') AS INT) AS broker_id, `offset`, append_time,
       CASE type
         WHEN 'REGISTER_BROKER_RECORD' THEN
           CASE WHEN get_json_object(data, '$.fenced') = 'false' THEN 'registered' ELSE 'registered fenced' END
         WHEN 'UNREGISTER_BROKER_RECORD' THEN 'unregistered'
         WHEN 'FENCE_BROKER_RECORD' THEN 'fenced'
         WHEN 'UNFENCE_BROKER_RECORD' THEN 'unfenced'
         ELSE CASE WHEN get_json_object(data, '$.in_controlled_shutdown') = 'true' THEN 'controlled shutdown'
                   WHEN get_json_object(data, '$.fenced') = 'true' THEN 'fenced'
                   WHEN get_json_object(data, '$.fenced') = 'false' THEN 'unfenced'
                   ELSE 'changed' END
       END AS event
FROM metadata_log
WHERE type IN ('REGISTER_BROKER_RECORD', 'UNREGISTER_BROKER_RECORD', 'FENCE_BROKER_RECORD',
               'UNFENCE_BROKER_RECORD', 'BROKER_REGISTRATION_CHANGE_RECORD')
