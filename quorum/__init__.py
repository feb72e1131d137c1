"""The metadata quorum: Raft core, log storage, node process and clients."""
import os as _os

# Processes that run gRPC also start Spark's JVM (the demo, the materialiser next to in-process
# controllers): grpcio's fork handlers then crash the forked child before it can exec java. No
# child of ours uses gRPC after a fork, so the handlers are not needed. Must be set before grpc
# is imported, hence here.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
