"""Many ranks' logger streams from one process: one client-streaming call per rank on asyncio gRPC.

What thousands of loggers do to a gateway, without thousands of processes: every rank opens its
``Stream`` at the same moment, sends ``batches`` small record batches spread over ``stream_s``
(a logger keeps its stream open that long, ``sleuth.logger.sender``), and waits for the summary.
A retryable refusal (RESOURCE_EXHAUSTED when the gateway serves its most streams at once,
UNAVAILABLE ...) is retried after an exponential backoff, as the logger does; any other is a failure.

``run_processes`` spreads the ranks over a few spawned processes (one event loop each) that start
together, and returns each rank's figures.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import resource
import time
from dataclasses import dataclass

import grpc

from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import RecordBatch
from sleuth.stream.ingest.grpc_status import retryable

_STREAM = "/sleuth.v1.Collector/Stream"


@dataclass(frozen=True)
class Load:
    """What each rank sends: ``batches`` batches of ``records`` records over ``stream_s`` seconds."""

    target: str
    job: str
    comm: str
    batches: int = 1
    records: int = 4
    stream_s: float = 0.0
    channels: int = 64
    backoff_s: tuple[float, float] = (0.1, 5.0)
    give_up_s: float = 600.0


def rank_messages(load: Load, rank: int) -> list[bytes]:
    """The serialized batches of ``rank``: valid records of ``load.job`` (seq numbers unique per rank)."""
    out = []
    for b in range(load.batches):
        n = load.records
        seq = [b * n + i for i in range(n)]
        start = [1_000_000 * (s + 1) for s in seq]
        batch = RecordBatch.from_columns(job=load.job, rank=[rank] * n, comm=load.comm, seq=seq, op=[1] * n,
                                         peer=[-1] * n, nbytes=[1 << 20] * n, iteration=[b] * n,
                                         t_issue_ns=start, t_start_ns=start, t_end_ns=[s + 50_000 for s in start])
        out.append(pb.StreamMessage(records=codec.records_to_proto(batch)).SerializeToString())
    return out


@dataclass
class RankResult:
    rank: int
    confirmed_after_s: float | None  # since the common start; None: never confirmed
    stream_s: float | None  # the successful attempt's open-to-summary time
    attempts: int
    error: str = ""
    retried: str = ""  # the code of the last refusal retried, if any


def _worth_retrying(error: grpc.aio.AioRpcError) -> bool:
    # gRPC's asyncio client reports a call the server refused while a message was being written
    # (RESOURCE_EXHAUSTED at the streams bound) as this INTERNAL, hiding the server's own status;
    # the logger's synchronous client sees the refusal itself and retries it.
    masked = error.code() == grpc.StatusCode.INTERNAL and error.details() == "Internal error from Core"
    return masked or retryable(error)


async def _one_rank(load: Load, rank: int, messages: list[bytes], call, t0: float) -> RankResult:
    gap = load.stream_s / load.batches if load.batches else 0.0
    attempts, backoff, retried = 0, load.backoff_s[0], ""

    async def requests():
        # Batch i goes at i * gap, and the stream closes at stream_s, as the logger's does.
        for data in messages:
            yield data
            await asyncio.sleep(gap)

    while time.monotonic() - t0 < load.give_up_s:
        attempts += 1
        began = time.monotonic()
        try:
            summary = await call(requests(), timeout=load.stream_s + 120)
        except grpc.aio.AioRpcError as error:
            if not _worth_retrying(error):
                return RankResult(rank, None, None, attempts, f"{error.code().name}: {error.details()}")
            retried = f"{error.code().name}: {error.details()}"[:200]
            # Jittered, so that refused ranks do not come back in one wave.
            await asyncio.sleep(backoff * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, load.backoff_s[1])
            continue
        now = time.monotonic()
        if summary.accepted != len(messages):
            return RankResult(rank, None, None, attempts, f"accepted {summary.accepted} of {len(messages)}")
        return RankResult(rank, now - t0, now - began, attempts, retried=retried)
    return RankResult(rank, None, None, attempts, "gave up", retried)


async def drive(load: Load, ranks: list[int], *, start=None) -> list[RankResult]:
    """Every rank of ``ranks`` streams at once over ``load.channels`` channels; their results.
    ``start`` (optional): awaited once all is built and connected; the wall-clock time to start at."""
    messages = {rank: rank_messages(load, rank) for rank in ranks}
    channels = [grpc.aio.insecure_channel(load.target) for _ in range(min(load.channels, len(ranks)) or 1)]
    try:
        await asyncio.gather(*(channel.channel_ready() for channel in channels))
        calls = [channel.stream_unary(_STREAM, request_serializer=None,
                                      response_deserializer=pb.StreamSummary.FromString) for channel in channels]
        if start is not None:  # every process starts its ranks at the same wall-clock moment
            await asyncio.sleep(max(0.0, await start() - time.time()))
        t0 = time.monotonic()
        return list(await asyncio.gather(*(
            _one_rank(load, rank, messages[rank], calls[i % len(calls)], t0) for i, rank in enumerate(ranks))))
    finally:
        await asyncio.gather(*(channel.close() for channel in channels))


def _process(load: Load, ranks: list[int], ready, go, results) -> None:
    async def start() -> float:
        # Built and connected before the common start, so that only streaming is timed.
        ready.set()
        return await asyncio.get_running_loop().run_in_executor(None, go.get)

    async def main():
        return await drive(load, ranks, start=start)

    ranks = [r.__dict__ for r in asyncio.run(main())]
    results.put((ranks, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))


def run_processes(load: Load, world: int, processes: int) -> tuple[list[RankResult], list[int]]:
    """Ranks 0 .. world-1 spread over ``processes`` spawned processes that start together: each
    rank's result and each process's peak RSS (KiB)."""
    context = multiprocessing.get_context("spawn")  # gRPC does not survive fork
    results = context.Queue()
    shares = [list(range(p, world, processes)) for p in range(processes)]
    readies, gos, workers = [], [], []
    for share in shares:
        ready, go = context.Event(), context.Queue()
        worker = context.Process(target=_process, args=(load, share, ready, go, results), daemon=True)
        worker.start()
        readies.append(ready)
        gos.append(go)
        workers.append(worker)
    for ready in readies:
        ready.wait(300)
    start_at = time.time() + 0.5
    for go in gos:
        go.put(start_at)
    out: list[RankResult] = []
    rss_kb: list[int] = []
    for _ in workers:
        ranks, rss = results.get(timeout=load.give_up_s + 300)
        out += [RankResult(**r) for r in ranks]
        rss_kb.append(rss)
    for worker in workers:
        worker.join(30)
    return out, rss_kb
