"""The demo on the real stack (after ``sleuth stack up``): the training job streams to the gateway
with ``SLEUTH_COLLECTOR`` set, and its incident is the one the streaming localizer writes to
ClickHouse. The emulated job's records (millions of them) are loaded straight into ClickHouse, as
the workers would have written them, and localized from there with ``ClickHouseSource``."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import TYPE_CHECKING

import grpc

from sleuth.errors import ServiceError
from sleuth.localizer import localize
from sleuth.proto import commops_pb2 as pb
from sleuth.proto import commops_pb2_grpc as pb_grpc
from sleuth.records import IterationBatch, RecordBatch
from sleuth.settings import Settings
from sleuth.sim import Emulation
from sleuth.storage import schema
from sleuth.storage.incidents import ClickHouseIncidentStore, incident_by_id, list_incidents
from sleuth.storage.sink import ClickHouseSink
from sleuth.storage.source import ClickHouseSource
from sleuth.stream import connect
from sleuth.stream.detection import irregular_iterations
from sleuth.stream.services.incident_sink import IncidentSink
from sleuth.topology.job_fabric import single_leaf

from sleuth.demo.cases import RealJob, SpineJob, gpu_of_rank
from sleuth.demo.embedded import Outcome

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["reachable", "real_job", "spine_job"]


def reachable(settings: Settings, *, timeout_s: float = 2.0) -> bool:
    """Whether the stack answers: the gateway's health check and a ClickHouse query."""
    try:
        with grpc.insecure_channel(f"{settings.gateway_host}:{settings.gateway_port}") as channel:
            reply = pb_grpc.CollectorStub(channel).Health(pb.HealthRequest(), timeout=timeout_s)
        if reply.status != pb.HealthReply.SERVING:
            return False
        client = connect.clickhouse_client(settings)
        try:
            client.execute("SELECT 1")
        finally:
            client.disconnect()
    except Exception:  # anything missing means: not this path
        return False
    return True


def real_job(case: RealJob, settings: Settings, *, wait_s: float = 300.0) -> Outcome:
    """Stream the training job through the gateway and wait for the streaming localizer's incident."""
    job = f"{case.job}-{uuid.uuid4().hex[:6]}"  # a fresh id: earlier demo runs stay apart
    case = dataclasses.replace(case, job=job)
    case.run({"SLEUTH_COLLECTOR": f"{settings.gateway_host}:{settings.gateway_port}"})
    client = connect.clickhouse_client(settings)
    try:
        incidents = _wait_for_incidents(client, settings.clickhouse_database, job, range(case.first, case.last),
                                        wait_s=wait_s)
        source = ClickHouseSource(client, settings.clickhouse_database, job)
        spec = source.job_spec()
        return Outcome(job, gpu_of_rank(spec, case.rank), tuple(incidents), source, single_leaf(spec),
                       tuple(sorted({i for incident in incidents for i in incident.iterations})), client)
    except BaseException:
        client.disconnect()
        raise


def _wait_for_incidents(client: Client, database: str, job: str, slowed: range, *, wait_s: float) -> list:
    """The job's incidents once one covers a ``slowed`` iteration (the streaming localizer may first
    write others, of the jitter before the fault), or those there are after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    incidents: list = []
    while time.monotonic() < deadline:
        rows = list_incidents(client, database, job=job)
        incidents = [incident_by_id(client, database, row.incident) for row in reversed(rows)]
        if any(set(incident.iterations) & set(slowed) for incident in incidents):
            return incidents
        time.sleep(2.0)
    if incidents:
        return incidents
    raise ServiceError(
        f"no incident for job {job} in {database} after {wait_s:.0f} s: are the worker and the localizer "
        "running (sleuth stack status)?"
    )


def spine_job(case: SpineJob, settings: Settings) -> Outcome:
    """Load the emulated job into ClickHouse and localize it from there."""
    scenario = case.scenario()
    job = f"{case.job}-{uuid.uuid4().hex[:6]}"
    scenario = dataclasses.replace(scenario, job=job)
    emulation = Emulation(scenario)
    client = connect.clickhouse_client(settings)
    try:
        schema.migrate(client, settings.clickhouse_database)
        spec = emulation.job_spec()
        sink = ClickHouseSink(client, settings.clickhouse_database)
        sink.write(RecordBatch.empty(), emulation.iterations(), [spec])
        for first in range(0, spec.world, 512):  # a slice of ranks at a time bounds the memory held
            sink.write(emulation.ranks_records(range(first, min(first + 512, spec.world))), IterationBatch.empty(), [])
        source = ClickHouseSource(client, settings.clickhouse_database, job)
        irregular = irregular_iterations(source.iterations())
        incidents = localize(source, irregular_iterations=irregular, topology=scenario.topology, routing=case.routing)
        producer = connect.kafka_producer(settings)
        try:  # raised like the streaming localizer raises them: on sleuth.incidents, then into ClickHouse
            outlet = IncidentSink(ClickHouseIncidentStore(client, settings.clickhouse_database), bus=producer,
                                  topic=settings.incidents_topic)
            for incident in incidents:
                outlet.write(incident)
        finally:
            producer.close(timeout=10)
        return Outcome(job, case.spine, tuple(incidents), source, scenario.topology,
                       tuple(sorted({int(i.iteration) for i in irregular})), client)
    except BaseException:
        client.disconnect()
        raise
