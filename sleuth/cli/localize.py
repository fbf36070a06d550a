"""``sleuth localize``: detection and localization on records in Parquet files, offline.

``sleuth localize --records FILE_OR_DIR [--job job.json] [--topology FILE] [--json]``

Besides the δ-irregular iterations, the job's what-if attribution (``sleuth.whatif``: the records
hold every rank) opens an incident for every sustained slowdown (``--slowdown``, ``--sustain``;
defaults from ``SLEUTH_ATTRIBUTION_SLOWDOWN`` / ``SLEUTH_ATTRIBUTION_SUSTAIN``) and records a lone
benign hiccup without reporting it; ``--no-attribution`` leaves the δ rule alone.

Records folders of both producers are read: the logger's local mode (``rank-*.parquet`` plus
``iterations/``) and the emulator's output (``records.parquet``, ``iterations.parquet``). The job
spec is the folder's ``job.json`` unless ``--job`` names one. Without ``--topology`` every host
the spec names is one host of GPUs (one NIC each) behind a single leaf.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sleuth.cli.arguments import above_one, non_negative_int, positive_int
from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.recordio import FileRead
from sleuth.records import IterationBatch, RecordBatch
from sleuth.records_folder import read_records
from sleuth.settings import Settings
from sleuth.topology import load_topology
from sleuth.topology.job_fabric import single_leaf

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sleuth.localizer.incident import Incident, Suspect
    from sleuth.progress import Steps
    from sleuth.whatif.clocks import ClockOffsets


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("localize", help="find the device behind irregular iterations in Parquet records")
    parser.add_argument("--records", required=True, metavar="FILE_OR_DIR", help="records folder (logger or emulator) or file")
    parser.add_argument("--job", metavar="JOB_JSON", help="job spec (default: job.json in the records folder)")
    parser.add_argument("--topology", metavar="FILE", help="topology YAML (default: one leaf over the spec's hosts)")
    parser.add_argument("--json", action="store_true", help="print the incidents as a JSON list")
    parser.add_argument("--top-k", type=positive_int("--top-k"), default=2, help="suspects per incident (default 2)")
    parser.add_argument("--window", type=positive_int("--window"), default=100, help="iterations T of the cross-iteration analysis (default 100)")
    parser.add_argument("--pivot", type=int, action="append", metavar="RANK", help="rank the search starts from (repeatable; default 0)")
    parser.add_argument("--routing", choices=("ecmp", "static"), default="ecmp",
                        help="spine routing: ecmp (unknown hashing: equal-cost spines share evidence, the default) "
                             "or static (one known route per GPU pair, e.g. an InfiniBand subnet manager's; the emulator's)")
    add_attribution_options(parser)
    parser.add_argument("--no-attribution", action="store_true",
                        help="incidents from δ-irregular iterations only (no what-if attribution)")
    parser.set_defaults(handler=_run)


def add_attribution_options(parser: argparse.ArgumentParser) -> None:
    # The environment is read when the command runs (resolve_attribution_options), so that a bad
    # variable is reported as the command's error, not raised while the parser is being built.
    declared = Settings()  # the declared defaults, not the environment
    parser.add_argument("--slowdown", type=above_one("--slowdown"), default=None,
                        help=f"what-if slowdown S that opens an incident "
                             f"(default SLEUTH_ATTRIBUTION_SLOWDOWN, else {declared.attribution_slowdown})")
    parser.add_argument("--sustain", type=positive_int("--sustain"), default=None,
                        help=f"consecutive iterations at that S that open it "
                             f"(default SLEUTH_ATTRIBUTION_SUSTAIN, else {declared.attribution_sustain})")
    parser.add_argument("--warmup", type=non_negative_int("--warmup"), default=None,
                        help=f"first iterations (numbered from 0) the localizer leaves out, attributing and searching "
                             f"(default SLEUTH_ATTRIBUTION_WARMUP, else {declared.attribution_warmup})")


def resolve_attribution_options(args: argparse.Namespace) -> None:
    """``--slowdown``, ``--sustain`` and ``--warmup`` not given take their settings' values."""
    if args.slowdown is None or args.sustain is None or args.warmup is None:
        settings = Settings.from_env()
        if args.slowdown is None:
            args.slowdown = settings.attribution_slowdown
        if args.sustain is None:
            args.sustain = settings.attribution_sustain
        if args.warmup is None:
            args.warmup = settings.attribution_warmup


