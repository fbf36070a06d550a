"""The ``Collector`` gRPC service that training jobs stream into (``sleuth gateway``).

The servicer is thin: authenticate (``auth``), validate (``validate``), publish (``publisher``),
count; errors become gRPC statuses in ``grpc_status`` only. A stream's summary is sent only once
Kafka acknowledged every batch of it, so an OK answer means the records are durable; a client that
gets UNAVAILABLE resends, and the ReplacingMergeTree tables make the replay harmless.

A batch that fails validation ends its stream with INVALID_ARGUMENT naming the field (the trailing
metadata ``sleuth-accepted`` says how many batches before it Kafka acknowledged: the client
forgets those, drops the refused one and resends the rest), is counted and dead-lettered to
``sleuth.rejects``; every other stream carries on.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures as _futures
from dataclasses import dataclass, field
from typing import Any

import grpc

import sleuth
from sleuth import metrics
from sleuth.errors import AuthError, BatchRejected, ConfigError
from sleuth.jobspec import JobSpec
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.records import RecordBatch
from sleuth.settings import Settings
from sleuth.stream.ingest import acks, auth, kafka_records, validate
from sleuth.stream.ingest.grpc_status import status_from_errors, trailing
from sleuth.stream.ingest.job_registry import JobRegistry, Registration, load_registered
from sleuth.stream.ingest.loop_thread import LoopThread
from sleuth.stream.ingest.publisher import Publisher

_log = logging.getLogger(__name__)

# How long a call may wait for the servicer to take it (gRPC's default: 30 s); the streams bound holds memory.
_UNREQUESTED_S = 600
# Futures of a long-lived stream are pruned once this many pile up, so memory stays bounded.
_PRUNE_EVERY = 1024


@dataclass
class Counters:
    """What the gateway has seen since it started; thread-safe through ``lock``."""

    accepted_batches: int = 0
    accepted_records: int = 0
    rejected: collections.Counter = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def accept(self, records: int, *, kind: str = "records") -> None:
        with self.lock:
            self.accepted_batches += 1
            self.accepted_records += records
        metrics.RECORDS_IN.labels(kind=kind).inc(records)

    def reject(self, reason: str) -> None:
        # Counted by the reason's first clause (the field), not its per-batch details.
        field_at_fault = reason.split(":", 1)[0]
        with self.lock:
            self.rejected[field_at_fault] += 1
        metrics.RECORDS_REJECTED.labels(reason=field_at_fault).inc()


def _count_dropped(batch: RecordBatch, dropped: int) -> None:
    """A logger reports the records it lost in the batch after the gap; a logger sends one job's records.
    (Counted when the batch arrives: a stream the logger must resend counts its drops again here,
    while ``logger_drops`` in ClickHouse folds the resend.)"""
    jobs = validate.batch_jobs(batch)
    metrics.LOGGER_DROPPED.labels(training_job=jobs[0] if len(jobs) == 1 else "+".join(jobs)).inc(dropped)


class Collector(pb_grpc.CollectorServicer):
    """The servicer, on gRPC's asyncio server: a stream waiting for its next message or for Kafka
    holds no thread, so thousands of ranks stream at once. The blocking work of a message (parse,
    validate, hand to kafka-python, which may wait for the in-flight budget) runs on ``threads``
    threads, so the event loop never blocks on Kafka; a stream awaiting that work reads no further,
    and HTTP/2 flow control holds its logger back."""

    def __init__(
        self, publisher: Publisher, *, tokens: auth.TokenBook | None, limits: validate.Limits,
        registered: Iterable[JobSpec | Registration] = (), job_idle_s: float = Settings().job_idle_s,
        clock: Callable[[], float] = time.monotonic, threads: int = Settings().gateway_threads,
    ) -> None:
        self.publisher = publisher
        self.tokens = tokens
        self.limits = limits
        self.jobs = JobRegistry(registered, idle_s=job_idle_s, clock=clock)
        self.counters = Counters()
        self.ack_timeout_s = publisher.wait_timeout_s
        self._pool = _futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="collector")

    async def _blocking(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(function, *args, **kwargs))

    def close(self) -> None:
        """Stop the threads (after the server stopped) and flush what Kafka still holds."""
        self._pool.shutdown(wait=True)
        self.publisher.close()

    def _caller(self, context: grpc.aio.ServicerContext) -> str | None:
        if self.tokens is None:
            return None
        try:
            return self.tokens.job_of(context.invocation_metadata() or ())
        except AuthError as error:
            self.counters.reject(str(error))
            raise

    def _take(self, raw: bytes | pb.StreamMessage, caller: str | None) -> tuple[list[Any], int, str]:
        """One message, on a pool thread: its Kafka futures, records and kind, or the refusal."""
        message = _parse(raw)
        batch = validate.check_message(message, limits=self.limits, registered=self.jobs)
        jobs = validate.batch_jobs(batch)
        auth.check_jobs(caller, jobs)
        self.jobs.seen(jobs)
        if not isinstance(batch, RecordBatch):
            return self.publisher.iterations(batch, layout_of=self.jobs.layout_of), len(batch), "iterations"
        futures = self.publisher.records(batch, layout_of=self.jobs.layout_of)
        if message.records.dropped:
            _count_dropped(batch, message.records.dropped)
            # Confirmed, like the records, only once Kafka has it.
            futures += self.publisher.drop(kafka_records.drop_of(batch, message.records.dropped))
        return futures, len(batch), "records"

    async def Stream(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> pb.StreamSummary:
        accepted = 0
        async with status_from_errors(context):
            caller = self._caller(context)
            pending: list[Any] = []
            index = 0
            async for raw in request_iterator:
                try:
                    futures, records, kind = await self._blocking(self._take, raw, caller)
                except (BatchRejected, AuthError) as error:
                    reason = f"batch {index}: {error}"
                    self.counters.reject(str(error))
                    await self._blocking(self.publisher.reject, reason=reason, payload=_raw(raw), job=caller or "")
                    # The client forgets the batches before this one and drops this one: confirm
                    # them only once Kafka has them (a failed wait is UNAVAILABLE: all are resent).
                    await acks.acknowledged(pending, timeout_s=self.ack_timeout_s)
                    trailing(context, accepted=accepted)
                    raise type(error)(reason) from None
                pending += futures
                accepted += 1
                index += 1
                self.counters.accept(records, kind=kind)
                if len(pending) >= _PRUNE_EVERY:
                    pending = _wait_done(self.publisher, pending)
            await acks.acknowledged(pending, timeout_s=self.ack_timeout_s)
            return pb.StreamSummary(accepted=accepted, rejected=0)

    async def RegisterJob(self, request: pb.JobSpec, context: grpc.aio.ServicerContext) -> pb.RegisterJobReply:
        async with status_from_errors(context):
            caller = self._caller(context)
            try:
                # A 16k-rank spec takes a fifth of a second to read: off the loop.
                spec = await self._blocking(codec.jobspec_from_proto, request)
            except ConfigError as error:
                raise BatchRejected(f"JobSpec: {error}") from None
            auth.check_jobs(caller, [spec.job])
            validate.check_rendezvous(request.rendezvous, self.limits, where="JobSpec")
            spec = await self._blocking(self.jobs.named, spec, request.rendezvous)
            await acks.acknowledged(await self._blocking(self.publisher.job, spec, request.rendezvous),
                                    timeout_s=self.ack_timeout_s)
            self.jobs.add(spec)
            return pb.RegisterJobReply(job=spec.job, communicators=len(spec.communicators))

    async def Health(self, request: pb.HealthRequest, context: grpc.aio.ServicerContext) -> pb.HealthReply:
        async with status_from_errors(context):
            serving = await self._blocking(self.publisher.connected)  # a TCP connect: up to a second
            status = pb.HealthReply.SERVING if serving else pb.HealthReply.NOT_SERVING
            return pb.HealthReply(status=status, version=sleuth.__version__)


def _wait_done(publisher: Publisher, futures: list[Any]) -> list[Any]:
    """Wait on the futures already done (raises on a failed one: the client must resend); the others.

    Each future is looked at once: with two looks (done ones, then not-done ones) a send that
    finished between them, failed perhaps, would be in neither list and confirmed unchecked.
    """
    done: list[Any] = []
    left: list[Any] = []
    for future in futures:
        (done if future.is_done else left).append(future)
    publisher.wait(done)
    return left


def _parse(raw: bytes | pb.StreamMessage) -> pb.StreamMessage:
    # The server hands Stream raw bytes (see build_server) so that bytes that are not a
    # StreamMessage are a refused batch like any other, not a gRPC-internal deserialization error.
    if isinstance(raw, pb.StreamMessage):
        return raw
    try:
        return pb.StreamMessage.FromString(raw)
    except Exception as error:  # protobuf's DecodeError and friends
        raise BatchRejected(f"StreamMessage: not a valid message ({error})") from None


def _raw(raw: bytes | pb.StreamMessage) -> bytes:
    return raw.SerializeToString() if isinstance(raw, pb.StreamMessage) else raw


def _add_to_server(collector: Collector, server: grpc.aio.Server) -> None:
    """Like the generated ``add_CollectorServicer_to_server``, but Stream gets undecoded bytes."""
    handlers = {
        "Stream": grpc.stream_unary_rpc_method_handler(
            collector.Stream, request_deserializer=None, response_serializer=pb.StreamSummary.SerializeToString
        ),
        "RegisterJob": grpc.unary_unary_rpc_method_handler(
            collector.RegisterJob, request_deserializer=pb.JobSpec.FromString,
            response_serializer=pb.RegisterJobReply.SerializeToString,
        ),
        "Health": grpc.unary_unary_rpc_method_handler(
            collector.Health, request_deserializer=pb.HealthRequest.FromString,
            response_serializer=pb.HealthReply.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sleuth.v1.Collector", handlers),))


def limits_from(settings: Settings) -> validate.Limits:
    return validate.Limits(
        max_records=settings.gateway_max_batch_records,
        max_strings=settings.gateway_max_strings,
        max_string_bytes=settings.gateway_max_string_bytes,
        max_iteration=settings.gateway_max_iteration,
    )


async def build_server(settings: Settings, collector: Collector) -> tuple[grpc.aio.Server, int]:
    """A not yet started asyncio server with ``collector``, made on the running loop; it and its bound port."""
    # Messages up to the largest batch we accept (~100 bytes per record on the wire at worst).
    max_message = min(2**31 - 1, settings.gateway_max_batch_records * 100 + (1 << 20))
    server = grpc.aio.server(
        # Beyond it a stream is refused with RESOURCE_EXHAUSTED (the logger retries): memory stays bounded.
        maximum_concurrent_rpcs=settings.gateway_max_streams,
        options=[
            ("grpc.max_receive_message_length", max_message),
            # gRPC core cancels new calls past 1,000 not yet handed to the servicer (3,000 at most): a
            # 16k-rank job connecting at once would be refused and retried; the streams bound holds memory.
            ("grpc.server.max_pending_requests", settings.gateway_max_streams),
            ("grpc.server.max_pending_requests_hard_limit", settings.gateway_max_streams),
            # Nor cancel those that waited 30 s for it while a burst is served: the logger would resend them.
            ("grpc.server_max_unrequested_time_in_server", _UNREQUESTED_S),
        ],
    )
    _add_to_server(collector, server)
    address = f"{settings.gateway_host}:{settings.gateway_port}"
    if settings.gateway_tls_cert:
        if not settings.gateway_tls_key:
            raise ConfigError("SLEUTH_GATEWAY_TLS_KEY must be set along with SLEUTH_GATEWAY_TLS_CERT")
        with open(settings.gateway_tls_cert, "rb") as cert, open(settings.gateway_tls_key, "rb") as key:
            credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    if not port:
        raise ConfigError(f"SLEUTH_GATEWAY_PORT: cannot listen on {address}")
    return server, port


class Server:
    """The asyncio server on its own loop thread, started and stopped from synchronous code."""

    def __init__(self, settings: Settings, collector: Collector) -> None:
        self._loop = LoopThread("gateway-loop")
        self._collector = collector
        try:
            self._server, self.port = self._loop.run(build_server(settings, collector))
        except BaseException:
            self._loop.close()
            raise

    def start(self) -> None:
        self._loop.run(self._server.start())

    def stop(self, grace: float) -> None:
        """Let running streams finish for ``grace`` seconds, then flush what Kafka still holds."""
        self._loop.run(self._server.stop(grace))
        self._loop.close()
        self._collector.close()


def create(settings: Settings) -> tuple[Server, int, Collector]:
    """The gateway for ``settings``: server, bound port and servicer (tokens read, producer made)."""
    tokens = auth.TokenBook.read(settings.gateway_tokens_file) if settings.gateway_tokens_file else None
    collector = Collector(Publisher(settings), tokens=tokens, limits=limits_from(settings),
                          registered=load_registered(settings), job_idle_s=settings.job_idle_s,
                          threads=settings.gateway_threads)
    if len(collector.jobs):
        _log.info("%d jobs registered earlier, from %s", len(collector.jobs), settings.jobs_topic)
    server = Server(settings, collector)
    return server, server.port, collector
