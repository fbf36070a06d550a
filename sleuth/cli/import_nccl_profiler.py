"""``sleuth import nccl-profiler DIR --out FOLDER``: what ``libnccl-profiler-sleuth.so`` wrote;
``--follow``: streamed to the gateway while the job writes it.

``add_format(formats)`` adds the format to the ``sleuth import`` group (``sleuth.cli.imports``);
the conversion is ``sleuth.importers.nccl_profiler``, the streaming ``sleuth.importers.nccl_follow``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from sleuth.cli.arguments import positive_float, positive_int
from sleuth.errors import ConfigError


def add_format(formats: argparse._SubParsersAction) -> None:
    parser = formats.add_parser(
        "nccl-profiler", help="libnccl-profiler-sleuth.so's files (nccl-*.bin, nccl-*.json in its SLEUTH_LOG_DIR)"
    )
    parser.add_argument("dir", metavar="DIR", help="the plugin's SLEUTH_LOG_DIR")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="FOLDER", help="records folder to create (must not exist or be empty)")
    where.add_argument("--follow", action="store_true",
                       help="stream to the gateway while the job writes DIR (SLEUTH_COLLECTOR or --collector; "
                            "its token and TLS settings too), each rank's records once their step is over; "
                            "stops on SIGINT or SIGTERM, sending what is left")
    parser.add_argument("--collector", metavar="HOST:PORT", help="with --follow: the gateway (default: SLEUTH_COLLECTOR)")
    parser.add_argument("--idle-exit", type=positive_float("--idle-exit"), metavar="SECONDS",
                        help="with --follow: stop once no records file grew for this long (default: run until stopped)")
    parser.add_argument("--job", metavar="ID", help="job id (default: the processes' SLEUTH_JOB/torchrun/Slurm id, else DIR's name)")
    parser.add_argument("--gpu-clock", choices=("auto", "wall", "align"), default="auto",
                        help="GPU kernel times: wall (the GPU globaltimer is wall-clock ns), align (shift each rank's "
                             "GPU times by the least offset that puts every kernel start after its host issue), "
                             "auto (wall when consistent, else align; the default)")
    parser.add_argument("--period", type=positive_int("--period"), metavar="N",
                        help="collectives per training step on the largest communicator (default: found from the pattern)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.follow:
        return _follow(args)
    if args.collector or args.idle_exit:
        raise ConfigError("--collector and --idle-exit go with --follow")
    from sleuth.importers.nccl_profiler import import_folder

    result = import_folder(args.dir, args.out, job=args.job, gpu_clock=args.gpu_clock, period=args.period)
    records, spec = result.records, result.spec
    its = records["iteration"][records["iteration"] >= 0]
    span = f"{int(its.min())}..{int(its.max())}" if len(its) else "(none)"
    clocks = ", ".join(f"{kind}: {sum(1 for c in result.gpu_clock.values() if c == kind)} ranks"
                       for kind in ("wall", "align", "host") if kind in result.gpu_clock.values())
    print(f"job {spec.job}: {len(records)} records of {spec.world} ranks, {len(spec.communicators)} communicators; "
          f"iterations {span} (period {result.period}); GPU clock {clocks}; wrote {result.out}")
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _follow(args: argparse.Namespace) -> int:
    from sleuth.importers.nccl_follow import Follower, follow
    from sleuth.logger import read_tls_ca
    from sleuth.logger.sender import GrpcSink
    from sleuth.settings import Settings

    environ = {**os.environ, "SLEUTH_COLLECTOR": args.collector} if args.collector else os.environ
    settings = Settings.from_env(environ)  # --collector is checked as SLEUTH_COLLECTOR is
    if not settings.collector:
        raise ConfigError("--follow streams to a gateway: set SLEUTH_COLLECTOR or pass --collector HOST:PORT")
    folder = Path(args.dir)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    # Per user and folder: what the gateway has not confirmed waits there for the next follower.
    spill_root = Path(settings.logger_spill_dir or Path(tempfile.gettempdir()) / f"sleuth-spill-{os.getuid()}")
    sink = GrpcSink(settings.collector, spill_dir=spill_root / "nccl-follow" / _folder_key(folder), spill_root=spill_root,
                    buffer_bytes=settings.logger_buffer_bytes, spill_bytes=settings.logger_spill_bytes,
                    token=settings.collector_token, tls_ca=read_tls_ca(settings.collector_tls_ca))
    follower = Follower(folder, sink, job=args.job, gpu_clock=args.gpu_clock, period=args.period)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    said: list[Any] = [None]

    def report(f: Follower) -> None:
        if f.waiting != said[0]:
            print(f"waiting: {f.waiting}" if f.waiting else f"streaming {folder} to {settings.collector}", file=sys.stderr)
            said[0] = f.waiting

    try:
        follow(follower, interval_s=settings.logger_flush_s, stop=stop, idle_exit_s=args.idle_exit, on_poll=report)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sink.close(30.0)
    stats = sink.stats()
    job = follower.spec.job if follower.spec is not None else "(not known: nothing sent)"
    print(f"job {job}: {follower.sent} records sent, {stats['accepted']} confirmed by {settings.collector}, "
          f"{stats['dropped']} dropped, {stats['spilled_bytes']} bytes spilled for the next follower")
    return 0 if follower.spec is not None else 1


def _folder_key(folder: Path) -> str:
    """A spill folder name per followed folder, stable across runs."""
    import hashlib

    return hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
