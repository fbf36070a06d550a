"""Regenerate the Python code of ``commops.proto``: ``python -m sleuth.proto.generate``.

The generated modules are committed (a training job's interpreter need not have grpcio-tools);
``tests/proto/test_generated.py`` regenerates them into a temporary folder and fails on any diff.
Run it with the grpcio-tools pinned in constraints.txt: its protoc's version is the oldest protobuf
runtime the generated code accepts, the floor of the protobuf range in pyproject.toml.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO_FILE = "commops.proto"
# The proto is compiled as if it lived at sleuth/proto/commops.proto, so that the generated
# gRPC module imports `sleuth.proto.commops_pb2` rather than a top-level `commops_pb2`.
VIRTUAL_DIR = "sleuth/proto"
GENERATED = ("commops_pb2.py", "commops_pb2.pyi", "commops_pb2_grpc.py")


def generate(out_dir: Path) -> list[Path]:
    """Compile ``commops.proto`` into ``out_dir``; returns the generated files."""
    from grpc_tools import protoc  # dev-only dependency, imported only when regenerating

    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"--proto_path={VIRTUAL_DIR}={PROTO_DIR}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"{VIRTUAL_DIR}/{PROTO_FILE}",
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {PROTO_DIR / PROTO_FILE}")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for name in GENERATED:
            target = out_dir / name
            shutil.copyfile(Path(tmp, VIRTUAL_DIR, name), target)
            written.append(target)
        return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROTO_DIR, help="folder to write into")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
