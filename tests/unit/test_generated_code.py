"""The committed gRPC code is exactly what scripts/gen_protos.py makes from proto/, and it runs on
the grpcio and protobuf versions pyproject.toml admits."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "quorum" / "gen"
TREES = ("quorum/gen", "bench/gen")


def _files(tree: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(tree)): p.read_bytes()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _lower_bound(requirement_name: str) -> tuple[int, ...]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        m = re.fullmatch(rf"{re.escape(requirement_name)}\s*(?:>=|==)\s*([\d.]+)\b.*", dep)
        if m:
            return tuple(int(x) for x in m.group(1).split("."))
    raise AssertionError(f"pyproject.toml declares no lower bound for {requirement_name}")


def test_regenerating_reproduces_the_committed_files(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools is not installed: cannot regenerate")
    out = tmp_path / "gen"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(out)],
                   check=True, capture_output=True)
    for tree in TREES:
        committed, fresh = _files(ROOT / tree), _files(out / tree)
        assert sorted(fresh) == sorted(committed), f"{tree}: run python scripts/gen_protos.py"
        stale = [name for name in fresh if fresh[name] != committed[name]]
        assert not stale, f"{tree}: {stale} differ from their .proto; run: python scripts/gen_protos.py"


def test_generated_code_needs_no_newer_runtime_than_declared():
    pb2 = (GEN / "sparkraft" / "v1" / "raft_pb2.py").read_text()
    grpc_py = (GEN / "sparkraft" / "v1" / "raft_pb2_grpc.py").read_text()
    m = re.search(r"Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),", pb2)
    gencode_protobuf = tuple(int(x) for x in m.groups())
    gencode_grpc = tuple(int(x) for x in re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", grpc_py)
                         .group(1).split("."))
    assert _lower_bound("protobuf") >= gencode_protobuf
    assert _lower_bound("grpcio") >= gencode_grpc


def test_generated_modules_import_under_quorum_gen():
    from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc

    assert raft_pb2.DESCRIPTOR.services_by_name["Raft"].full_name == "sparkraft.v1.Raft"
    assert raft_pb2.FetchResponse.__module__ == "quorum.gen.sparkraft.v1.raft_pb2"
    assert hasattr(raft_pb2_grpc, "RaftStub") and hasattr(raft_pb2_grpc, "RaftServicer")
    response = raft_pb2.FetchResponse(high_watermark=-1)
    assert not response.HasField("diverging") and not response.HasField("snapshot_id")
