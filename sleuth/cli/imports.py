"""``sleuth import FORMAT DIR --out FOLDER``: other tools' operator logs as a records folder that
``sleuth localize`` reads. One module per format adds itself with ``add_format``.
"""

from __future__ import annotations

import argparse

from sleuth.cli import import_nccl_profiler


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("import", help="turn another tool's operator logs into a records folder")
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    formats.required = True
    import_nccl_profiler.add_format(formats)
