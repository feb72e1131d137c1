"""Sans-I/O Raft (KIP-595 flavour): messages in, messages and persistence orders out.

Nothing in this package opens a socket, a file, a thread or reads a clock;
``tests/unit/test_imports.py`` holds it to that. The parts: core.py (RaftCore: inputs, outputs,
the checks every message passes, dispatch), roles.py and transitions.py (the roles and every move
between them, with the table), polls.py (what each role does when its time comes), election.py
and replication.py (the RPC handlers), ready.py (Ready and the one sequence that carries it out),
messages.py, progress.py, accumulator.py, limits.py, errors.py, settings.py.
"""
