"""The ``sparkraft`` command line: one entry point for every tool and process (DESIGN §8)."""
import os

# gRPC's C core logs every failed TLS handshake at INFO on stderr: a stranger knocking at a listener
# would write a line per attempt. Its warnings are not ours to show either; errors still show.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