def read_job(args: argparse.Namespace, *, on_file: FileRead | None = None) -> tuple[JobSpec, RecordBatch, IterationBatch]:
    """The job spec and records that ``--records`` and ``--job`` name (``on_file``: hears of each file read)."""
    path = Path(args.records)
    if not path.exists():
        raise ConfigError(f"--records {path}: no such file or folder")
    records, iterations = read_records(path, on_file=on_file)
    spec_path = Path(args.job) if args.job else (path if path.is_dir() else path.parent)
    return JobSpec.read(spec_path), records, iterations


def say_warmup(read_from: int, args: argparse.Namespace) -> None:
    """Tell stderr where the records hold too few iterations past the warm-up for it to be left out."""
    if read_from < args.warmup:
        print(f"sleuth: the records hold fewer than {args.sustain} iterations past the warm-up (iterations before "
              f"{args.warmup}, --warmup); read from iteration {read_from}", file=sys.stderr)


#: Hosts whose clocks stderr names one by one at most; a GPU fabric's NCCL collectives end within
#: microseconds, so NTP's milliseconds move every host of a large job.
_HOSTS_NAMED = 5


def say_clocks(offsets: ClockOffsets) -> None:
    """Tell stderr of the hosts whose ranks' times were moved onto their peers' clock
    (``sleuth.whatif.clocks``): the ``_HOSTS_NAMED`` furthest off by name, how many others and how far."""
    furthest = sorted(offsets.hosts_ns, key=lambda host: -abs(offsets.hosts_ns[host]))
    for host in sorted(furthest[:_HOSTS_NAMED]):
        offset, ranks = offsets.hosts_ns[host], offsets.host_ranks[host]
        named = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
        wander = offsets.wander_ns.get(host, 0)
        moving = f", moving by {wander / 1e6:.3f} ms over the job" if wander > offsets.spread_ns else ""
        print(f"sleuth: host {host}'s clock runs {offset / 1e9:+.6f} s from its peers'{moving} (its ranks' collectives "
              f"end that far from theirs, which end within {offsets.spread_ns / 1e6:.3f} ms of each other); the times "
              f"of its {named} are read on their clock", file=sys.stderr)
    if len(furthest) > _HOSTS_NAMED:
        rest = [abs(offsets.hosts_ns[host]) for host in furthest[_HOSTS_NAMED:]]
        print(f"sleuth: {len(rest)} more hosts' clocks run up to {max(rest) / 1e9:.6f} s from their peers'; their "
              "ranks' times are read on one clock", file=sys.stderr)


def say_numbered(numbered: int) -> None:
    """Tell stderr how many records without an iteration took their groups' (``sleuth.whatif.steps``)."""
    if numbered:
        print(f"sleuth: {numbered} records carried no iteration (a rank whose steps nothing marked and whose "
              "operators showed no period); each took the iteration of the group it ran in", file=sys.stderr)


def say_unresolved(unresolved: Sequence[Incident], resolution_ns: int) -> None:
    """Tell stderr which incidents went unreported for costing less per iteration than the records resolve."""
    for incident in unresolved:
        paid_ms = (incident.impact.actual_ns - incident.impact.baseline_ns) / 1e6
        print(f"sleuth localize: not reported: iterations {incident.iterations[0]}-{incident.iterations[-1]} "
              f"({incident.cause.value}, x{incident.impact.slowdown:.3f}) cost {paid_ms:.1f} ms an iteration, less "
              f"than the records' times resolve ({resolution_ns / 1e6:g} ms: imported from discovery times, as a "
              "Flight Recorder dump without duration_ms has; set TORCH_NCCL_ENABLE_TIMING=1)", file=sys.stderr)


def say_filled(filled: int, read: int) -> None:
    """Tell stderr how many lost members of the ``read`` records' groups were filled in (``sleuth.whatif.lost``)."""
    if filled:
        print(f"sleuth: {filled} records were missing from their groups (a collective without one of its ranks, a "
              f"send without its receive; {filled / max(read, 1):.2%} as many as were read); each was filled "
              "in from its group: its end the group's, its start the last member's present", file=sys.stderr)


