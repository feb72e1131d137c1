"""Deterministic simulation of a quorum: one event loop, virtual time, seeded faults.

``python -m quorum.sim --seeds 2000`` runs many seeds; a failure prints the seed and
the command that replays it. The pytest suite runs a few hundred.
"""
