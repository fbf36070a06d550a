"""The streaming localizer on the real services, end to end: an emulated job with one slow GPU
streams through the gateway, Kafka and a worker whose detector publishes irregularities; the
localizer agent raises one incident, in ClickHouse and on the incidents topic, whose top suspect
is the slow GPU (two of the job's hosts' clocks apart from the others', read on one clock),
whether its irregular iterations or its what-if rounds saw it first. A replay of every
irregularity (a fresh consumer group) raises nothing new. A GPU slow from the first step (no
iteration irregular, hosts' clocks apart again) is one incident too, opened by a what-if round
and grown to the end. A fault-free job's one pause is judged benign once the iterations after it
land: no incident."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import uuid
from collections import deque

import numpy as np
import pytest
from prometheus_client import REGISTRY

from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.sim import Emulation, Timing
from sleuth.storage import schema
from sleuth.stream import connect
from sleuth.stream.detection import StreamDetector
from sleuth.stream.detection.publish import IrregularityPublisher
from sleuth.stream.services.job_ownership import partition_of
from sleuth.stream.services.localizer_agent import LocalizerAgent, cluster_topology
from sleuth.stream.services.worker import Worker
from sleuth.topology import save_topology

from ..conftest import Services
from .detection.conftest import emulation, scenario, small_model
from .harness import consume, private_settings, stream_emulation

pytestmark = [pytest.mark.services, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

FAULTY = "gpu:h0003/1"
#: Hosts' clocks as NTP far off (30 ms) and none (0.4 s) leave them: the localizer reads them on one.
CLOCKS = {"h0001": 30_000_000, "h0002": 400_000_000}


def on_clocks_apart(em: Emulation) -> Emulation:
    """``em`` with its hosts' clocks apart by ``CLOCKS``."""
    return Emulation(dataclasses.replace(em.scenario, host_clocks_ns=CLOCKS))


def wait_until(condition, *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def start(target, *args):
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(*args, stop), daemon=True)
    thread.start()
    return stop, thread


def halt(stop, thread) -> None:
    stop.set()
    thread.join(timeout=60)
    assert not thread.is_alive()


def localizer_settings(services: Services, topology, fabric, **more):
    """Private settings with topics and a group of their own and the emulation's fabric, its topics
    made and its database migrated: (settings, client)."""
    save_topology(topology, fabric)
    settings = private_settings(services)
    tag = settings.records_topic.rsplit("-", 1)[1]
    settings = dataclasses.replace(
        settings, irregularities_topic=f"sleuth-irregularities-{tag}", incidents_topic=f"sleuth-incidents-{tag}",
        localizer_group=f"sleuth-localizers-{tag}", localizer_topology=str(fabric), **more,
    )
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)
    connect.ensure_topics(settings, {settings.irregularities_topic: 2, settings.incidents_topic: 1})
    return settings, client


@pytest.fixture(scope="module")
def streamed(services: Services, tmp_path_factory):
    """The pipeline run once for the module: (settings, client, first agent, irregularity messages)."""
    em = on_clocks_apart(emulation(f"{FAULTY},slow=1.5,start=15"))
    settings, client = localizer_settings(services, em.scenario.topology, tmp_path_factory.mktemp("fabric") / "fabric.yaml",
                                          localizer_debounce_s=3.0, localizer_land_timeout_s=30.0)
    publisher = IrregularityPublisher(settings)
    worker = Worker(settings, client=connect.clickhouse_client(settings),
                    detectors=[StreamDetector(small_model())], publish=publisher)
    called = []
    agent = LocalizerAgent(settings, client=connect.clickhouse_client(settings), topology=cluster_topology(settings),
                           on_incident=lambda incident, latency: called.append((incident, latency)))
    running = [start(worker.run), start(agent.run)]
    try:
        stream_emulation(settings, client, em, range(40))
        wait_until(lambda: agent.incidents, timeout_s=120, what="the first incident")
        # Every irregularity the worker published is dealt with before the module's tests look.
        messages = consume(settings, settings.irregularities_topic, messages=10_000, timeout_s=5)
        assert messages
        wait_until(lambda: agent.handled == len(messages), timeout_s=120, what="every irregularity handled")
        yield settings, client, agent, called, messages
    finally:
        for stop, thread in reversed(running):
            halt(stop, thread)
        publisher.close()
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()


