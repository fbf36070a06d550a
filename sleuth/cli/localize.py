"""``sleuth localize``: detection and localization on records in Parquet files, offline.

``sleuth localize --records FILE_OR_DIR [--job job.json] [--topology FILE] [--json]``

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

import numpy as np

from sleuth.cli.arguments import positive_int
from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.recordio import read_parquet
from sleuth.records import IterationBatch, RecordBatch
from sleuth.sources import MemorySource
from sleuth.topology import Topology, load_topology


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("localize", help="find the device behind irregular iterations in Parquet records")
    parser.add_argument("--records", required=True, metavar="FILE_OR_DIR", help="records folder (logger or emulator) or file")
    parser.add_argument("--job", metavar="JOB_JSON", help="job spec (default: job.json in the records folder)")
    parser.add_argument("--topology", metavar="FILE", help="topology YAML (default: one leaf over the spec's hosts)")
    parser.add_argument("--json", action="store_true", help="print the incidents as a JSON list")
    parser.add_argument("--top-k", type=positive_int("--top-k"), default=2, help="suspects per incident (default 2)")
    parser.add_argument("--window", type=positive_int("--window"), default=100, help="iterations T of the cross-iteration analysis (default 100)")
    parser.add_argument("--pivot", type=int, action="append", metavar="RANK", help="rank the search starts from (repeatable; default 0)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth.localizer import localize  # the localizer pulls numpy-heavy modules: only when used
    from sleuth.stream.detection import irregular_iterations

    path = Path(args.records)
    if not path.exists():
        raise ConfigError(f"--records {path}: no such file or folder")
    records, iterations = read_records(path)
    spec_path = Path(args.job) if args.job else (path if path.is_dir() else path.parent)
    spec = JobSpec.read(spec_path)
    topology = load_topology(args.topology) if args.topology else single_leaf(spec)
    source = MemorySource(spec, records, iterations)
    irregular = irregular_iterations(iterations)
    incidents = localize(
        source, irregular_iterations=irregular, topology=topology, top_k=args.top_k, window=args.window,
        pivots=tuple(args.pivot or (0,)),
    )
    if args.json:
        json.dump([incident.to_dict() for incident in incidents], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"job {spec.job}: {len(irregular)} irregular iterations, {len(incidents)} incidents")
    for incident in incidents:
        impact = incident.impact
        print(
            f"\n{incident.incident}: {incident.cause} in iterations {list(incident.iterations)}; "
            f"slowdown x{impact.slowdown:.2f}, {impact.gpu_hours_lost:.4f} GPU-hours lost; "
            f"{incident.ranks_fetched} of {incident.world} ranks fetched"
        )
        for position, suspect in enumerate(incident.suspects, start=1):
            print(f"  {position}. {suspect.device:<40} {suspect.kind:<8} score {suspect.score:.3f}")
        if incident.advice:
            print(f"  advice: {incident.advice}")
    return 0


def read_records(path: Path) -> tuple[RecordBatch, IterationBatch]:
    """Records and iteration records of a logger or emulator folder, or of one records file."""
    if path.is_file():
        records = read_parquet(path)
        return records, iterations_from_records(records)
    if (path / "records.parquet").exists():  # the emulator's folder
        records = read_parquet(path / "records.parquet")
        its = path / "iterations.parquet"
    else:  # the logger's local mode
        records = read_parquet(path)
        its = path / "iterations"
    iterations = read_parquet(its, IterationBatch) if its.exists() else iterations_from_records(records)
    return records, iterations


def iterations_from_records(records: RecordBatch) -> IterationBatch:
    """Iteration records derived from CommOps records (first start, last end per rank and step)."""
    keep = records["iteration"] >= 0
    rank, it = records["rank"][keep].astype(np.int64), records["iteration"][keep]
    pairs, inverse = np.unique(np.stack((rank, it), axis=1), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    start = np.full(len(pairs), np.iinfo(np.int64).max)
    end = np.full(len(pairs), np.iinfo(np.int64).min)
    np.minimum.at(start, inverse, records["t_start_ns"][keep])
    np.maximum.at(end, inverse, records["t_end_ns"][keep])
    job = records.decoded("job")[0] if len(records) else "job"
    return IterationBatch.from_columns(job=job, rank=pairs[:, 0], iteration=pairs[:, 1], t_start_ns=start, t_end_ns=end)


def single_leaf(spec: JobSpec) -> Topology:
    """Each host of the spec with as many GPUs (and NICs) as its highest GPU index + 1, one leaf."""
    gpus: dict[str, int] = {}
    for placement in spec.placements:
        gpus[placement.host] = max(gpus.get(placement.host, 0), placement.gpu + 1)
    hosts = sorted(gpus)
    counts = np.array([gpus[h] for h in hosts], dtype=np.int64)
    n_nics = int(counts.sum())
    return Topology(
        hosts=tuple(hosts),
        host_gpus=counts,
        host_nics=counts,
        gpu_nic_local=np.concatenate([np.arange(c) for c in counts]),
        leaves=("l0",),
        spines=(),
        nic_leaf=np.stack((np.arange(n_nics), np.zeros(n_nics, dtype=np.int64)), axis=1),
        leaf_spine=np.empty((0, 2), dtype=np.int64),
    )
