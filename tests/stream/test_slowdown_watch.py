"""The streaming localizer's what-if rounds on hand-made progress and on emulated jobs, round by
round as the agent runs them (the agent on the real services: ``test_streaming_localizer``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.settings import Settings
from sleuth.layout import ParallelLayout
from sleuth.sim import Emulation, Scenario, parse_fault
from sleuth.localizer.episodes import Raised, episode_of, grown
from sleuth.stream.services.job_ownership import Ownership, partition_of
from sleuth.topology import generate, spine_set_members
from sleuth.whatif import attribution
from sleuth.stream.services.slowdown_watch import MAX_IDLE_S, SlowdownWatch, WindowCache, slowdown_incidents

from tests.sim.conftest import SMALL, paused_emulation

from .detection.conftest import emulation

FAULTY = "gpu:h0003/1"


def test_a_job_is_measured_over_its_newest_window_once_its_records_land_further() -> None:
    watch = SlowdownWatch(interval_s=2.0, window=12, sustain=3)
    assert watch.asks("a", 0.0) and watch.measured("a") == -1
    assert watch.window_of("a", None, 0.0) is None  # some rank has no records yet
    assert not watch.asks("a", 1.0) and watch.asks("a", 2.0)
    assert watch.window_of("a", 4, 2.0) == (0, 4)
    watch.done("a", 4)
    assert watch.window_of("a", 30, 4.0) == (19, 30)


def test_a_job_that_stands_still_is_asked_less_and_less_often() -> None:
    watch = SlowdownWatch(interval_s=2.0, window=12, sustain=3)
    watch.done("a", 10)
    now, waits = 0.0, []
    for _ in range(8):
        assert watch.window_of("a", 10, now) is None
        wait = next(t for t in range(1, 200) if watch.asks("a", now + t))
        waits.append(wait)
        now += wait
    assert waits == [2, 4, 8, 16, 32, 60, 60, 60] and MAX_IDLE_S == 60
    assert watch.window_of("a", 11, now) == (0, 11)  # it moved again: asked each interval
    assert not watch.asks("a", now + 1.9) and watch.asks("a", now + 2.0)


def test_a_jobs_warmup_iterations_are_never_measured() -> None:
    watch = SlowdownWatch(interval_s=2.0, window=12, sustain=3, warmup=5)
    assert watch.window_of("a", 4, 0.0) is None  # only warm-up iterations have landed
    assert watch.window_of("a", 5, 2.0) == (5, 5)
    watch.done("a", 5)
    assert watch.window_of("a", 30, 4.0) == (19, 30)


def test_a_job_still_warming_up_is_asked_each_interval_while_its_iterations_land() -> None:
    watch = SlowdownWatch(interval_s=1.0, window=12, sustain=3, warmup=5)
    now = 0.0
    for landed in range(5):  # one iteration lands a second: it moves, however few have landed
        assert watch.asks("a", now) and watch.window_of("a", landed, now) is None
        now += 1.0
    assert watch.asks("a", now) and watch.window_of("a", 5, now) == (5, 5)
    watch.done("a", 5)
    assert watch.window_of("a", 5, now + 1.0) is None and watch.asks("a", now + 2.0)
    assert watch.window_of("a", 5, now + 2.0) is None  # it stood still twice: asked again after twice as long
    assert not watch.asks("a", now + 3.9) and watch.asks("a", now + 4.0)


def test_a_window_shorter_than_a_sustained_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="attribution window \\(2 iterations\\) must hold a sustained run of 3"):
        SlowdownWatch(interval_s=1.0, window=2, sustain=3)


def test_the_cache_reads_each_iteration_once_and_forgets_the_old_ones() -> None:
    em = emulation(iterations=8)
    cache = WindowCache()
    assert cache.missing(0, 3) == [0, 1, 2, 3]
    cache.add([0, 1, 2, 3], em.records(iterations=range(4)), em.iterations(iterations=range(4)), em.job_spec())
    assert cache.missing(2, 5) == [4, 5]
    cache.add([4, 5], em.records(iterations=[4, 5]), em.iterations(iterations=[4, 5]), em.job_spec())
    records, iterations = cache.window(2, 5)
    assert len(records) == len(em.records(iterations=range(2, 6)))
    assert sorted(set(iterations["iteration"].tolist())) == [2, 3, 4, 5]
    assert cache.missing(0, 1) == [0, 1]  # dropped: older than the window


def reversed_strings(batch):
    """The same records with their string table in reverse order (as another read may number them)."""
    flip = np.arange(len(batch.strings))[::-1]
    columns = {f.name: flip[batch[f.name]].astype(batch[f.name].dtype) if f.is_string and len(batch) else batch[f.name]
               for f in type(batch).FIELDS}
    return type(batch)(columns, batch.strings[::-1])


def test_a_stretch_of_the_window_numbers_its_strings_as_the_whole_window_does() -> None:
    em = emulation(iterations=6)
    cache = WindowCache()
    for k in range(6):  # one read a round: each iteration's batch with a string table of its own
        records, iterations = em.records(iterations=[k]), em.iterations(iterations=[k])
        cache.add([k], *((reversed_strings(records), reversed_strings(iterations)) if k % 2 else (records, iterations)),
                  em.job_spec())
    whole, whole_iterations = cache.window(1, 5)
    for wanted in ([2, 3], [4, 5], [5], [1, 2]):  # from a batch numbered otherwise than the first, or not
        records, iterations = cache.held(1, 5, wanted)
        expected = whole.take(np.flatnonzero(np.isin(whole["iteration"], wanted)))
        assert records.strings == expected.strings
        assert all(np.array_equal(records[f.name], expected[f.name]) for f in type(records).FIELDS)
        expected_rows = whole_iterations.take(np.flatnonzero(np.isin(whole_iterations["iteration"], wanted)))
        assert iterations.strings == expected_rows.strings
        assert all(np.array_equal(iterations[f.name], expected_rows[f.name]) for f in type(iterations).FIELDS)


def rounds(em, *, through: int, window: int = 12, warmup: int = 5, analysed: list[int] | None = None,
           landing: int = 1, lost: float = 0.0, at: tuple[int, ...] = ()) -> tuple[list, list[int]]:
    """Run the agent's rounds as ``landing`` iterations land at a time (``at``: the iteration landed
    through at each round instead); (raised incidents, the round each was opened in). ``analysed`` gets
    each round that ran the full analysis (it returned incidents); ``lost``: the share of each round's
    records lost at random before they land."""
    losing = np.random.default_rng(17)
    settings = Settings(attribution_window=window)
    watch = SlowdownWatch(interval_s=1.0, window=window, sustain=settings.attribution_sustain, warmup=warmup)
    cache, spec, topology = WindowCache(), em.job_spec(), em.scenario.topology
    raised: dict[str, object] = {}
    opened: list[int] = []
    for landed in at or sorted({*range(warmup + landing - 1, through + 1, landing), through}):
        span = watch.window_of(em.scenario.job, landed, float(landed))
        assert span is not None
        wanted = cache.missing(*span)
        records = em.records(iterations=wanted)
        records = records.take(np.flatnonzero(losing.random(len(records)) >= lost))
        assert cache.add(wanted, records, em.iterations(iterations=wanted), spec) == 0 or lost
        found = slowdown_incidents(cache, spec, *span, topology=topology, settings=settings)
        if found and analysed is not None:
            analysed.append(landed)
        for incident in found:
            old = episode_of(incident, [Raised.of(i) for i in raised.values()], window=settings.localizer_window)
            if old is None:
                raised[incident.incident] = incident
                opened.append(landed)
            else:
                raised[old.incident] = grown(raised[old.incident], incident) or raised[old.incident]
        watch.done(em.scenario.job, span[1])
    return list(raised.values()), opened


def test_a_gpu_slow_from_the_first_step_is_one_incident_opened_once_sustained_and_grown_a_window_at_a_time() -> None:
    [incident], opened = rounds(emulation(f"{FAULTY},slow=1.5,start=0", iterations=30), through=29)
    assert incident.suspects[0].device == FAULTY
    assert opened == [7]  # the round that saw three iterations landed past the five of warm-up
    assert incident.iterations[0] == 5 and incident.iterations[-1] == 19  # analysed at 7, then 12 later
    assert incident.attribution is not None and incident.attribution.trigger == "slowdown"


def test_a_spine_slow_from_the_first_step_under_most_rings_is_one_network_incident_naming_the_spine_layer() -> None:
    # tp8 pp1 dp8: most rails' rings hash a hop onto spine s2, 4x slow from the first step; a pause
    # in iteration 8 of the first window costs that one more than the spine costs them all.
    em = Emulation(Scenario(topology=generate("fattree:hosts=8,gpus=8,pod=2,spines=4"),
                            layout=ParallelLayout(64, 8, 1, 8), model=SMALL, microbatches=4, iterations=20,
                            faults=(parse_fault("spine:s2,slow=4"),), seed=5, job="spine"))
    [incident], opened = rounds(em, through=19)
    assert incident.cause.value == "network" and opened == [9]
    assert "spine:s2" in (spine_set_members(incident.suspects[0].device) or ())  # ECMP: the layer is the finest


def test_a_gpu_slow_from_the_first_step_on_hosts_whose_clocks_disagree_is_read_as_on_one_clock() -> None:
    em = emulation(f"{FAULTY},slow=1.5,start=0", iterations=30)
    skewed = Emulation(dataclasses.replace(em.scenario, host_clocks_ns={"h0001": 30_000_000, "h0002": 400_000_000}))
    [incident], opened = rounds(skewed, through=29)
    [synced], synced_opened = rounds(em, through=29)
    assert incident.suspects[0].device == FAULTY and opened == synced_opened
    assert incident.iterations == synced.iterations and incident.cause == synced.cause
    assert abs(incident.attribution.slowdown / synced.attribution.slowdown - 1) < 0.01


def test_a_gpu_slow_from_the_first_step_whose_records_lose_one_in_a_hundred_is_read_as_the_whole_job() -> None:
    em = emulation(f"{FAULTY},slow=1.5,start=0", iterations=30)
    [incident], opened = rounds(em, through=29, lost=0.01)
    [whole], whole_opened = rounds(em, through=29)
    assert incident.suspects[0].device == FAULTY and opened == whole_opened
    assert incident.iterations == whole.iterations
    assert abs(incident.attribution.slowdown / whole.attribution.slowdown - 1) < 0.02


def test_a_second_fault_joining_a_sustained_slowdown_is_analysed_once_it_is_sustained_not_a_window_later() -> None:
    # The job pays for a slow GPU from the first step; a second GPU breaks at 14: what it pays steps
    # up past the level analysed at 7, and the round that sees three such iterations analyses it.
    analysed: list[int] = []
    incidents, opened = rounds(emulation(f"{FAULTY},slow=1.3,start=0", "gpu:h0001/2,slow=2,start=14", iterations=24),
                               through=23, analysed=analysed)
    assert opened == [7, 16]
    assert analysed == [7, 16]  # the new level is the one analysed: not again until a window later
    assert [i.suspects[0].device for i in incidents] == [FAULTY, "gpu:h0001/2"]
    # Attributed over the iterations past the step: the second fault's incident starts where it broke
    # (over the whole run it spanned 5-16, claiming iterations the first fault alone paid for).
    assert incidents[1].iterations == (14, 15, 16)


def test_a_step_in_the_window_is_attributed_over_its_own_iterations_not_diluted_by_the_ones_before() -> None:
    # The opening analysis replays the episode only (the iterations before it as peers): what the
    # incident says the job pays is the episode's, as its impact over the same iterations says.
    [incident], opened = rounds(emulation(f"{FAULTY},slow=1.5,start=12", iterations=16), through=15)
    assert opened == [14] and incident.suspects[0].device == FAULTY
    assert incident.attribution is not None
    assert incident.attribution.slowdown == pytest.approx(incident.impact.slowdown, rel=0.05)  # diluted: 1.10 against 1.22


def prepared_iterations(monkeypatch) -> list[int]:
    """The iterations the replay preparations from now on prepare, each once per preparation."""
    prepared: list[int] = []
    real = attribution._prepare

    def counted(records, *args, **kwargs):
        prepared.extend(np.unique(records["iteration"]).tolist())
        return real(records, *args, **kwargs)

    monkeypatch.setattr(attribution, "_prepare", counted)
    return prepared


def test_the_round_that_opens_an_incident_prepares_each_of_its_iterations_once(monkeypatch) -> None:
    # It measures its newest iteration and attributes the episode that iteration completes from one
    # preparation (the 8,192-GPU streaming latency: a preparation is most of a round).
    prepared = prepared_iterations(monkeypatch)
    [incident], opened = rounds(emulation(f"{FAULTY},slow=1.5,start=12", iterations=16), through=15)
    assert opened == [14] and incident.suspects[0].device == FAULTY
    assert prepared.count(14) == 1 and prepared.count(12) == prepared.count(13) == 2  # measured, then attributed


def test_a_localizer_behind_by_a_few_iterations_measures_them_within_the_analysis_they_open(monkeypatch) -> None:
    # Three iterations land between two rounds: the round whose iterations go on at the level of
    # the one before them, and so open the episode, measures them within its attribution.
    em = emulation(f"{FAULTY},slow=1.5,start=12", iterations=18)
    [one_by_one], _ = rounds(em, through=17)
    prepared = prepared_iterations(monkeypatch)
    [incident], opened = rounds(em, through=17, landing=3)
    assert opened == [16] and incident.suspects[0].device == FAULTY
    # 11-13 landed together and were measured (12 and 13 over the line: not yet sustained); 14-16
    # went on at 13's level, and the round that opened the episode prepared them once.
    assert [prepared.count(i) for i in range(11, 17)] == [1, 2, 2, 1, 1, 1], prepared
    assert incident.attribution.slowdown == pytest.approx(one_by_one.attribution.slowdown, rel=0.01)


@pytest.mark.parametrize("seed", [4, 5, 8])
def test_a_gpu_failing_for_a_while_amid_pauses_that_go_on_is_named_over_its_own_iterations_alone(seed) -> None:
    # Pauses on one rank at a time make the job pay in every iteration; the GPU is twice as slow
    # in 15-24 only. Its incident ends there, not growing with the pauses that go on after it, and
    # the pauses, first analysed on three or four iterations, blame no device (seeds 5 and 8 once
    # named one: a rank that paused twice of three).
    incidents, _ = rounds(paused_emulation("gpu:h0005/1,slow=2,start=15,end=25", seed=seed, iterations=36), through=35)
    [gpu] = [i for i in incidents if i.suspects and i.suspects[0].device == "gpu:h0005/1"]
    assert set(range(15, 25)) <= set(gpu.iterations) <= set(range(13, 27)), gpu.iterations
    assert all(not i.suspects for i in incidents if i is not gpu), incidents


class _Recorded:
    """A real job's records folder, read as ``rounds`` reads an emulation."""

    def __init__(self, folder: Path) -> None:
        from sleuth.jobspec import JobSpec
        from sleuth.records_folder import read_records
        from sleuth.topology.job_fabric import single_leaf

        self._records, self._rows = read_records(folder)
        self._spec = JobSpec.read(folder)
        self.scenario = SimpleNamespace(job=self._spec.job, topology=single_leaf(self._spec))

    def job_spec(self):
        return self._spec

    def records(self, *, iterations):
        return self._records.take(np.flatnonzero(np.isin(self._records["iteration"], iterations)))

    def iterations(self, *, iterations):
        return self._rows.take(np.flatnonzero(np.isin(self._rows["iteration"], iterations)))


