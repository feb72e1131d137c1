"""The metadata quorum: Raft core, log storage, node process and clients."""
