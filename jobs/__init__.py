"""Thin spark-submit entry points (materialize, maintenance)."""
