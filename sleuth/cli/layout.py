"""``sleuth layout``: the communicator groups and rank placement of a Megatron-style layout."""

from __future__ import annotations

import argparse
import json

from sleuth.cli.arguments import positive_int
from sleuth.layout import DEFAULT_ORDER, DIMENSIONS, ParallelLayout
from sleuth.topology.ids import host_name

# How many groups of each kind the human-readable output shows.
_SHOWN = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "layout",
        help="list the communicator groups of a tp/pp/dp/ep/cp layout",
        description=(
            "List the communicator groups (tp, cp, ep, dp, edp, pp, embd) of a Megatron-style "
            "hybrid parallel layout, and where each rank runs."
        ),
    )
    parser.add_argument("--world", type=positive_int("world"), required=True, metavar="N", help="world size (ranks)")
    parser.add_argument("--tp", type=positive_int("tp"), required=True, metavar="N", help="tensor-parallel size")
    parser.add_argument("--pp", type=positive_int("pp"), required=True, metavar="N", help="pipeline-parallel size")
    parser.add_argument("--dp", type=positive_int("dp"), required=True, metavar="N", help="data-parallel size")
    parser.add_argument("--ep", type=positive_int("ep"), default=1, metavar="N", help="expert-parallel size (default 1)")
    parser.add_argument("--cp", type=positive_int("cp"), default=1, metavar="N", help="context-parallel size (default 1)")
    parser.add_argument(
        "--order",
        default=DEFAULT_ORDER,
        help=f"rank order, first name varies fastest (default {DEFAULT_ORDER}); size-1 names may be left out",
    )
    parser.add_argument(
        "--gpus-per-host", type=positive_int("gpus-per-host"), default=8, metavar="N", help="GPUs per host (default 8)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object: sizes, groups, ranks")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    layout = ParallelLayout(
        args.world,
        args.tp,
        args.pp,
        args.dp,
        ep=args.ep,
        cp=args.cp,
        order=args.order,
        gpus_per_host=args.gpus_per_host,
    )
    if args.json:
        print(json.dumps(layout_document(layout)))
    else:
        print(describe(layout))
    return 0


def layout_document(layout: ParallelLayout) -> dict:
    """The ``--json`` object: the layout's sizes, then ``groups`` and ``ranks``."""
    coordinates = layout.coordinate_array().tolist()
    ranks = []
    for rank, coords in enumerate(coordinates):
        entry = {
            "rank": rank,
            "host": host_name(rank // layout.gpus_per_host),
            "gpu": rank % layout.gpus_per_host,
        }
        entry.update(zip(DIMENSIONS, coords))
        ranks.append(entry)
    return {
        **layout.to_dict(),
        "groups": [group.to_dict() for group in layout.groups()],
        "ranks": ranks,
    }


def describe(layout: ParallelLayout) -> str:
    """Human-readable summary: the sizes, then a line per group kind with its first groups."""
    sizes = " × ".join(f"{name} {getattr(layout, name)}" for name in DIMENSIONS)
    hosts = layout.n_hosts
    placement = (
        f"{hosts} host{'s' if hosts != 1 else ''} of {layout.gpus_per_host} GPUs "
        f"({host_name(0)} .. {host_name(hosts - 1)})"
    )
    partial = layout.world % layout.gpus_per_host
    if partial and hosts > 1:
        placement += f", the last with {partial}"
    lines = [f"world {layout.world} = {sizes}, order {layout.order}", placement]
    kinds = layout.kinds
    if not kinds:
        lines.append("no groups: every dimension has size 1")
    width = max((len(kind) for kind in kinds), default=0)
    for kind in kinds:
        table = layout.group_array(kind)
        shown = " ".join(_brackets(row) for row in table[:_SHOWN].tolist())
        more = " ..." if len(table) > _SHOWN else ""
        count = len(table)
        lines.append(
            f"{kind:<{width}}  {count} group{'s' if count != 1 else ''} of {table.shape[1]}: {shown}{more}"
        )
    return "\n".join(lines)


def _brackets(ranks: list[int], *, limit: int = 8) -> str:
    if len(ranks) > limit:
        head = ", ".join(str(rank) for rank in ranks[: limit // 2])
        return f"[{head}, ..., {ranks[-1]}]"
    return "[" + ", ".join(str(rank) for rank in ranks) + "]"
