"""The Spark streaming source for the metadata log, record decoding and the Delta materialiser."""
