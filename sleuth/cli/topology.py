"""``sleuth topology``: inspect and save fabrics.

* ``sleuth topology show FILE | --generate SPEC [--path GPU GPU]... [--json]`` — device counts
  and sample paths (same host, same leaf, across spines) with weights and C(d).
* ``sleuth topology dump FILE | --generate SPEC [--compact] [-o OUT]`` — write the topology as
  YAML (e.g. to save a generated fabric and edit it).
"""

from __future__ import annotations

import argparse
import json
import sys

from sleuth.errors import ConfigError
from sleuth.topology.generators import generate
from sleuth.topology.model import Topology
from sleuth.topology.summary import summarize
from sleuth.topology.yaml_io import dump_topology, load_topology


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("topology", help="inspect a fabric: device counts, paths, C(d)")
    commands = parser.add_subparsers(dest="topology_command", metavar="ACTION")
    commands.required = True

    show = commands.add_parser("show", help="device counts and sample paths of a topology")
    _add_source(show)
    show.add_argument(
        "--path",
        nargs=2,
        action="append",
        default=[],
        metavar=("GPU_A", "GPU_B"),
        help="also show the path between two GPUs (ids like gpu:h0000/0); repeatable",
    )
    show.add_argument("--json", action="store_true", help="print a JSON object instead of tables")
    show.set_defaults(handler=_show)

    dump = commands.add_parser("dump", help="write a topology as YAML")
    _add_source(dump)
    dump.add_argument("--compact", action="store_true", help="write 'generate:' form when the fabric is generated")
    dump.add_argument("-o", "--output", metavar="OUT", help="file to write (default: stdout)")
    dump.set_defaults(handler=_dump)


def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="topology YAML file")
    parser.add_argument(
        "--generate",
        metavar="SPEC",
        help="generate instead, e.g. fattree:hosts=2048,gpus=8,pod=32,spines=16 "
        "or spineleaf:hosts=16,gpus=8,per_leaf=4,spines=2",
    )


def _load(args: argparse.Namespace) -> tuple[Topology, str]:
    if (args.file is None) == (args.generate is None):
        raise ConfigError("give a topology FILE or --generate SPEC (exactly one)")
    if args.generate is not None:
        topology = generate(args.generate)
        return topology, topology.generator or args.generate
    try:
        return load_topology(args.file), args.file
    except OSError as error:
        raise ConfigError(f"cannot read topology file {args.file}: {error.strerror or error}") from None


def _show(args: argparse.Namespace) -> int:
    topology, source = _load(args)
    summary = summarize(topology, source=source, extra_pairs=[tuple(pair) for pair in args.path])
    if args.json:
        json.dump(summary.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(summary.to_text())
    return 0


def _dump(args: argparse.Namespace) -> int:
    topology, _ = _load(args)
    text = dump_topology(topology, compact=args.compact)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as error:
            raise ConfigError(f"cannot write {args.output}: {error.strerror or error}") from None
    else:
        sys.stdout.write(text)
    return 0
