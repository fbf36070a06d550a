"""The gRPC sink: batches go to the collector on a long-lived client stream from a thread.

The drainer hands batches over (``records``, ``iterations``, ``spec``); they are serialized at
once and queued, so the memory held is exactly the bytes queued, kept under ``buffer_bytes``:
past it the oldest messages move to a bounded spill file (``sleuth.logger.spill``), and past the
spill's bound the oldest are dropped and counted. The count travels in the ``dropped`` field of
the next record batch sent that has records (the gap record), so loss is visible downstream; a
count no batch carried when the sink closes is kept in the spill folder, and the next sender of
the job and rank reports it (as it reports records an earlier process's crash tore from the spill).

A stream carries messages until ``stream_s`` has passed, then closes and the collector's summary
confirms it; only then are its messages forgotten. What happens to a failed stream's messages
depends on its status code (``sleuth.stream.ingest.grpc_status.RETRYABLE``):

* a code that can clear (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED ...): all
  are sent again on the next stream (at-least-once: a collector that fails after receiving a
  batch and before answering sees it twice);
* a code that answers the same messages the same way each time (INVALID_ARGUMENT,
  UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND ...): the refused message is dropped and its
  records counted in ``dropped`` (and in the gap the next batch reports). A refusal that names no
  message (a token refused for the whole call) drops every message of the stream;
* FAILED_PRECONDITION (the job is not registered yet: rank 0 registers it once every rank has
  shared its groups) is retried for ``unregistered_grace_s``, then dropped like the others; the
  rank that holds the spec sends it again first (a gateway drops a job idle for ``SLEUTH_JOB_IDLE_S``).

Either way the messages the collector confirmed before the refused one (trailing metadata
``sleuth-accepted``, sent once Kafka has them) are forgotten, never resent, and those after it
are sent again. ``on_confirmed`` (optional) is handed each confirmed message, as queued, once:
what a checker compares with the store downstream (``sleuth.sim.chaos``).

Reconnection backs off exponentially. Every failure is logged once with its cause; nothing here
raises into the caller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path
from collections.abc import Callable
from typing import Any

import grpc

from sleuth.jobspec import JobSpec
from sleuth.logger.spill import Item, Spill
from sleuth.proto import commops_pb2 as pb
from sleuth.proto.codec import iterations_to_proto, jobspec_to_proto, records_to_proto
from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.ingest.grpc_status import accepted_of, retryable

log = logging.getLogger("sleuth.logger")

_STREAM = "/sleuth.v1.Collector/Stream"
_REGISTER = "/sleuth.v1.Collector/RegisterJob"
_HEALTH = "/sleuth.v1.Collector/Health"
#: How long records of a job the collector does not know yet are held and resent: rank 0
#: registers the job only once every rank has shared its groups through the torch.distributed
#: store, which at thousands of ranks, or with groups made during the first (compiled) steps, takes minutes.
UNREGISTERED_GRACE_S = 600.0
# Reconnect fast once the collector is back (grpc's default backoff grows to two minutes).
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 30000),
]


class GrpcSink:
    """Streams to ``target`` (``host:port``) from its own daemon thread; spills to ``spill_dir``,
    which must be private from ``spill_root`` (default: ``spill_dir`` itself) down. ``rendezvous``:
    the launcher's round the process runs in (``identity.rendezvous_round``), sent with every
    message, so that the collector keeps the rounds of a job apart."""

    def __init__(
        self,
        target: str,
        *,
        spill_dir: str | Path,
        spill_root: str | Path | None = None,
        buffer_bytes: int = 64 << 20,
        spill_bytes: int = 1 << 30,
        stream_s: float = 5.0,
        backoff_s: tuple[float, float] = (0.1, 5.0),
        connect_timeout_s: float = 2.0,
        token: str = "",
        tls_ca: bytes | None = None,
        unregistered_grace_s: float = UNREGISTERED_GRACE_S,
        on_confirmed: Callable[[list[bytes]], None] | None = None,
        rendezvous: str = "",
    ) -> None:
        self.target = target
        self.rendezvous = rendezvous
        self.on_confirmed = on_confirmed
        # Per-call metadata rather than call credentials: gRPC sends those over TLS only, and a
        # gateway on a trusted network may check tokens without TLS.
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.buffer_bytes = buffer_bytes
        self.stream_s = stream_s
        self.backoff_s = backoff_s
        self.connect_timeout_s = connect_timeout_s
        self.unregistered_grace_s = unregistered_grace_s
        self._unregistered_since: float | None = None  # first FAILED_PRECONDITION since the last success
        self.spill = Spill(spill_dir, root=spill_root, max_bytes=spill_bytes, segment_bytes=max(1, buffer_bytes // 4))
        self._queue: deque[Item] = deque()
        self._window_limit = max(1, buffer_bytes // 4)
        self.held_bytes = 0  # bytes of queued and in-flight messages in memory
        self.peak_bytes = 0
        # Records dropped that no sent batch has reported yet: at first, those an earlier sender's
        # crash tore from the spill.
        self._gap = self.spill.take_dropped()
        self._spec: JobSpec | None = None
        self._spec_sent: JobSpec | None = None
        self.sent_messages = 0
        self.accepted = 0
        self.dropped = 0  # records lost: over the spill's bound, or in a batch the collector refused
        self.refused = 0  # messages the collector refused for good (dropped, their records counted)
        self._cond = threading.Condition()
        self._closing = False
        self._deadline = float("inf")
        self._failing: str | None = None
        self._refusing: grpc.StatusCode | None = None
        if tls_ca is None:
            self._channel = grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=tls_ca)
            self._channel = grpc.secure_channel(target, credentials, options=_CHANNEL_OPTIONS)
        self._stream = self._channel.stream_unary(
            _STREAM, request_serializer=lambda data: data, response_deserializer=pb.StreamSummary.FromString
        )
        self._register = self._channel.unary_unary(
            _REGISTER, request_serializer=pb.JobSpec.SerializeToString,
            response_deserializer=pb.RegisterJobReply.FromString,
        )
        self._health = self._channel.unary_unary(
            _HEALTH, request_serializer=pb.HealthRequest.SerializeToString,
            response_deserializer=pb.HealthReply.FromString,
        )
        self._thread = threading.Thread(target=self._run, name="sleuth-logger-sender", daemon=True)
        self._thread.start()

    # -- the Sink contract (drainer thread) --------------------------------------------------

    def records(self, batch: RecordBatch, *, dropped: int) -> None:
        if not len(batch):
            # A gap with no records rides the next batch that has some: the collector reports a
            # drop by its batch's first record.
            with self._cond:
                self._gap += dropped
            return
        message = pb.StreamMessage(records=records_to_proto(batch, dropped=dropped))
        message.records.rendezvous = self.rendezvous
        self._put((message.SerializeToString(), len(batch)))

    def iterations(self, batch: IterationBatch) -> None:
        message = pb.StreamMessage(iterations=iterations_to_proto(batch))
        message.iterations.rendezvous = self.rendezvous
        self._put((message.SerializeToString(), 0))

    def spec(self, spec: JobSpec) -> None:
        with self._cond:
            self._spec = spec
            self._cond.notify_all()

    def close(self, timeout: float) -> None:
        """Send what is held for at most ``timeout`` seconds; what is left goes to the spill
        file, which the next logger for this job and rank replays."""
        with self._cond:
            self._closing = True
            self._deadline = time.monotonic() + timeout
            self._cond.notify_all()
        self._thread.join(timeout + 1)
        with self._cond:
            if self._queue:  # older than what is on disk: it goes before it, for the next sender
                try:
                    self.spill.prepend(list(self._queue))
                except OSError as error:
                    self._log_once(f"spilling to {self.spill.folder}", error)
                    lost = sum(count for _, count in self._queue)
                    self._gap += lost
                    self.dropped += lost
                self.held_bytes -= sum(len(data) for data, _ in self._queue)
                self._queue.clear()
            if self._gap:  # no batch left to report it in: the next sender of this job and rank will
                try:
                    self.spill.keep_dropped(self._gap)
                except OSError as error:
                    log.warning("sleuth logger: %d records were dropped after the last batch sent, and the count "
                                "could not be kept for the next logger (%r)", self._gap, error)
                else:
                    log.warning("sleuth logger: %d records were dropped after the last batch sent; the next logger "
                                "of this job and rank reports them", self._gap)
                    self._gap = 0
        self._channel.close()

    # -- queue -------------------------------------------------------------------------------

    def _put(self, item: Item) -> None:
        # One order from end to end (the localizer relies on it): memory only ever holds messages
        # older than any on disk, and the disk is one queue, oldest first.
        with self._cond:
            self.held_bytes += len(item[0])
            if self.spill:  # older messages wait on disk: this one joins them at the tail
                self._to_spill(item)
            else:
                self._queue.append(item)
                if self.held_bytes > self.buffer_bytes:
                    while self._queue:  # all of it, so nothing in memory is newer than the disk
                        self._to_spill(self._queue.popleft())
            self.peak_bytes = max(self.peak_bytes, self.held_bytes)
            self._cond.notify_all()

    def _to_spill(self, item: Item) -> None:
        self.held_bytes -= len(item[0])
        try:
            self.spill.append(item)
        except OSError as error:
            self._log_once(f"spilling to {self.spill.folder}", error)
            self._gap += item[1]
            self.dropped += item[1]
        lost = self.spill.take_dropped()
        self._gap += lost
        self.dropped += lost

    def _next(self, wait: float) -> Item | None:
        """The oldest message held (spilled ones first), waiting at most ``wait`` seconds."""
        with self._cond:
            if not self._queue and not self.spill:
                self._cond.wait(wait)
            if self.spill and not self._queue:
                # Replay from disk only once memory is empty, so that replaying a long outage
                # never lifts memory past the bound (a segment is a quarter of it).
                items = self.spill.pop_segment()
                self._queue.extend(items)
                self.held_bytes += sum(len(d) for d, _ in items)
                self.peak_bytes = max(self.peak_bytes, self.held_bytes)
            if not self._queue:
                return None
            return self._queue.popleft()

    def _take_gap(self, item: Item) -> tuple[bytes, int]:
        """The bytes to send for ``item``: with the pending gap count added to its ``dropped``
        when it carries records. Returns them and the count taken (given back on failure)."""
        with self._cond:
            gap, self._gap = (self._gap, 0) if item[1] else (0, self._gap)
        if not gap:
            return item[0], 0
        message = pb.StreamMessage.FromString(item[0])
        message.records.dropped += gap
        return message.SerializeToString(), gap

    def _requeue(self, window: list[Item], gap: int = 0) -> None:
        with self._cond:
            self._queue.extendleft(reversed(window))
            self._gap += gap
            if self.spill and self._queue:
                # Newer messages wait on disk: these, older, go before them there, so that the
                # spill's bound drops the oldest of all and memory holds nothing during an outage.
                try:
                    self.spill.prepend(list(self._queue))
                except OSError as error:
                    self._log_once(f"spilling to {self.spill.folder}", error)
                    return  # they stay in memory, in order, and go first when the collector is back
                self.held_bytes -= sum(len(data) for data, _ in self._queue)
                self._queue.clear()

    # -- sender thread -----------------------------------------------------------------------

    def _log_once(self, what: str, error: BaseException) -> None:
        cause = error.details() if isinstance(error, grpc.RpcError) else repr(error)
        if self._failing != what:
            self._failing = what
            log.warning("sleuth logger: %s failed (%s); holding records and retrying", what, cause)

    def _done(self) -> bool:
        with self._cond:
            if not self._closing:
                return False
            empty = not self._queue and not self.spill and self._spec == self._spec_sent
            return empty or time.monotonic() >= self._deadline

    def _run(self) -> None:
        backoff = self.backoff_s[0]
        while not self._done():
            try:
                self._wait_until_connected()
                self._register_spec()
                self._one_stream()
                if self._failing is not None:
                    log.warning("sleuth logger: the collector at %s answers again", self.target)
                    self._failing = None
                backoff = self.backoff_s[0]
            except grpc.RpcError as error:
                if self._refusing is None:  # a drop was logged where it happened
                    self._log_once(f"streaming to the collector at {self.target}", error)
            except Exception as error:  # never let the thread die
                self._log_once("the sender", error)
            else:
                continue
            with self._cond:
                remaining = self._deadline - time.monotonic()
                self._cond.wait(min(backoff, max(remaining, 0)))
            backoff = min(backoff * 2, self.backoff_s[1])

    def _wait_until_connected(self) -> None:
        """Nothing leaves the queue or the disk until the collector answers its health check
        (an RpcError when it does not): a stream that fails takes spilled messages from disk."""
        self._health(pb.HealthRequest(), timeout=self.connect_timeout_s, metadata=self._metadata)

    def _register_spec(self) -> None:
        with self._cond:
            spec = self._spec
        if spec is not None and spec != self._spec_sent:
            try:
                message = jobspec_to_proto(spec)
                message.rendezvous = self.rendezvous
                self._register(message, timeout=self.connect_timeout_s + 10, metadata=self._metadata)
            except grpc.RpcError as error:
                if retryable(error):
                    raise
                # Sent again it is refused again; the records stream on (and are refused, and
                # counted, if the collector needs the spec).
                log.warning("sleuth logger: the collector at %s refused the job spec (%s: %s); not sending it again",
                            self.target, error.code().name, error.details())
            self._spec_sent = spec

    def _one_stream(self) -> None:
        window: list[Item] = []
        gaps: list[int] = []  # the gap count each message of the window carries
        lock = threading.Lock()
        closed = False
        started = time.monotonic()

        def requests():
            size = 0
            while True:
                elapsed = time.monotonic() - started
                if elapsed >= self.stream_s or size >= self._window_limit or self._closing and self._idle():
                    return
                item = self._next(min(0.1, self.stream_s - elapsed))
                if item is None:
                    continue
                with lock:
                    if closed:  # the call is over: this one goes back for the next stream
                        self._requeue([item])
                        return
                    window.append(item)
                    data, gap = self._take_gap(item)
                    gaps.append(gap)
                size += len(item[0])
                yield data

        try:
            summary = self._stream(requests(), timeout=self.stream_s + 30, metadata=self._metadata)
        except grpc.RpcError as error:
            with lock:
                closed = True
                self._settle_failed(window, gaps, error)
            raise
        except BaseException:
            with lock:
                closed = True
                self._requeue(window, sum(gaps))
            raise
        with lock:
            closed = True
        with self._cond:
            self.held_bytes -= sum(len(d) for d, _ in window)
            self.sent_messages += len(window)
            self.accepted += summary.accepted
            self._refusing = None
            self._unregistered_since = None
        self._confirmed(window)
        if summary.rejected:
            log.warning("sleuth logger: the collector rejected %d batches: %s", summary.rejected, "; ".join(summary.reasons))

    def _settle_failed(self, window: list[Item], gaps: list[int], error: grpc.RpcError) -> None:
        """A failed stream: forget what the collector confirmed, drop and count what it refused for
        good, requeue the rest (with the gap counts they carried and the new loss)."""
        said = accepted_of(error)
        confirmed = 0 if said is None else min(said, len(window))
        if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
            with self._cond:
                # The collector does not know the job (it restarted, or dropped the job as idle):
                # the rank that holds the spec registers it again before the next stream.
                self._spec_sent = None
        if not self._drops(error):
            refused: list[Item] = []
        elif said is None:  # the call itself was refused (a token): every message of it would be
            refused = window
        else:
            refused = window[confirmed:confirmed + 1]
        rest = window[confirmed + len(refused):]
        lost = sum(count for _, count in refused)
        with self._cond:
            self.held_bytes -= sum(len(data) for data, _ in window[:confirmed + len(refused)])
            self.sent_messages += confirmed
            self.accepted += confirmed
            self.refused += len(refused)
            self.dropped += lost
            first = bool(refused) and self._refusing != error.code()
            self._refusing = error.code() if refused else None
        self._confirmed(window[:confirmed])
        self._requeue(rest, sum(gaps[confirmed:]) + lost)
        if first:
            log.warning("sleuth logger: the collector at %s refused %d messages (%s: %s); dropped %d records "
                        "(counted, reported in the next batch) and not sending them again",
                        self.target, len(refused), error.code().name, error.details(), lost)

    def _confirmed(self, items: list[Item]) -> None:
        if self.on_confirmed is not None and items:
            self.on_confirmed([data for data, _ in items])

    def _drops(self, error: grpc.RpcError) -> bool:
        """Whether what ``error`` refused is dropped rather than sent again."""
        if retryable(error):
            return False
        if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
            return True
        now = time.monotonic()
        with self._cond:
            if self._unregistered_since is None:
                self._unregistered_since = now
            return now - self._unregistered_since >= self.unregistered_grace_s

    def _idle(self) -> bool:
        with self._cond:
            return not self._queue and not self.spill

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {
                "held_bytes": self.held_bytes, "peak_bytes": self.peak_bytes, "spilled_bytes": self.spill.bytes,
                "sent_messages": self.sent_messages, "accepted": self.accepted, "dropped": self.dropped,
                "refused": self.refused,
            }
