"""The committed generated code is exactly what commops.proto generates."""

from pathlib import Path

from sleuth.proto import generate


def test_regenerating_gives_no_diff(tmp_path: Path):
    for fresh in generate.generate(tmp_path):
        committed = generate.PROTO_DIR / fresh.name
        assert committed.read_text() == fresh.read_text(), (
            f"{committed.name} is stale: run `python -m sleuth.proto.generate` and commit the result"
        )


def test_grpc_module_imports_under_the_sleuth_root():
    from sleuth.proto import commops_pb2_grpc

    assert hasattr(commops_pb2_grpc, "CollectorServicer")
    assert "from sleuth.proto import commops_pb2 as" in Path(commops_pb2_grpc.__file__).read_text()