def _name_files_on(steps: Steps, root: Path) -> FileRead:
    """Names each file read on the bar's reading step: a logger folder holds a file per rank and
    flush, thousands on a large job, and reading them is the wait before any figure."""

    def named(file: Path, done: int, total: int) -> None:
        if total > 1:  # one file is read at once; many are worth counting
            shown = file.relative_to(root) if file.is_relative_to(root) else file.name
            steps.describe(f"localize: reading records, {done} of {total} files ({shown})")

    return named


def _run(args: argparse.Namespace) -> int:
    from sleuth.localizer.offline import localize_records  # numpy-heavy modules: only when used
    from sleuth.progress import progress

    resolve_attribution_options(args)
    # Steps of a large folder's run: read, detect, attribute (unless --no-attribution), localize.
    with progress("localize: reading records", total=3 if args.no_attribution else 4) as steps:
        spec, records, iterations = read_job(args, on_file=_name_files_on(steps, Path(args.records)))
        topology = load_topology(args.topology) if args.topology else single_leaf(spec)
        result = localize_records(
            spec, records, iterations, topology=topology, routing=args.routing, attribution=not args.no_attribution,
            warmup=args.warmup, slowdown=args.slowdown, sustain=args.sustain, top_k=args.top_k, window=args.window,
            pivots=tuple(args.pivot or (0,)), on_stage=lambda what: steps.advance(description=what),
        )
        steps.advance()
    say_clocks(result.clocks)
    say_numbered(result.numbered)
    say_filled(result.filled, len(records))
    say_warmup(result.read_from, args)
    if result.skipped is not None:
        print(f"sleuth localize: what-if attribution skipped: {result.skipped}", file=sys.stderr)
    say_unresolved(result.unresolved, spec.time_resolution_ns)
    irregular, attribution, incidents = result.irregular, result.attribution, result.incidents
    if args.json:
        json.dump([incident.to_dict() for incident in incidents], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"job {spec.job}: {len(irregular)} irregular iterations, {len(incidents)} incidents")
    if attribution is not None:
        print(f"what-if: slowdown x{attribution.slowdown:.3f}, {attribution.gpu_hours_lost:.4f} GPU-hours lost "
              "(sleuth attribute for the whole attribution)")
    for incident in incidents:
        impact = incident.impact
        print(
            f"\n{incident.incident}: {incident.cause} in iterations {list(incident.iterations)}; "
            f"slowdown x{impact.slowdown:.2f}, {impact.gpu_hours_lost:.4f} GPU-hours lost; "
            f"{incident.ranks_fetched} of {incident.world} ranks fetched"
        )
        _print_suspects(incident.suspects)
        if incident.attribution is not None:
            found = incident.attribution
            ranks = ", ".join(f"{r} x{v:.3f}" for r, v in found.top_ranks[:4]) or "none"
            types = ", ".join(f"{t} x{v:.3f}" for t, v in found.top_types) or "none"
            print(f"  opened by: {found.trigger}; top ranks: {ranks}; top types: {types}")
        if incident.advice:
            print(f"  advice: {incident.advice}")
    return 0


#: Devices of a tied set (``scoring.tied_runs``) printed before "and N more": a ring of 256 NICs is one finding.
_TIED_SHOWN = 4


def _print_suspects(suspects: tuple[Suspect, ...]) -> None:
    """One line a suspect; of a set the records cannot tell apart, the first ``_TIED_SHOWN`` and how many more."""
    from sleuth.localizer.scoring import tied_runs

    hidden = {device: len(run) - _TIED_SHOWN for run in tied_runs([(s.device, s.score) for s in suspects])
              for device in run[_TIED_SHOWN:]}
    said = False
    for position, suspect in enumerate(suspects, start=1):
        if suspect.device not in hidden:
            print(f"  {position}. {suspect.device:<40} {suspect.kind:<8} score {suspect.score:.3f}")
            said = False
        elif not said:
            print(f"     ... and {hidden[suspect.device]} more tied with them (the advice says why)")
            said = True
