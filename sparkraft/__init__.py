"""The ``sparkraft`` command line: one entry point for every tool and process (DESIGN §8)."""
