"""The ``sleuth`` command line: one entry point, one module per command group.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` (a function taking the parsed namespace and returning an exit code).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from sleuth.errors import SleuthError

# Command modules, in the order --help lists them.
_COMMAND_MODULES = (
    "version", "topology", "layout", "sim", "detect", "localize", "attribute", "imports", "report", "db", "gateway",
    "worker", "localizer",
    "alerter", "stack", "incidents", "demo",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every command group registered."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="sleuth",
        description="Find the GPU, NIC, link or switch that slows a distributed training job.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in _COMMAND_MODULES:
        importlib.import_module(f"sleuth.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; sleuth's own errors become a one-line message and exit code 2."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except SleuthError as error:
        print(f"sleuth {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `sleuth ... | head` closed our stdout early: not an error. Point stdout at devnull so
        # the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def entry() -> int:
    """The ``sleuth`` program: ``main`` in a process whose allocator suits large arrays
    (``sleuth.allocator``); set here, not in ``main``, which library callers and tests call."""
    from sleuth.allocator import tune_for_large_arrays

    tune_for_large_arrays()
    return main()


if __name__ == "__main__":  # pragma: no cover - `python -m sleuth.cli`
    sys.exit(entry())