def test_one_incident_names_the_slow_gpu_in_clickhouse_and_on_kafka(streamed) -> None:
    settings, client, agent, called, _ = streamed
    db = settings.clickhouse_database
    [incident] = agent.incidents
    assert incident.suspects[0].device == FAULTY
    assert client.execute(f"SELECT incident FROM {db}.incidents FINAL") == [(incident.incident,)]
    assert client.execute(f"SELECT device FROM {db}.suspects FINAL WHERE position = 0") == [(FAULTY,)]
    [(document,)] = client.execute(f"SELECT document FROM {db}.incident_details FINAL")
    latest = json.loads(document)  # the incident as it last grew
    assert latest["incident"] == incident.incident and latest["cause"] == "compute"
    assert set(incident.iterations) <= set(latest["iterations"])
    assert client.execute(f"SELECT count() FROM {db}.traversals FINAL")[0][0] == len(latest["steps"])
    messages = consume(settings, settings.incidents_topic, messages=100, timeout_s=5)
    assert len(messages) == 1 + agent.grew  # opened once, then written again as it grew
    assert {m.key for m in messages} == {incident.job.encode()}
    assert {json.loads(m.value)["incident"] for m in messages} == {incident.incident}
    assert json.loads(messages[-1].value)["suspects"][0]["device"] == FAULTY
    # The latency is exposed: logged, kept, and handed to the callback; an irregular iteration's includes the debounce.
    assert [(i.incident, latency) for i, latency in called] == [(incident.incident, agent.latencies_s[0])]
    if incident.attribution is None:
        assert agent.latencies_s[0] >= settings.localizer_debounce_s


def test_a_replay_of_every_irregularity_raises_no_second_incident(streamed) -> None:
    settings, client, first, _, messages = streamed
    db = settings.clickhouse_database
    # A fresh consumer group reads the topic from the start: the replay a crash or restart would cause,
    # with none of the first agent's memory.
    replay = dataclasses.replace(settings, localizer_group=f"{settings.localizer_group}-replay-{uuid.uuid4().hex[:6]}")
    agent = LocalizerAgent(replay, client=connect.clickhouse_client(replay), topology=cluster_topology(replay))
    stop, thread = start(agent.run)
    try:
        wait_until(lambda: agent.handled == len(messages), timeout_s=120, what="the replay handled")
    finally:
        halt(stop, thread)
    assert agent.incidents == []
    assert agent.replayed + agent.continued > 0  # it did judge them, and found them raised already
    assert client.execute(f"SELECT count() FROM {db}.incidents FINAL")[0][0] == 1
    assert len(consume(settings, settings.incidents_topic, messages=100, timeout_s=5)) == 1 + first.grew + agent.grew


def test_a_lone_pause_is_recorded_and_never_paged(services: Services, tmp_path) -> None:
    em = Emulation(scenario(timing=Timing(hiccup_rate=0.0, hiccups_at=(20,)), iterations=40))  # no fault at all
    settings, client = localizer_settings(services, em.scenario.topology, tmp_path / "fabric.yaml", localizer_debounce_s=1.0)
    publisher = IrregularityPublisher(settings)
    worker = Worker(settings, client=connect.clickhouse_client(settings),
                    detectors=[StreamDetector(small_model())], publish=publisher)
    agent = LocalizerAgent(settings, client=connect.clickhouse_client(settings), topology=cluster_topology(settings))
    running = [start(worker.run), start(agent.run)]
    db = settings.clickhouse_database
    counted = REGISTRY.get_sample_value("sleuth_benign_pauses_total") or 0.0
    try:
        stream_emulation(settings, client, em, range(40))
        wait_until(lambda: agent.pauses, timeout_s=120, what="the pause judged")
        messages = consume(settings, settings.irregularities_topic, messages=10_000, timeout_s=5)
        wait_until(lambda: agent.handled == len(messages), timeout_s=120, what="every irregularity handled")
        [pause] = agent.pauses
        assert 20 in pause.iterations and agent.incidents == []
        assert REGISTRY.get_sample_value("sleuth_benign_pauses_total") == counted + 1
        assert client.execute(f"SELECT count() FROM {db}.incidents FINAL") == [(0,)]
        assert consume(settings, settings.incidents_topic, messages=1, timeout_s=3) == []
        # The job's records and iterations, the pause's among them, are kept in ClickHouse as ever.
        assert client.execute(f"SELECT count() FROM {db}.iterations FINAL WHERE iteration = 20")[0][0] == em.job_spec().world
        # Recorded: a restarted localizer replaying the topic finds it, and neither judges nor counts it again.
        assert client.execute(f"SELECT incident, tops FROM {db}.pauses FINAL") == [
            (pause.incident, [s.device for s in pause.suspects[:LOCALIZER_RULES.tied_suspects]])]
        replay = dataclasses.replace(settings, localizer_group=f"{settings.localizer_group}-replay")
        again = LocalizerAgent(replay, client=connect.clickhouse_client(replay), topology=cluster_topology(replay))
        running.append(start(again.run))
        wait_until(lambda: again.handled == len(messages), timeout_s=120, what="the replay handled")
        assert again.pauses == deque() and again.incidents == [] and again.replayed >= 1
        assert REGISTRY.get_sample_value("sleuth_benign_pauses_total") == counted + 1
    finally:
        for stop, thread in reversed(running):
            halt(stop, thread)
        publisher.close()
        client.execute(f"DROP DATABASE IF EXISTS {db}")
        client.disconnect()


