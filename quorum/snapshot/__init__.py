"""Snapshots of the metadata image: ``<20-digit end offset>-<10-digit epoch>.checkpoint`` files."""
