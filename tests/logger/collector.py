"""A small real collector for tests: a gRPC server implementing ``CollectorServicer`` that
keeps every batch and job spec it receives, and refuses what it is told to refuse the way the
gateway does (status code, trailing ``sleuth-accepted`` through the gateway's own helper)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures

import grpc

from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.proto.codec import iterations_from_proto, jobspec_from_proto, records_from_proto
from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.ingest.grpc_status import trailing


class RecordingCollector(pb_grpc.CollectorServicer):
    """``refuse(message)``: the status code to end the stream with at that message, or None;
    ``refuse_call``: a code every stream ends with before any message (a token refused);
    ``refuse_register``: a code every RegisterJob ends with."""

    def __init__(
        self, *, refuse: Callable[[pb.StreamMessage], grpc.StatusCode | None] | None = None,
        refuse_call: grpc.StatusCode | None = None, refuse_register: grpc.StatusCode | None = None,
    ) -> None:
        self.refuse = refuse
        self.refuse_call = refuse_call
        self.refuse_register = refuse_register
        self.refused: list[pb.StreamMessage] = []
        self.registrations = 0
        self.lock = threading.Lock()
        self.records: list[RecordBatch] = []
        self.iterations: list[IterationBatch] = []
        self.dropped = 0
        self.specs = []
        self.streams = 0

    def Stream(self, request_iterator, context):
        accepted = 0
        with self.lock:
            self.streams += 1
        if self.refuse_call is not None:
            context.abort(self.refuse_call, "refused: the whole call")
        for message in request_iterator:
            code = self.refuse(message) if self.refuse is not None else None
            if code is not None:
                with self.lock:
                    self.refused.append(message)
                trailing(context, accepted=accepted)
                context.abort(code, f"batch {accepted}: refused")
            with self.lock:
                if message.HasField("records"):
                    self.records.append(records_from_proto(message.records))
                    self.dropped += message.records.dropped
                else:
                    self.iterations.append(iterations_from_proto(message.iterations))
            accepted += 1
        return pb.StreamSummary(accepted=accepted)

    def RegisterJob(self, request, context):
        with self.lock:
            self.registrations += 1
        if self.refuse_register is not None:
            context.abort(self.refuse_register, "JobSpec: refused")
        spec = jobspec_from_proto(request)
        with self.lock:
            self.specs.append(spec)
        return pb.RegisterJobReply(job=spec.job, communicators=len(spec.communicators))

    def Health(self, request, context):
        return pb.HealthReply(status=pb.HealthReply.SERVING, version="test")

    def all_records(self) -> RecordBatch:
        with self.lock:
            return RecordBatch.concat(self.records)

    def all_iterations(self) -> IterationBatch:
        with self.lock:
            return IterationBatch.concat(self.iterations)


def start(port: int = 0, **refusals) -> tuple[grpc.Server, RecordingCollector, int]:
    """A running server on 127.0.0.1 (``port`` 0: any free one) and its servicer
    (``refusals``: ``RecordingCollector``'s)."""
    servicer = RecordingCollector(**refusals)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_CollectorServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, servicer, bound