def test_a_real_jobs_gpu_the_costliest_of_its_first_three_slow_steps_opens_its_incident_not_pauses() -> None:
    """A real 4-rank DDP job streamed through the stack, rank 3 three times slower from iteration 20,
    19 costing 9% by the machine: the round that saw 19-21 found rank 3 the costliest of both paying
    iterations, too few to set one of four ranks apart from chance, each paying in one gap of its
    work, and read scattered pauses; the GPU's incident opened a window later beside it. Pauses
    resting on one rank, too few to tell, wait for the next round, which names the GPU."""
    job = _Recorded(Path(__file__).parents[1] / "localizer" / "gloo_logger" / "ddp-late-streamed")
    [incident], opened = rounds(job, through=59)
    assert str(incident.cause) == "compute" and incident.suspects[0].device == "gpu:vm/3", incident
    assert opened == [22] and incident.iterations[0] == 19


@pytest.mark.parametrize("landing", [3, 4, 5])
def test_a_real_jobs_costly_batches_that_one_rank_drew_in_three_of_four_steps_blame_no_gpu(landing) -> None:
    """A real 4-rank DDP job streamed through the stack whose costly batches move between the ranks
    (``ddp_job.py --mode seqlen``): over 53-58 rank 3 drew three of the four, so its median there
    stood far above the others' (which, each a run of cheap batches, barely spread), and the rounds
    blamed its GPU. It ran at its peers' pace in 56, between two it ran long in, as no slow device
    does: its compute must stand above the others' in those iterations too."""
    job = _Recorded(Path(__file__).parents[1] / "localizer" / "gloo_logger" / "ddp-seqlen-streamed")
    raised, _ = rounds(job, through=59, landing=landing)
    assert raised and not [i for i in raised if i.suspects], [(i.incident, i.suspects) for i in raised]


