"""libnccl-profiler-sleuth.so built by its Makefile, and the tests' C stand-ins for NCCL, with gcc."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

PLUGIN_SRC = Path(__file__).resolve().parent.parent.parent / "logger" / "nccl_profiler"


def build_plugin(out: Path) -> str:
    """The plugin into ``out``; returns the compiler, for the stand-ins (``compile_c``)."""
    compiler = shutil.which("gcc")
    assert compiler, "gcc is needed to build libnccl-profiler-sleuth.so"
    subprocess.run(["make", "-s", "-C", str(PLUGIN_SRC), f"OUT={out}"], check=True)
    return compiler


def compile_c(compiler: str, output: Path, source: Path, *flags: str) -> None:
    """``source`` into ``output``, with the plugin's headers on the include path."""
    subprocess.run([compiler, "-O1", "-Wall", f"-I{PLUGIN_SRC}", "-o", str(output), str(source), *flags], check=True)
