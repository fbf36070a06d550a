"""``sleuth stack``: the gateway, worker, localizer and alerter processes it starts carry records into ClickHouse."""

from __future__ import annotations

import time

import grpc
import pytest

from sleuth.ports import free_port
from sleuth.proto import commops_pb2 as pb
from sleuth.storage import records_table
from sleuth.stream import connect
from sleuth.stream.services import stack

from ..conftest import Services
from .harness import job_spec, private_settings, record_stream, stub, wait_for_count
from .test_records_pipeline import sorted_by_key, training_records

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_stack_up_serves_records_end_to_end_and_down_stops_its_processes(services: Services, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SLEUTH_STATE_DIR", str(services.state_dir))
    settings = private_settings(services, gateway_port=free_port())
    client = connect.clickhouse_client(settings)
    try:
        pids = stack.up(services.repo_root, settings)
        assert all(pids.values()), pids
        assert stack.up(services.repo_root, settings) == pids  # idempotent: nothing new started
        gateway = stub(f"127.0.0.1:{settings.gateway_port}")
        deadline = time.monotonic() + 30
        while True:  # the gateway process needs a moment to listen
            try:
                assert gateway.Health(pb.HealthRequest()).status == pb.HealthReply.SERVING
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline
                time.sleep(0.3)
        gateway.RegisterJob(job_spec("job-a"))
        gateway.RegisterJob(job_spec("job-b"))
        sent = training_records(2_000, seed=31)
        assert gateway.Stream(record_stream(sent, per_message=500)).accepted == 4
        table = f"{settings.clickhouse_database}.records"
        assert wait_for_count(client, table, len(sent)) == len(sent)
        assert records_table.select_records(client, table).equals(sorted_by_key(sent))
        assert stack.status(services.repo_root) == {"clickhouse": True, "kafka": True, "alertmanager": True, "gateway": True, "worker": True,
                                                       "localizer": True, "alerter": True}
    finally:
        stack.down(services.repo_root, services_too=False)  # the session's services stay for other tests
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()
    assert stack.running(services.repo_root) == {"gateway": None, "worker": None, "localizer": None, "alerter": None}
