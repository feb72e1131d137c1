"""Migration from a ZooKeeper-mode Kafka cluster (KIP-866): read ZooKeeper's metadata into the log,
then mirror the log back into ZooKeeper until the migration is finalized.

znodes.py knows Kafka's layout and JSON; importer.py turns a read cluster into records; zk_view.py
turns the difference of two images into znode writes; zk_client.py does the I/O (kazoo);
driver.py is the active controller's thread that runs the rounds. The states in the log are the
controller's (quorum/controller/migration_control.py).
"""
