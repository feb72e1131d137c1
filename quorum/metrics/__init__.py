"""Prometheus metrics: a small registry, its text format, and the ``/metrics`` HTTP endpoint."""