@pytest.mark.parametrize("at", [(11, 28, 42, 59), (8, 11, 14, 17, 20, 23, 26, 29, 32, 35, 38, 41, 44, 47, 50, 53, 56, 59)])
def test_a_real_jobs_costly_batches_streamed_again_blame_no_gpu(at) -> None:
    """The same job streamed again (``ddp-seqlen-streamed-2``), the rounds landing as they did live
    (11, 28, 42, 59), and every third iteration: over 53-58 rank 3 drew three of the four
    costly batches the job paid for and ran at its peers' pace in 54-56, and its compute in the
    paying steps alone stood above the others' by Mann-Whitney: its GPU was paged. A slow device
    slows every step from the first to the last; measured over all of them, no rank stands apart."""
    job = _Recorded(Path(__file__).parents[1] / "localizer" / "gloo_logger" / "ddp-seqlen-streamed-2")
    raised, _ = rounds(job, through=59, at=at)
    assert raised and not [i for i in raised if i.suspects], [(i.incident, i.suspects) for i in raised]


def test_a_clean_job_raises_nothing() -> None:
    incidents, _ = rounds(emulation(iterations=20), through=19)
    assert incidents == []


def test_a_job_whose_progress_stood_still_for_the_idle_time_is_handed_back_once_and_resumes() -> None:
    watch = SlowdownWatch(interval_s=2.0, window=12, sustain=3, idle_s=100.0)
    assert watch.window_of("a", 10, 0.0) == (0, 10) and watch.window_of("b", 10, 0.0) == (0, 10)
    watch.done("a", 10)
    watch.done("b", 10)
    assert watch.window_of("a", 10, 60.0) is None and watch.window_of("b", 20, 60.0) == (9, 20)
    assert watch.idle(100.0) == []
    assert watch.idle(101.0) == ["a"] and watch.idle(500.0) == ["b"]  # each handed back once
    assert watch.idle(900.0) == [] and watch.measured("a") == 10  # a finished job is not measured again
    assert watch.window_of("a", 11, 950.0) == (0, 11)  # it resumed: measured again, idle from now on
    assert watch.idle(1000.0) == [] and watch.idle(1051.0) == ["a"]


