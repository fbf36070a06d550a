"""A real torchelastic job that a node joins, streaming into the real gateway on the real Kafka broker.

torchelastic restarts every worker when a node joins (``--nnodes=MIN:MAX``), under the same run id
and without counting the restart; the new round numbers its iterations from 0 again. The loggers
name their round (``identity.rendezvous_round``) and the gateway makes it a job of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from sleuth.records import IterationBatch
from sleuth.stream.ingest import kafka_records

from ..stream.harness import consume, private_settings, running_gateway
from sleuth.ports import free_port

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

STEPS = 12


def agent(run_id: str, rdzv_port: int, env: dict, log: Path) -> subprocess.Popen:
    """One torchrun agent of a job of one to two nodes, one worker each, on this machine."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1:2", "--nproc-per-node=1",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{rdzv_port}", f"--rdzv-id={run_id}",
               "--max-restarts=0", "--monitor-interval=0.5", "--rdzv-conf=last_call_timeout=1",
               str(Path(__file__).with_name("elastic_job.py")), "--steps", str(STEPS)]
    return subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def iterations_of(messages: list) -> IterationBatch:
    batches = [kafka_records.iterations_from_message(m.value) for m in messages
               if kafka_records.kind_of(m.headers) == kafka_records.ITERATIONS]
    return IterationBatch.concat(batches) if batches else IterationBatch.empty()


def test_a_node_joining_an_elastic_job_starts_a_round_that_streams_as_a_job_of_its_own(services, tmp_path) -> None:
    settings = private_settings(services)
    run_id = f"elastic-{uuid.uuid4().hex[:8]}"
    joined = f"{run_id}.m1"
    with running_gateway(settings) as (collector, target):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")} | {
            "SLEUTH_COLLECTOR": target, "SLEUTH_FLUSH_S": "0.2", "SLEUTH_SPILL_DIR": str(tmp_path / "spill"),
            # With the agents' shared store (torch's default) a joining node waits for a key that rank
            # 0's agent publishes in its first round only, and gives up (docs/logger.md).
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "PYTHONUNBUFFERED": "1"}
        rdzv_port = free_port()
        first = agent(run_id, rdzv_port, env, tmp_path / "first.log")
        agents = [first]
        try:
            deadline = time.monotonic() + 120
            while run_id not in collector.jobs:  # the world of one has registered and streams
                assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()[-3000:]
                time.sleep(0.2)
            agents.append(agent(run_id, rdzv_port, env, tmp_path / "second.log"))
            for process, name in zip(agents, ("first", "second")):
                assert process.wait(timeout=180) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
        finally:
            for process in agents:
                if process.poll() is None:
                    process.kill()
                    process.wait()

    def round_done(messages: list) -> bool:
        iterations = iterations_of(messages)
        return int((iterations.decoded("job") == joined).sum()) >= 2 * STEPS

    got = consume(settings, settings.records_topic, until=round_done, timeout_s=60)
    specs = {spec.job: spec.world for spec in (kafka_records.job_from_message(m.value) for m in got
                                               if kafka_records.kind_of(m.headers) == kafka_records.JOB)}
    assert specs == {run_id: 1, joined: 2}
    iterations = iterations_of(got)
    by_job = {job: iterations.take(iterations.decoded("job") == job) for job in (run_id, joined)}
    # Both rounds kept whole: the joined round's two ranks each ran every step once, from 0.
    assert sorted(Counter(zip(by_job[joined]["rank"].tolist(), by_job[joined]["iteration"].tolist())).items()) == [
        ((rank, step), 1) for rank in (0, 1) for step in range(STEPS)]
    solo = sorted(by_job[run_id]["iteration"].tolist())
    assert set(by_job[run_id]["rank"].tolist()) == {0} and solo == list(range(len(solo))) and len(solo) >= 1
    records = [kafka_records.from_message(m.value) for m in got if kafka_records.kind_of(m.headers) == kafka_records.RECORDS]
    assert {job for batch in records for job in batch.decoded("job")} == {run_id, joined}
