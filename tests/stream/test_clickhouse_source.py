"""ClickHouseSource on the real ClickHouse: emulator records written through the workers' sink
read back as the same RecordSource, so localize() gives the incident it gives in memory."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sleuth.errors import UnknownJob
from sleuth.localizer import localize
from sleuth.records import IterationBatch, RecordBatch
from sleuth.sources import MemorySource, RecordSource
from sleuth.storage import schema
from sleuth.storage.progress import active_jobs
from sleuth.storage.sink import ClickHouseSink
from sleuth.storage.source import ClickHouseSource, landed_through
from sleuth.stream import connect
from sleuth.stream.detection import irregular_iterations

from ..conftest import Services
from .detection.conftest import emulation
from .harness import private_settings

pytestmark = [pytest.mark.services]

FAULT = "gpu:h0003/1,slow=1.5,start=15"


@pytest.fixture()
def database(services: Services):
    settings = private_settings(services)
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)
    try:
        yield client, settings.clickhouse_database
    finally:
        client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
        client.disconnect()


def _write(client, db, em, *, times: int = 1) -> None:
    sink = ClickHouseSink(client, db)
    for _ in range(times):  # a replay writes the same rows again; FINAL must count them once
        sink.write(em.records(), em.iterations(), [em.job_spec()])


def test_localize_over_clickhouse_gives_the_incident_it_gives_in_memory(database) -> None:
    client, db = database
    em = emulation(FAULT)
    _write(client, db, em, times=2)
    memory = MemorySource(em.job_spec(), em.records(), em.iterations())
    stored = ClickHouseSource(client, db, em.scenario.job)
    assert isinstance(stored, RecordSource)
    irregular = irregular_iterations(em.iterations())
    assert irregular, "the fault must make some iterations irregular"

    found = {}
    for name, source in (("memory", memory), ("clickhouse", stored)):
        found[name] = localize(source, irregular_iterations=irregular, topology=em.scenario.topology, window=40)
    [expected], [got] = found["memory"], found["clickhouse"]
    assert got.suspects[0].device == "gpu:h0003/1"
    assert got.suspects == expected.suspects
    assert got.cause == expected.cause
    assert got.ranks_fetched == expected.ranks_fetched < em.scenario.layout.world
    assert got.traversal == expected.traversal
    assert {k: v for k, v in got.to_dict().items() if k != "seconds"} == \
        {k: v for k, v in expected.to_dict().items() if k != "seconds"}


def test_reads_select_ranks_and_iterations_in_one_answer_and_respect_through(database) -> None:
    client, db = database
    em = emulation(FAULT)
    _write(client, db, em)
    source = ClickHouseSource(client, db, em.scenario.job)
    assert source.job_spec() == em.job_spec()
    np.testing.assert_array_equal(source.iteration_ids(), em.iteration_ids())
    got = source.ranks_records([5, 2], iterations=[3, 4, 30])
    want = em.ranks_records([2, 5], iterations=[3, 4, 30])
    assert len(got) == len(want) > 0
    assert set(zip(got["rank"].tolist(), got["iteration"].tolist())) == {(r, i) for r in (2, 5) for i in (3, 4, 30)}
    assert len(source.ranks_records([], iterations=[3])) == 0
    # One communicator's records alone, as the localizer reads a group to judge one operator.
    comm = str(em.ranks_records([2], iterations=[3]).decoded("comm")[0])
    got = source.ranks_records([5, 2], iterations=[3, 4], comms=[comm])
    want = em.ranks_records([2, 5], iterations=[3, 4], comms=[comm])
    assert 0 < len(got) == len(want) < len(em.ranks_records([2, 5], iterations=[3, 4]))
    assert set(got.decoded("comm").tolist()) == {comm}
    np.testing.assert_array_equal(np.sort(got["t_start_ns"]), np.sort(want["t_start_ns"]))
    assert len(source.ranks_records([2], comms=[])) == 0
    bounded = ClickHouseSource(client, db, em.scenario.job, through=9)
    assert bounded.iteration_ids().tolist() == list(range(10))
    assert int(bounded.ranks_records([0])["iteration"].max()) == 9
    assert int(bounded.iterations()["iteration"].max()) == 9
    assert len(bounded.iterations(ranks=[1], iterations=[8, 20])) == 1


def test_landed_through_is_the_last_iteration_every_rank_has_passed(database) -> None:
    client, db = database
    em = emulation(FAULT)
    world = em.scenario.layout.world
    sink = ClickHouseSink(client, db)
    sink.write(em.records(iterations=range(12)), em.iterations(), [em.job_spec()])
    assert landed_through(client, db, em.scenario.job, world=world, since=0) == 10
    # One rank ahead changes nothing; the slowest rank decides.
    sink.write(em.ranks_records([3], iterations=[12, 13]), em.iterations(iterations=[]), [])
    assert landed_through(client, db, em.scenario.job, world=world, since=5) == 10
    assert landed_through(client, db, em.scenario.job, world=world, since=12) is None


def _iterations(client, db, ends_ns: dict[str, int], *, registered: list[str]) -> None:
    """One iteration (of one rank, 1 s long) ending at each of ``ends_ns``; ``registered`` jobs of world 4."""
    client.execute(f"INSERT INTO {db}.iterations (job, rank, iteration, t_start_ns, t_end_ns) VALUES",
                   [(job, 0, 7, end - 10**9, end) for job, end in ends_ns.items()])
    client.execute(f"INSERT INTO {db}.jobs (job, world, spec, registered_ns) VALUES",
                   [(job, 4, "{}", 1) for job in registered])


def test_the_active_jobs_are_the_registered_ones_that_ran_within_the_idle_time_of_now(database) -> None:
    client, db = database
    now, s = 1_800_000_000 * 10**9, 10**9
    _iterations(client, db, {"running": now - 10 * s, "recent": now - 3_000 * s, "idle": now - 4_000 * s,
                             "finished-last-year": now - 365 * 86_400 * s, "unregistered": now,
                             "clock-ahead": now + 10 * 365 * 86_400 * s},
                registered=["running", "recent", "idle", "finished-last-year", "waiting", "clock-ahead"])
    # A host whose clock jumped years ahead is no now: the others stay active beside it.
    assert active_jobs(client, db, idle_s=3_600.0, now_ns=now) == {"running": 4, "recent": 4, "clock-ahead": 4}


def test_emulated_jobs_are_active_on_their_own_clock_and_an_empty_database_has_none(database) -> None:
    client, db = database
    assert active_jobs(client, db, idle_s=60.0, now_ns=1_800_000_000 * 10**9) == {}
    s = 10**9
    _iterations(client, db, {"emulated": 500 * s, "emulated-earlier": 400 * s, "emulated-long-done": 100 * s},
                registered=["emulated", "emulated-earlier", "emulated-long-done"])
    assert active_jobs(client, db, idle_s=150.0, now_ns=1_800_000_000 * 10**9) == {"emulated": 4, "emulated-earlier": 4}


def test_an_unknown_job_fails_naming_the_job_and_table(database) -> None:
    client, db = database
    with pytest.raises(UnknownJob, match=rf"job 'no-such-job' is not registered: no row in ClickHouse table {db}\.jobs"):
        ClickHouseSource(client, db, "no-such-job")


def test_a_job_registered_again_is_read_with_its_new_spec_and_each_registration_parsed_once(database) -> None:
    client, db = database
    em = emulation(FAULT)
    spec = em.job_spec()
    sink = ClickHouseSink(client, db)
    sink.write(RecordBatch.empty(), IterationBatch.empty(), [spec])
    first = ClickHouseSource(client, db, spec.job).job_spec()
    assert first == spec
    assert ClickHouseSource(client, db, spec.job).job_spec() is first  # the same text: parsed once
    again = replace(spec, layout=None)  # registered again, e.g. by a restarted launcher that names no layout
    sink.write(RecordBatch.empty(), IterationBatch.empty(), [again])
    assert ClickHouseSource(client, db, spec.job).job_spec() == again != spec