class FakeClickHouse:
    """Answers the queries of a round: the active jobs (``jobs``: job -> the end of its newest
    iteration, on its clock; each of one rank), and that rank's newest iteration (``newest``)."""

    def __init__(self, jobs: dict[str, int] | None = None) -> None:
        self.jobs = {"a": 0} if jobs is None else jobs
        self.newest = 11
        self.asked: list[str] = []  # the jobs whose progress was asked, in order

    def execute(self, query: str, params=None):
        if "system.parts" in query:
            return [(datetime.date(1970, 1, 1),)] if self.jobs else []
        if ".jobs FINAL" in query:
            return [(job, 1, last_ns) for job, last_ns in self.jobs.items()]
        assert "max(iteration)" in query, query
        self.asked.append(params["job"])
        return [(0, self.newest)]


def agent_on(client: FakeClickHouse, now: list[float], **settings):
    from sleuth.stream.services.localizer_agent import LocalizerAgent

    return LocalizerAgent(Settings(**settings), client=client, producer=object(), clock=lambda: now[0],
                          wall_clock_ns=lambda: 1_800_000_000 * 10**9)


EVERY_JOB = Ownership.of(1, [0])


def test_the_localizer_drops_an_idle_jobs_window_and_a_gathering_never_localized() -> None:
    now = [0.0]
    agent = agent_on(FakeClickHouse(), now, job_idle_s=100.0)
    agent.watch.window_of("a", 10, 0.0)
    agent.watch.done("a", 10)
    agent._windows["a"] = WindowCache()
    for now[0] in (50.0, 100.0):
        agent._measure_round(EVERY_JOB)
        assert "a" in agent._windows  # idle, but not for long enough yet
    now[0] = 161.0  # asked every MAX_IDLE_S at most: this round finds it idle over 100 s
    agent._measure_round(EVERY_JOB)
    assert "a" not in agent._windows

    agent.gatherer.add("a", 12, now=200.0)
    agent.gatherer.add("b", 3, now=250.0)
    assert agent.gatherer.stale(300.0, idle_s=100.0) == [] and len(agent.gatherer) == 2
    [given_up] = agent.gatherer.stale(301.0, idle_s=100.0)
    assert given_up.job == "a" and list(agent.gatherer.due(1000.0)) == ["b"]


