"""The benchmarks' ``--allocator`` option: time sleuth's code with the allocator the ``sleuth``
program sets for its processes (``sleuth.allocator``), or with the process's as it is."""

from __future__ import annotations

import argparse


def add(parser: argparse.ArgumentParser) -> None:
    """Declare ``--allocator tuned|default`` on a benchmark's parser."""
    parser.add_argument("--allocator", choices=("tuned", "default"), default="tuned",
                        help="tuned: the allocator as the sleuth program sets it (sleuth.allocator); default: as is")


def apply(args: argparse.Namespace) -> list[str]:
    """Set the allocator ``args.allocator`` names; returns the settings changed, for the JSON."""
    from sleuth.allocator import tune_for_large_arrays

    return tune_for_large_arrays() if args.allocator == "tuned" else []
