"""The replicated log: record batches, the log interface, memory and file implementations."""
