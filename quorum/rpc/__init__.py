"""gRPC adapters around the Raft core: servicers, clients and the generated protobuf code."""
