"""Records shaped like a real job's for ``bench_ingest.py``: the emulator's tp/pp/dp job (every rank,
consecutive iterations, the operators and durations its model gives), cut as loggers send it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import IterationBatch, RecordBatch
from sleuth.sim import Emulation
from sleuth.sim.scenario import Scenario
from sleuth.topology import generate


ColumnBatchT = RecordBatch | IterationBatch


@dataclass(frozen=True)
class Batch:
    """One logger batch: the records of ``ranks_per_batch`` ranks in one iteration (``block``)."""

    iteration: int
    block: int
    records: RecordBatch
    iterations: IterationBatch


def layout_for(world: int) -> ParallelLayout:
    """tp 8 within a host, pp 4, the rest data-parallel (Megatron's order)."""
    return ParallelLayout(world, 8, 4, world // 32)


def emulate(world: int, iterations: int, *, seed: int = 1) -> tuple[RecordBatch, IterationBatch]:
    hosts = world // 8
    fabric = generate(f"fattree:hosts={hosts},gpus=8,pod={min(4, hosts)},spines=4")
    emulation = Emulation(Scenario(topology=fabric, layout=layout_for(world), iterations=iterations, seed=seed,
                                   job="bench"))
    return emulation.records(), emulation.iterations()


def batches(records: RecordBatch, iterations: IterationBatch, *, ranks_per_batch: int) -> list[Batch]:
    """Per iteration, per block of consecutive ranks: what those ranks' loggers send, in time order."""
    order = np.lexsort((records["rank"], records["iteration"]))
    records = records.take(order)
    its = iterations.take(np.lexsort((iterations["rank"], iterations["iteration"])))
    key = records["iteration"] * (1 << 32) + records["rank"] // ranks_per_batch
    it_key = its["iteration"] * (1 << 32) + its["rank"] // ranks_per_batch
    out = []
    for k in np.unique(key).tolist():
        lo, hi = np.searchsorted(key, [k, k + 1])
        ilo, ihi = np.searchsorted(it_key, [k, k + 1])
        out.append(Batch(k >> 32, k & 0xFFFFFFFF, records.take(slice(lo, hi)).compact(),
                         its.take(slice(ilo, ihi)).compact()))
    return out


def renamed(batch: ColumnBatchT, job: str) -> ColumnBatchT:
    """``batch`` with every record's job called ``job`` (a fresh job per run of the benchmark)."""
    strings = [job if s == "bench" else s for s in batch.strings]
    return type(batch)(batch.columns, strings)


def wire(batch: Batch, job: str) -> list[bytes]:
    """The ``StreamMessage`` bytes a logger sends for ``batch``: its records, then its iterations."""
    out = [pb.StreamMessage(records=codec.records_to_proto(renamed(batch.records, job))).SerializeToString()]
    if len(batch.iterations):
        out.append(pb.StreamMessage(iterations=codec.iterations_to_proto(renamed(batch.iterations, job)))
                   .SerializeToString())
    return out


def spec(job: str, world: int) -> JobSpec:
    return JobSpec.from_layout(job, layout_for(world))
