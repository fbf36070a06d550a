"""Live mode: N emulated loggers streaming an emulation to the gateway over gRPC.

Each logger is one client stream (``Collector.Stream``) on a shared channel, and owns the ranks
``logger, logger + N, ...`` (one rank per logger when N equals the world size, as in a real job).
It sends, per iteration, one ``RecordBatch`` of its ranks' CommOps records and one
``IterationBatch``, then closes the stream and reads the collector's ``StreamSummary``.

Pacing: ``pace=0`` sends as fast as the collector takes them; ``pace=x > 0`` holds each
iteration's batches until ``x`` times its emulated end time has passed since the start (1.0 is
real time, 10.0 ten times faster: ``wall = (t_end - t0) / pace``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import numpy as np

from sleuth.errors import ServiceError
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.proto.codec import iterations_to_proto, jobspec_to_proto, records_to_proto

from sleuth.sim.scenario import Emulation
from sleuth.validation import integer, non_negative_number

__all__ = ["LiveSummary", "stream_live"]


@dataclass(frozen=True)
class LiveSummary:
    """What the loggers sent and what the collector answered (summed over streams)."""

    loggers: int
    records: int
    iteration_records: int
    messages: int
    accepted: int
    rejected: int
    reasons: tuple[str, ...]
    seconds: float


def stream_live(
    emulation: Emulation,
    target: str,
    *,
    loggers: int | None = None,
    pace: float = 0.0,
    register: bool = True,
    timeout_s: float = 600.0,
) -> LiveSummary:
    """Stream ``emulation`` to the collector at ``target`` (``host:port``) from ``loggers`` streams."""
    world = emulation.scenario.layout.world
    loggers = world if loggers is None else loggers
    integer("loggers", loggers, low=1, high=world)
    non_negative_number("pace", pace)
    timeline = emulation.timeline
    t0 = int(timeline.it_start.min())
    ends = timeline.it_end.max(axis=1)
    ids = emulation.iteration_ids()
    counts = {"records": 0, "iterations": 0, "messages": 0}
    lock = threading.Lock()
    started = time.monotonic()

    def messages(ranks: np.ndarray) -> Iterator[pb.StreamMessage]:
        for i, iteration in enumerate(ids):
            if pace > 0:
                due = started + (int(ends[i]) - t0) / 1e9 / pace
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            records = emulation.ranks_records(ranks, iterations=[int(iteration)]).compact()
            its = emulation.iterations(ranks=ranks, iterations=[int(iteration)])
            with lock:
                counts["records"] += len(records)
                counts["iterations"] += len(its)
                counts["messages"] += 2
            yield pb.StreamMessage(records=records_to_proto(records))
            yield pb.StreamMessage(iterations=iterations_to_proto(its))

    summaries: list[pb.StreamSummary] = []
    errors: list[BaseException] = []
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.CollectorStub(channel)
        try:
            if register:
                stub.RegisterJob(jobspec_to_proto(emulation.job_spec()), timeout=timeout_s)

            def logger(index: int) -> None:
                try:
                    ranks = np.arange(index, world, loggers)
                    summary = stub.Stream(messages(ranks), timeout=timeout_s)
                    with lock:
                        summaries.append(summary)
                except BaseException as error:  # noqa: BLE001 - reported below, after joining
                    with lock:
                        errors.append(error)

            threads = [threading.Thread(target=logger, args=(k,), daemon=True) for k in range(loggers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        except grpc.RpcError as error:
            raise ServiceError(f"collector at {target}: {error.code().name}: {error.details()}") from None
    if errors:
        first = errors[0]
        if isinstance(first, grpc.RpcError):
            raise ServiceError(f"collector at {target}: {first.code().name}: {first.details()}") from None
        raise first
    reasons = tuple(sorted({reason for s in summaries for reason in s.reasons}))
    return LiveSummary(
        loggers=loggers,
        records=counts["records"],
        iteration_records=counts["iterations"],
        messages=counts["messages"],
        accepted=sum(s.accepted for s in summaries),
        rejected=sum(s.rejected for s in summaries),
        reasons=reasons,
        seconds=time.monotonic() - started,
    )