def test_a_gpu_slow_from_the_first_step_opens_one_incident_that_grows(services: Services, tmp_path) -> None:
    em = on_clocks_apart(emulation(f"{FAULTY},slow=1.5,start=0", iterations=30))
    settings, client = localizer_settings(services, em.scenario.topology, tmp_path / "fabric.yaml", attribution_interval_s=0.5)
    worker = Worker(settings, client=connect.clickhouse_client(settings))  # no detector: nothing is irregular
    agent = LocalizerAgent(settings, client=connect.clickhouse_client(settings), topology=cluster_topology(settings))
    running = [start(worker.run), start(agent.run)]
    db = settings.clickhouse_database
    try:
        stream_emulation(settings, client, em, range(30))
        # The last iteration never counts as landed (a rank's newest may still be arriving): 28 is the end.
        wait_until(lambda: agent.watch.measured(em.scenario.job) >= 28, timeout_s=120, what="every landed iteration measured")
        [incident] = agent.incidents
        assert incident.suspects[0].device == FAULTY and incident.attribution.trigger == "slowdown"
        [(name, iterations)] = client.execute(f"SELECT incident, iterations FROM {db}.incidents FINAL")
        assert name == incident.incident and set(incident.iterations) <= set(iterations) <= set(range(29))
        assert agent.received == 0 and agent.rounds > 0
    finally:
        for stop, thread in reversed(running):
            halt(stop, thread)
        client.execute(f"DROP DATABASE IF EXISTS {db}")
        client.disconnect()


class _Losing:
    """An emulation whose loggers lost ``share`` of its records at random before they were sent."""

    def __init__(self, emulation: Emulation, share: float) -> None:
        self.emulation, self.share = emulation, share

    def records(self, **which):
        records = self.emulation.records(**which)
        return records.take(np.flatnonzero(np.random.default_rng(23).random(len(records)) >= self.share))

    def __getattr__(self, name: str):
        return getattr(self.emulation, name)


def test_a_gpu_slow_from_the_first_step_whose_loggers_lost_records_is_named_and_the_loss_logged(
        services: Services, tmp_path, caplog) -> None:
    em = emulation(f"{FAULTY},slow=1.5,start=0", iterations=20)
    settings, client = localizer_settings(services, em.scenario.topology, tmp_path / "fabric.yaml", attribution_interval_s=0.5)
    worker = Worker(settings, client=connect.clickhouse_client(settings))
    agent = LocalizerAgent(settings, client=connect.clickhouse_client(settings), topology=cluster_topology(settings))
    running = [start(worker.run), start(agent.run)]
    try:
        with caplog.at_level(logging.WARNING, logger="sleuth.stream.services.localizer_agent"):
            stream_emulation(settings, client, _Losing(em, 0.01), range(20))
            wait_until(lambda: agent.watch.measured(em.scenario.job) >= 18, timeout_s=120, what="every landed iteration measured")
        [incident] = agent.incidents
        assert incident.suspects[0].device == FAULTY and incident.attribution.trigger == "slowdown"
        assert "were missing from their groups" in caplog.text
    finally:
        for stop, thread in reversed(running):
            halt(stop, thread)
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()


