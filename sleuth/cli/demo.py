"""``sleuth demo``: a real training job with one slowed rank and an emulated 4,096-GPU job with a
spine fault, each localized, printed and written up as an HTML report (see ``sleuth.demo``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    from sleuth.demo import MODES

    parser = subparsers.add_parser("demo", help="run the demo: find a slowed rank and a slow spine switch",
                                   description=__doc__)
    parser.add_argument("--out", default="demo-out", help="folder for the records, incidents and reports (default demo-out)")
    parser.add_argument("--mode", choices=MODES, default="auto",
                        help="stack: through the running stack (sleuth stack up); embedded: no services; "
                             "auto (default): the stack when it answers")
    parser.add_argument("--no-emulated", action="store_true", help="only the real training job")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth.demo.run import run_demo

    found = run_demo(Path(args.out), mode=args.mode, settings=Settings.from_env(), emulated=not args.no_emulated)
    return 0 if found else 1
