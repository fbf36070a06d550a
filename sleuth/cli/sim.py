"""``sleuth sim``: emulate a training job's CommOps records, with injected faults and ground truth.

* ``sleuth sim --topology FILE | --generate SPEC --tp N --pp N --dp N [--ep N --cp N]
  --microbatches M --iterations N [--fault SPEC]... --seed S --out DIR`` — one scenario;
  ``--live HOST:PORT`` streams it to a collector instead of (or as well as) writing files.
* ``sleuth sim suite NAME --out DIR [--seed S]`` — a named set of scenarios, one folder each.
* ``sleuth sim --list-faults`` — the fault grammar, with examples.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sleuth.cli.arguments import positive_int
from sleuth.errors import ConfigError, LayoutError
from sleuth.layout import DEFAULT_ORDER, ParallelLayout


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim",
        help="emulate a job's records with injected faults and ground truth",
        description=(
            "Emulate the CommOps records of a Megatron-style hybrid-parallel job (1F1B) on a fabric, "
            "with injected faults; write records.parquet, iterations.parquet, job.json and truth.json. "
            "`sleuth sim suite NAME --out DIR` writes a named, seeded set of scenarios."
        ),
        epilog="suites: scale, scale-nic, dims, types, network, concurrent, ecmp, nonhw, clean, drift",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # The optional `suite NAME` words: argparse sub-commands would make the direct form need one.
    parser.add_argument("words", nargs="*", metavar="suite NAME", help="write the named suite instead")
    source = parser.add_argument_group("fabric")
    source.add_argument("--topology", metavar="FILE", help="topology YAML file")
    source.add_argument("--generate", metavar="SPEC", help="generated fabric, e.g. fattree:hosts=16,gpus=8,pod=4,spines=4")
    job = parser.add_argument_group("job")
    for name in ("tp", "pp", "dp"):
        job.add_argument(f"--{name}", type=positive_int(name), metavar="N", help=f"{name} size")
    job.add_argument("--ep", type=positive_int("ep"), default=1, metavar="N", help="expert-parallel size (default 1)")
    job.add_argument("--cp", type=positive_int("cp"), default=1, metavar="N", help="context-parallel size (default 1)")
    job.add_argument("--order", default=DEFAULT_ORDER, help=f"rank order (default {DEFAULT_ORDER})")
    job.add_argument("--microbatches", type=positive_int("microbatches"), default=8, metavar="M", help="micro-batches per iteration (default 8)")
    job.add_argument("--iterations", type=positive_int("iterations"), default=None, metavar="N", help="iterations (default 100; suites: theirs)")
    job.add_argument("--job", default="sim", help="job id in the records (default sim)")
    model = parser.add_argument_group("model")
    model.add_argument("--layers", type=positive_int("layers"), default=16, metavar="N", help="transformer layers (default 16)")
    model.add_argument("--hidden", type=positive_int("hidden"), default=4096, metavar="N", help="hidden size (default 4096)")
    model.add_argument("--seq-len", type=positive_int("seq-len"), default=4096, metavar="N", help="sequence length (default 4096)")
    model.add_argument("--micro-batch", type=positive_int("micro-batch"), default=1, metavar="N", help="sequences per micro-batch (default 1)")
    model.add_argument("--sequence-parallel", action="store_true", help="TP all-gather/reduce-scatter instead of all-reduce")
    model.add_argument("--zero", action="store_true", help="distributed optimizer: DP reduce-scatter + all-gather")
    model.add_argument("--gpu-tflops", type=float, default=400.0, metavar="X", help="achieved TFLOP/s per GPU (default 400)")
    faults = parser.add_argument_group("faults and noise")
    faults.add_argument("--fault", action="append", default=[], metavar="SPEC", help="inject a fault (repeatable; see --list-faults)")
    faults.add_argument("--list-faults", action="store_true", help="print the fault grammar with examples and exit")
    faults.add_argument("--drift", type=float, default=0.0, metavar="F", help="base iteration time creeps up by F over the run (0.07)")
    faults.add_argument("--comm-drift", type=float, default=0.0, metavar="F",
                        help="every transfer time creeps up by F over the run (0.2)")
    faults.add_argument("--host-clock", type=_host_clock, action="append", default=[], metavar="HOST=NS",
                        help="HOST's clock runs NS nanoseconds ahead of true time in its records (repeatable; 20000000)")
    faults.add_argument("--stride", type=positive_int("stride"), default=1, metavar="K", help="record every K-th iteration (default 1)")
    faults.add_argument("--no-jitter", action="store_true", help="no jitter and no hiccups: exact critical-path times")
    faults.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed (default 0)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", metavar="DIR", help="folder to write")
    out.add_argument("--no-labels", action="store_true", help="skip the per-operator abnormal labels (no counterfactual run)")
    out.add_argument("--live", metavar="HOST:PORT", help="stream to a collector over gRPC")
    out.add_argument("--loggers", type=positive_int("loggers"), default=None, metavar="N", help="live: client streams (default: one per rank)")
    out.add_argument("--pace", type=float, default=0.0, metavar="X", help="live: X times real time; 0 = as fast as possible (default)")
    parser.set_defaults(handler=_run)


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return value


def _host_clock(text: str) -> tuple[str, int]:
    host, _, offset = text.partition("=")
    try:
        return host, int(offset)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST=NS (a host's name and an int of nanoseconds)") from None


def _run(args: argparse.Namespace) -> int:
    from sleuth.sim.faults import FAULT_GRAMMAR

    if args.list_faults:
        print(FAULT_GRAMMAR, end="")
        return 0
    if args.words:
        if args.words[0] != "suite" or len(args.words) != 2:
            raise ConfigError(f"unexpected words {' '.join(args.words)!r}: the only sub-command is `suite NAME`")
        return _suite(args, args.words[1])
    return _single(args)


def _timing(args: argparse.Namespace):
    from sleuth.sim.engine import Timing

    return Timing.exact() if args.no_jitter else Timing()


def _suite(args: argparse.Namespace, name: str) -> int:
    from sleuth.progress import track
    from sleuth.sim.output import write_emulation
    from sleuth.sim.scenario import Emulation
    from sleuth.sim.suites import suite

    if args.out is None:
        raise ConfigError("--out DIR is required")
    scenarios = suite(name, seed=args.seed, iterations=args.iterations, timing=_timing(args) if args.no_jitter else None)
    root = Path(args.out)
    index = []
    for scenario in track(scenarios, f"suite {name}"):
        folder = root / scenario.name
        write_emulation(Emulation(scenario), folder, labels=not args.no_labels)
        index.append({"name": scenario.name, "folder": scenario.name, "world": scenario.layout.world,
                      "faults": [f.to_dict() for f in scenario.faults]})
        print(f"wrote {folder}", file=sys.stderr)
    (root / "suite.json").write_text(json.dumps({"suite": name, "seed": args.seed, "scenarios": index}, indent=1) + "\n")
    return 0


def _single(args: argparse.Namespace) -> int:
    from sleuth.sim.faults import parse_fault
    from sleuth.sim.model import ModelSpec
    from sleuth.sim.output import write_emulation
    from sleuth.sim.scenario import Emulation, Scenario
    from sleuth.topology import generate, load_topology

    missing = [f"--{name}" for name in ("tp", "pp", "dp") if getattr(args, name) is None]
    if missing:
        raise ConfigError(f"{', '.join(missing)} required")
    if (args.topology is None) == (args.generate is None):
        raise ConfigError("give --topology FILE or --generate SPEC (exactly one)")
    if args.out is None and args.live is None:
        raise ConfigError("--out DIR (or --live HOST:PORT) is required")
    faults = tuple(parse_fault(text) for text in args.fault)  # fail before the fabric is built
    topology = load_topology(args.topology) if args.topology else generate(args.generate)
    gph = topology.gpus_per_host
    if gph is None:
        raise ConfigError("the topology's hosts have different GPU counts; sleuth sim needs uniform hosts")
    world = args.tp * args.pp * args.dp * args.ep * args.cp
    try:
        layout = ParallelLayout(world, args.tp, args.pp, args.dp, ep=args.ep, cp=args.cp, order=args.order, gpus_per_host=gph)
    except LayoutError as error:
        raise ConfigError(str(error)) from None
    model = ModelSpec(
        layers=args.layers,
        hidden=args.hidden,
        seq_len=args.seq_len,
        micro_batch=args.micro_batch,
        sequence_parallel=args.sequence_parallel,
        zero=args.zero,
        gpu_tflops=args.gpu_tflops,
    )
    scenario = Scenario(
        topology=topology,
        layout=layout,
        model=model,
        microbatches=args.microbatches,
        iterations=args.iterations or 100,
        faults=faults,
        timing=_timing(args),
        drift=args.drift,
        comm_drift=args.comm_drift,
        host_clocks_ns=dict(args.host_clock),
        stride=args.stride,
        seed=args.seed,
        job=args.job,
    )
    emulation = Emulation(scenario)
    if args.out is not None:
        files = write_emulation(emulation, args.out, labels=not args.no_labels)
        print(f"wrote {', '.join(str(path) for path in files.values())}", file=sys.stderr)
    if args.live is not None:
        from sleuth.sim.live import stream_live

        summary = stream_live(emulation, args.live, loggers=args.loggers, pace=args.pace)
        print(json.dumps(summary.__dict__ | {"reasons": list(summary.reasons)}))
    return 0
