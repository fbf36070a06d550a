"""The job spec's gathering through the torch.distributed store at 16,384 ranks (tp8 pp8 dp256):
the size of one rank's entry and the store reads of rank 0, with the change log and member runs
(``logger/groups.py``) against the same-run baseline of the scheme before issue 32 (every member
list in full, and rank 0 reading every rank's entry whenever any rank published), and the size of
the merged spec on the wire (``RegisterJob`` and the jobs topic, against Kafka's 1 MiB cap).

A dictionary store (``tests/logger/store.py``) counts the reads; the ranks' pumps (``Pump._share_groups``) run round after
round as their flush timers would: first every rank with its world, tp, pp and dp groups, then
one new group over 8 ranks (a tensor-parallel sub-group created late).

    .venv/bin/python benchmarks/bench_spec_registration.py --world 16384
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from google.protobuf import json_format

from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.logger.groups import GroupInfo, comm_id, rank_entry, version_key
from sleuth.logger.identity import Identity
from sleuth.logger.pump import Pump
from sleuth.progress import progress
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.stream.ingest import kafka_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' counting store
from tests.logger.store import DictStore  # noqa: E402


def _baseline_entry(host: str, gpu: int, groups: list[GroupInfo]) -> bytes:
    # The entry before issue 32: every member list in full.
    return json.dumps({"host": host, "gpu": gpu, "groups": [[g.comm, g.kind, list(g.ranks)] for g in groups]}).encode()


def _baseline_wire(spec: JobSpec) -> bytes:
    # The wire form before issue 32: every placement and member one by one.
    return json_format.ParseDict({k: v for k, v in spec.to_dict().items() if v is not None}, pb.JobSpec()).SerializeToString()


def _baseline_merge_reads(world: int, merges: int) -> int:
    # Before issue 32 rank 0 read every rank's entry at each merge after any rank published.
    return world * merges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=16384)
    args = parser.parse_args()
    world = args.world
    # The bar is drawn only as it advances, between the phases: never while the registration is timed.
    with progress(f"spec registration: {world} ranks' groups and pumps", total=3, redraw_on_timer=False) as steps:
        layout = ParallelLayout(world, 8, 8, world // 64)
        groups_of: list[list[GroupInfo]] = [[GroupInfo(0, "world", "world", tuple(range(world)))] for _ in range(world)]
        for group in layout.groups():
            if group.kind in ("tp", "pp", "dp"):
                for rank in group.ranks:
                    groups_of[rank].append(GroupInfo(len(groups_of[rank]), comm_id(group.ranks), group.kind, tuple(group.ranks)))

        store, sent = DictStore(), []
        sink = SimpleNamespace(spec=sent.append)
        pumps = []
        for rank in range(world):
            session = SimpleNamespace(identity=Identity("job", rank, world, f"h{rank // 8:05d}", rank % 8),
                                      groups=groups_of[rank], groups_version=1)
            pump = Pump(session, lambda identity: sink, store=lambda: store)
            pump.sink = sink
            pumps.append(pump)

        steps.advance(description="spec registration: round 1, every rank publishes (timed)")
        # Round 1: the ranks publish in four waves between two of rank 0's flushes (timers drift apart).
        began = time.perf_counter()
        merges = 0
        for wave in range(4):
            for pump in pumps[1:][wave::4]:
                pump._share_groups(final=False)
            pumps[0]._share_groups(final=False)
            merges += 1
        first_reads, first_bytes = store.reads, store.bytes_read
        first_s = time.perf_counter() - began

        # Round 2: a new group over the 8 ranks of one host appears.
        steps.advance(description="spec registration: round 2, a late group on 8 ranks")
        late = tuple(range(8, 16))
        for rank in late:
            session = pumps[rank].session
            session.groups.append(GroupInfo(len(session.groups), comm_id(late, qualifier="late"), "tp", late))
            session.groups_version += 1
            pumps[rank]._share_groups(final=False)
        pumps[0]._share_groups(final=False)
        merges += 1
        change_reads = store.reads - first_reads
        steps.advance()

    entry = rank_entry("h00000", 0, groups_of[0])
    baseline_entry = _baseline_entry("h00000", 0, groups_of[0])
    spec: JobSpec = sent[-1]
    wire = codec.jobspec_to_proto(spec).SerializeToString()
    _, message = kafka_records.job_message(spec)
    print(json.dumps({
        "world": world, "layout": "tp8 pp8 dp%d" % (world // 64), "communicators": len(spec.communicators),
        "entry_bytes": len(entry), "baseline_entry_bytes": len(baseline_entry),
        "rank0_reads_registration": first_reads, "rank0_bytes_read_registration": first_bytes,
        "baseline_rank0_reads_registration": _baseline_merge_reads(world, 1),
        "baseline_rank0_bytes_read_registration": _baseline_merge_reads(world, 1) * len(baseline_entry),
        "rank0_reads_new_group_on_8_ranks": change_reads,
        "baseline_rank0_reads_new_group_on_8_ranks": _baseline_merge_reads(world, 1),
        "registration_s": round(first_s, 2), "version": int(store.data[version_key("job")]),
        "spec_wire_bytes": len(wire), "baseline_spec_wire_bytes": len(_baseline_wire(spec)), "spec_kafka_message_bytes": len(message), "kafka_cap_bytes": 1 << 20,
    }, indent=1))


if __name__ == "__main__":
    main()
