"""Generated code of quorum/kafka_log (do not edit): records.py, the readers and writers of Apache
Kafka's metadata records, from scripts/gen_kafka_records.py; a test checks it is not stale."""
