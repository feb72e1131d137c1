"""``sparkraft revert``'s execution: a reviewed plan (delta_tables/revert.py) applied through a
cluster's own authorized admin API, sparkraft's controllers (sparkraft_admin.py) or an Apache Kafka
cluster (kafka_admin.py), re-checked against the cluster's state first and verified after
(execute.py)."""
