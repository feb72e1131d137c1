"""The processes' drivers: a RaftNode runs the sans-I/O Raft core against real disks, clocks and
gRPC; a ControllerNode runs the controller core on top of one. Each module does one job:

- raft_node.py: the RaftNode, its API and its event loop (dispatch by inbox item type, inbox.py);
- storage.py: the directory lock and the storage opened and checked before anything runs;
- server.py: the gRPC server, its port, its limits, and the client-write slots;
- cluster_probe.py: refusing to run among voters of another cluster;
- proposals.py, listeners.py, status.py, retention.py: what the loop does after each round;
- controller_node.py, snapshot_policy.py: the controller's driver and when it snapshots.
"""
from quorum.node.raft_node import RaftNode
from quorum.node.status import NodeStatus

__all__ = ["RaftNode", "NodeStatus"]
