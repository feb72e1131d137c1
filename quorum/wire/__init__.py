"""sparkraft's framed TCP protocol ("the wire"): the Raft requests and appends of the gRPC Raft
service, framed by hand on asyncio, at a small fraction of a gRPC call's cost (README: the client
path). gRPC stays the API every tool speaks; the wire is found through it (WireEndpoint)."""
