"""Live mode: emulated loggers stream to a collector over a real gRPC channel on 127.0.0.1."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest

from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.proto.codec import iterations_from_proto, jobspec_from_proto, records_from_proto
from sleuth.sim.live import stream_live

from tests.sim.conftest import emulate


class CountingCollector(pb_grpc.CollectorServicer):
    """A minimal collector: decodes what arrives and counts it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records = 0
        self.iterations = 0
        self.streams = 0
        self.ranks: set[int] = set()
        self.jobs: list[str] = []

    def RegisterJob(self, request, context):
        spec = jobspec_from_proto(request)
        self.jobs.append(spec.job)
        return pb.RegisterJobReply(job=spec.job, communicators=len(spec.communicators))

    def Stream(self, request_iterator, context):
        accepted = 0
        for message in request_iterator:
            if message.HasField("records"):
                batch = records_from_proto(message.records)
                with self.lock:
                    self.records += len(batch)
                    self.ranks.update(batch["rank"].tolist())
            else:
                batch = iterations_from_proto(message.iterations)
                with self.lock:
                    self.iterations += len(batch)
            accepted += 1
        with self.lock:
            self.streams += 1
        return pb.StreamSummary(accepted=accepted)


@pytest.fixture
def collector():
    servicer = CountingCollector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_CollectorServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(None)


def test_loggers_stream_every_record(collector) -> None:
    servicer, target = collector
    emulation = emulate(tp=2, pp=2, dp=2, fabric="fattree:hosts=2,gpus=4,pod=2,spines=1", iterations=3, microbatches=2)
    summary = stream_live(emulation, target, loggers=4)
    total = len(emulation.records())
    assert summary.records == total and servicer.records == total
    assert servicer.iterations == 8 * 3 == summary.iteration_records
    assert servicer.streams == 4 and servicer.ranks == set(range(8))
    assert servicer.jobs == ["sim"]
    assert summary.accepted == summary.messages == 4 * 3 * 2


def test_paced_streaming_takes_the_emulated_time(collector) -> None:
    _, target = collector
    emulation = emulate(tp=2, pp=1, dp=2, fabric="fattree:hosts=1,gpus=4,pod=1,spines=1", iterations=2, microbatches=1)
    span_s = (emulation.timeline.it_end.max() - emulation.timeline.it_start.min()) / 1e9
    pace = span_s / 0.2  # the run's emulated span, squeezed into ~0.2 s
    summary = stream_live(emulation, target, pace=pace)
    assert summary.loggers == 4 and summary.seconds >= 0.2 * 0.9
