"""``sleuth import nccl-profiler DIR --out FOLDER``: what ``libnccl-profiler-sleuth.so`` wrote.

``add_format(formats)`` adds the format to the ``sleuth import`` group (``sleuth.cli.imports``);
the conversion is ``sleuth.importers.nccl_profiler``.
"""

from __future__ import annotations

import argparse
import sys

from sleuth.cli.arguments import positive_int


def add_format(formats: argparse._SubParsersAction) -> None:
    parser = formats.add_parser(
        "nccl-profiler", help="libnccl-profiler-sleuth.so's files (nccl-*.bin, nccl-*.json in its SLEUTH_LOG_DIR)"
    )
    parser.add_argument("dir", metavar="DIR", help="the plugin's SLEUTH_LOG_DIR")
    parser.add_argument("--out", required=True, metavar="FOLDER", help="records folder to create (must not exist or be empty)")
    parser.add_argument("--job", metavar="ID", help="job id (default: the processes' SLEUTH_JOB/torchrun/Slurm id, else DIR's name)")
    parser.add_argument("--gpu-clock", choices=("auto", "wall", "align"), default="auto",
                        help="GPU kernel times: wall (the GPU globaltimer is wall-clock ns), align (shift each rank's "
                             "GPU times by the least offset that puts every kernel start after its host issue), "
                             "auto (wall when consistent, else align; the default)")
    parser.add_argument("--period", type=positive_int("--period"), metavar="N",
                        help="collectives per training step on the largest communicator (default: found from the pattern)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
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
