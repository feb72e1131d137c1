"""Sans-I/O Raft (KIP-595 flavour): messages in, messages and persistence orders out.

Nothing in this package opens a socket, a file, a thread or reads a clock;
``tests/unit/test_raft_imports.py`` holds it to that.
"""
