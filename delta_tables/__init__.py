"""Delta table schemas, writers, consistent-cut readers and SQL registration."""
