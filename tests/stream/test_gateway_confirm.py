"""The gateway confirms a stream only once Kafka acknowledged every send of it.

Kafka's producer is replaced by one whose sends finish when the test says, so that a send can
finish (and fail) exactly while the gateway prunes a long stream's finished sends; the rest is
the real ``Collector`` and ``Publisher``.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.proto import codec
from sleuth.proto import commops_pb2 as pb
from sleuth.records import RecordBatch
from sleuth.settings import Settings
from sleuth.stream.ingest import gateway
from sleuth.stream.ingest.grpc_status import RETRYABLE
from sleuth.stream.ingest.publisher import Publisher
from sleuth.stream.ingest.validate import Limits


class Aborted(Exception):
    pass


class Context:
    """The part of ``grpc.aio.ServicerContext`` a stream uses: aborting raises, as gRPC's does."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None

    def invocation_metadata(self):
        return ()

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        raise Aborted(details)

    def set_trailing_metadata(self, metadata) -> None:
        pass


class Send:
    """A send Kafka has not answered yet: it turns done (failed) the moment the gateway first asks."""

    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.looks = 0

    @property
    def is_done(self) -> bool:
        self.looks += 1
        return not self.fails or self.looks > 1

    def add_both(self, callback) -> None:
        pass

    def get(self, timeout: float) -> None:
        if self.fails:
            raise TimeoutError("the broker went away")


async def _messages(messages):
    for message in messages:
        yield message


def call(method, requests, context):
    """A servicer method run as the asyncio server runs it: requests as an async iterator."""
    return asyncio.run(method(_messages(requests) if isinstance(requests, list) else requests, context))


class Producer:
    def __init__(self) -> None:
        self.sends: list[Send] = []

    def send(self, topic, *, key, value, headers) -> Send:
        # The first send of the stream is the one that fails, while the gateway prunes.
        self.sends.append(Send(fails=not self.sends))
        return self.sends[-1]


def test_a_send_that_fails_while_the_gateway_prunes_fails_the_stream_with_a_retryable_code() -> None:
    spec = JobSpec.from_layout("llama", ParallelLayout(8, 8, 1, 1))
    batch = RecordBatch.from_columns(job="llama", rank=[0], comm=spec.communicators[0].comm, seq=[3], op=[1],
                                     peer=[-1], nbytes=[8], iteration=[1], t_issue_ns=[1], t_start_ns=[2], t_end_ns=[3])
    producer = Producer()
    collector = gateway.Collector(Publisher(Settings(), producer=producer), tokens=None, limits=Limits(),
                                  registered=[spec])
    message = pb.StreamMessage(records=codec.records_to_proto(batch)).SerializeToString()
    context = Context()
    with pytest.raises(Aborted):
        call(collector.Stream, [message] * gateway._PRUNE_EVERY, context)
    assert len(producer.sends) == gateway._PRUNE_EVERY  # the prune ran, after the last message
    assert context.code in RETRYABLE  # the logger resends the stream
