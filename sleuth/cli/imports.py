"""``sleuth import``: other tools' operator logs as a records folder that ``sleuth localize`` reads.

``sleuth import nccl-inspector DIR --out FOLDER [--job ID]``: NCCL Inspector's JSON logs (verbose).
``sleuth import flight-recorder DIR --out FOLDER [--job ID] [--gpus-per-host N]``: PyTorch
Flight Recorder dumps, one per rank (pickle or JSON; pickles are loaded without running code).
``sleuth import torch-profiler DIR --out FOLDER [--job ID] [--gpus-per-host N]``: PyTorch profiler
(Kineto) Chrome traces, one per rank (``*.json``, ``*.pt.trace.json``, ``*.json.gz``).
``sleuth import whatif-trace TRACE.parquet --out FOLDER [--meta META.yaml]``: the What-if paper's
released traces (``sleuth.importers.whatif_trace``).
``sleuth import nccl-profiler DIR --out FOLDER``: the files sleuth's NCCL profiler plugin wrote
(``sleuth.cli.import_nccl_profiler``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sleuth.cli import import_nccl_profiler
from sleuth.cli.arguments import non_negative_float, positive_int

if TYPE_CHECKING:
    from sleuth.importers import Imported


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("import", help="turn NCCL Inspector, Flight Recorder, PyTorch profiler, NCCL profiler logs or What-if traces into a records folder")
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    formats.required = True
    inspector = formats.add_parser("nccl-inspector", help="NCCL Inspector JSON logs (NCCL_INSPECTOR_DUMP_VERBOSE=1)")
    recorder = formats.add_parser("flight-recorder", help="PyTorch Flight Recorder dumps, one file per rank")
    profiler = formats.add_parser("torch-profiler", help="PyTorch profiler (Kineto) traces, one file per rank")
    for sub in (inspector, recorder, profiler):
        sub.add_argument("dir", metavar="DIR", help="folder of the tool's files")
        sub.add_argument("--out", required=True, metavar="FOLDER", help="records folder to create (must not exist or be empty)")
        sub.add_argument("--job", metavar="ID", help="job id in the records (default: DIR's name)")
        sub.add_argument("--workers", type=positive_int("--workers"), default=min(8, os.cpu_count() or 1), metavar="N",
                         help="processes reading the files (default: the CPUs, at most 8)")
    for sub, what in ((recorder, "dumps do not name hosts"), (profiler, "used when traces have no host_name")):
        sub.add_argument("--gpus-per-host", type=positive_int("--gpus-per-host"), default=8, metavar="N",
                         help=f"ranks per host, since {what} (default 8)")
    recorder.add_argument("--watchdog-poll-ms", type=non_negative_float("--watchdog-poll-ms"), default=100, metavar="MS",
                          help="how late torch's watchdog may notice a completion (default 100, its polling period)")
    for sub in (inspector, recorder, profiler):
        sub.set_defaults(handler=_run)
    _add_whatif_trace(formats)
    import_nccl_profiler.add_format(formats)


def _add_whatif_trace(formats: argparse._SubParsersAction) -> None:
    from sleuth.importers.whatif_trace import TIME_UNITS

    trace = formats.add_parser("whatif-trace", help="the What-if paper's traces (a Parquet file per job, ByteDance StragglerAnalysis)")
    trace.add_argument("trace", metavar="TRACE", help="the trace-*.parquet file")
    trace.add_argument("--meta", metavar="YAML", help="its meta-*.yaml (sizes checked against the trace; its trial_name is the job id)")
    trace.add_argument("--out", required=True, metavar="FOLDER", help="records folder to create (must not exist or be empty)")
    trace.add_argument("--job", metavar="ID", help="job id in the records (default: the meta's trial_name, else the file's name)")
    trace.add_argument("--gpus-per-host", type=positive_int("--gpus-per-host"), default=8, metavar="N",
                       help="ranks per host: the trace names no hosts, a worker's global rank places it (default 8)")
    trace.add_argument("--time-unit", choices=sorted(TIME_UNITS), default="s", help="unit of start_ts and duration (default s)")
    trace.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth.importers import read_flight_recorder, read_inspector, read_torch_profiler, read_whatif_trace

    if args.format == "whatif-trace":
        imported = read_whatif_trace(args.trace, meta=args.meta, job=args.job, gpus_per_host=args.gpus_per_host,
                                     time_unit=args.time_unit)
        return _written(imported, args.out)
    folder = Path(args.dir)
    job = args.job or folder.resolve().name
    if args.format == "nccl-inspector":
        imported = read_inspector(folder, job=job, workers=args.workers)
    elif args.format == "torch-profiler":
        imported = read_torch_profiler(folder, job=job, gpus_per_host=args.gpus_per_host, workers=args.workers)
    else:
        imported = read_flight_recorder(folder, job=job, gpus_per_host=args.gpus_per_host,
                                        watchdog_poll_ms=args.watchdog_poll_ms, workers=args.workers)
    return _written(imported, args.out)


def _written(imported: Imported, out_folder: str) -> int:
    from sleuth.importers import write_folder
    from sleuth.importers.assemble import kind_counts

    out = write_folder(imported, out_folder)
    records, spec = imported.records, imported.spec
    known = int((records["iteration"] >= 0).sum())
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(kind_counts(records).items()))
    print(f"job {spec.job}: {len(records)} records ({kinds}) of {spec.world} ranks on "
          f"{len({p.host for p in spec.placements})} hosts, {len(spec.communicators)} communicators; "
          f"{known} records in iterations {_span(records)}; wrote {out}")
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _span(records) -> str:
    its = records["iteration"][records["iteration"] >= 0]
    return f"{int(its.min())}..{int(its.max())}" if len(its) else "(none)"