def test_two_localizers_of_one_group_measure_a_job_once_and_raise_its_slowdown_once(services: Services, tmp_path) -> None:
    em = emulation(f"{FAULTY},slow=1.5,start=0", iterations=30)
    job = em.scenario.job
    settings, client = localizer_settings(services, em.scenario.topology, tmp_path / "fabric.yaml", attribution_interval_s=0.5)
    # The records topic exists before the worker joins (not when the gateway starts, after the group
    # splits): a consumer whose topic was missing at its join finds it at the next metadata refresh only.
    connect.ensure_gateway_topics(settings)
    worker = Worker(settings, client=connect.clickhouse_client(settings))  # no detector: only what-if rounds see it
    agents = [LocalizerAgent(settings, client=connect.clickhouse_client(settings), topology=cluster_topology(settings))
              for _ in range(2)]
    running = [start(worker.run), *(start(agent.run) for agent in agents)]
    db = settings.clickhouse_database

    def split() -> bool:  # each owns one partition of the two, as of its latest round
        owned = [agent.ownership.owned if agent.ownership else frozenset() for agent in agents]
        return len(owned[0]) == len(owned[1]) == 1 and owned[0] != owned[1]

    try:
        # The group settles on a partition each before the job starts, so its owner never changes.
        wait_until(split, timeout_s=120, what="the irregularities topic's two partitions split between the two")
        [owner] = [agent for agent in agents if agent.ownership.owns(job)]
        [other] = [agent for agent in agents if agent is not owner]
        assert owner.ownership.owned == {partition_of(job, 2)}
        stream_emulation(settings, client, em, range(30))
        wait_until(lambda: owner.watch.measured(job) >= 28, timeout_s=120, what="every landed iteration measured")
        [incident] = owner.incidents
        assert incident.suspects[0].device == FAULTY and other.incidents == []
        assert other.watch.measured(job) == -1 and other.rounds > 0  # it ran its rounds, but never over this job
        assert client.execute(f"SELECT incident FROM {db}.incidents FINAL") == [(incident.incident,)]
    finally:
        for stop, thread in reversed(running):
            halt(stop, thread)
        client.execute(f"DROP DATABASE IF EXISTS {db}")
        client.disconnect()



def test_a_search_that_followed_a_delay_past_the_last_irregular_step_waits_for_the_steps_that_settle_it(
        services: Services, tmp_path) -> None:
    """A real 8-rank job on the loaded machine whose batches' cost moves between replicas
    (``tests/localizer/loaded_gloo/train-seqlen``, steps 0-29, all landed): its irregular steps 19
    and 26 gathered. The search followed 26's delay into 27, so what settles the incident is 30, past
    the last landed step: the agent waits for it as for the gathered steps' own, then, the land
    timeout over, judges on what landed: the costly batches moving, no device. It paged the search's
    NVSwitch unjudged before. (One gathering handled on a clock of the test's, no what-if rounds.)"""
    from pathlib import Path

    from sleuth.jobspec import JobSpec
    from sleuth.records_folder import read_records
    from sleuth.storage.sink import ClickHouseSink
    from sleuth.stream.services.episodes import Pending
    from sleuth.topology.job_fabric import single_leaf

    folder = Path(__file__).parents[1] / "localizer" / "loaded_gloo" / "train-seqlen"
    spec = JobSpec.read(folder)
    records, rows = read_records(folder)
    settings, client = localizer_settings(services, single_leaf(spec), tmp_path / "fabric.yaml",
                                          localizer_debounce_s=1.0, localizer_land_timeout_s=10.0)
    db = settings.clickhouse_database
    ClickHouseSink(client, db).write(records, rows, [spec])
    now = [1.0]
    agent = LocalizerAgent(settings, client=connect.clickhouse_client(settings), topology=cluster_topology(settings),
                           clock=lambda: now[0])
    pending = Pending(spec.job, arrivals={19: 0.0, 26: 0.0})
    try:
        assert not agent._handle(pending)  # landed through 29, which settles 26; its search reached 27
        assert pending.settle_through == 30 and agent.incidents == [] and not agent.pauses
        now[0] = 5.0
        assert not agent._handle(pending)  # still waiting
        now[0] = 12.0
        assert agent._handle(pending)
        [incident] = agent.incidents
        assert incident.cause.value == "seqlen_imbalance" and not incident.suspects, incident
        assert client.execute(f"SELECT cause FROM {db}.incidents FINAL") == [("seqlen_imbalance",)]
    finally:
        agent.sink.bus.close(timeout=10)
        client.execute(f"DROP DATABASE IF EXISTS {db}")
        client.disconnect()
