"""``sleuth version``: the installed version."""

from __future__ import annotations

import argparse

import sleuth


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("version", help="print the sleuth version")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    print(sleuth.__version__)
    return 0