def test_two_localizers_of_one_group_measure_disjoint_jobs_each_the_ones_its_partitions_hold() -> None:
    jobs = [f"job-{i}" for i in range(12)]
    now = [0.0]
    asked = []
    for owned in ([0], [1]):
        client = FakeClickHouse({job: 0 for job in jobs})
        agent_on(client, now)._measure_round(Ownership.of(2, owned))
        asked.append(set(client.asked))
    assert asked[0] and asked[1] and not asked[0] & asked[1] and asked[0] | asked[1] == set(jobs)
    assert {job for job in jobs if partition_of(job, 2) == 0} == asked[0]


def test_a_job_idle_for_the_idle_time_before_the_newest_one_is_not_measured() -> None:
    # Job clocks: an emulated job's starts at 0, far behind the wall clock; the newest iteration sets now.
    client = FakeClickHouse({"running": 500 * 10**9, "recent": 401 * 10**9, "finished": 399 * 10**9})
    agent = agent_on(client, [0.0], job_idle_s=100.0)
    agent._measure_round(EVERY_JOB)
    assert sorted(client.asked) == ["recent", "running"]


def test_a_round_that_cannot_read_the_groups_assignment_is_skipped_and_the_agent_goes_on() -> None:
    class Unstarted:  # faust's consumer before its thread runs
        @property
        def consumer(self):
            raise RuntimeError("Consumer thread not yet started")

    agent = agent_on(FakeClickHouse(), [0.0])
    agent._app = Unstarted()
    asyncio.run(agent._measure_due())
    assert agent.rounds == 0 and agent.ownership is None
