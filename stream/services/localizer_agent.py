"""The streaming localizer (``sleuth localizer``): irregular iterations in, incidents out.

A faust-streaming agent consumes ``SLEUTH_IRREGULARITIES_TOPIC`` (JSON, keyed by job, so one
job's irregularities all reach one localizer of the ``SLEUTH_LOCALIZER_GROUP``) and gathers them
per job (``episodes.Gatherer``: ``SLEUTH_LOCALIZER_DEBOUNCE_S`` after a job's first one). When a
job's gathering is due, the agent

1. drops the iterations an incident already spans (replays), per ``episodes``;
2. waits until the records of every rank have landed in ClickHouse ``SLEUTH_ATTRIBUTION_SUSTAIN``
   iterations past the last gathered one (``sleuth.storage.source.landed_through``), re-checking
   every ``retry_s``; after ``SLEUTH_LOCALIZER_LAND_TIMEOUT_S`` more it goes on with what has landed;
3. runs :func:`sleuth.localizer.localize` over a :class:`ClickHouseSource` bounded to the landed
   iterations, read on one clock (the hosts' clocks as the job's what-if rounds last read them,
   else as the first gathered iteration's records tell: ``sleuth.whatif.clocks``), on the
   ``SLEUTH_LOCALIZER_TOPOLOGY`` fabric (without one, the job's hosts behind one leaf, as
   ``sleuth localize`` does), each cluster's search kept between the sustained episodes around it,
   as offline (``benign_pauses.localized``);
4. keeps back the benign pauses (``benign_pauses.judge``: brief, cheap, not recurring, which the
   iterations after them show; where a search followed a delay into the iteration after the last
   gathered one, the agent waits for the few after that one too, as in step 2), reads as the data's
   a compute incident whose work or pauses move between the ranks, and a hardware one whose
   sustained episodes read a non-hardware cause as that cause, as offline, and raises each other
   incident that does not merely continue a raised one (``episodes``) through the ``IncidentSink``:
   ``SLEUTH_INCIDENTS_TOPIC``, then ClickHouse;
5. acknowledges the gathered Kafka events, so that faust commits their offsets only now: a crash
   before replays them, and step 1 and the continuation rule keep the replay from raising twice.

Besides, every ``SLEUTH_ATTRIBUTION_INTERVAL_S`` the agent measures what each job it owns pays
over its newest landed iterations (``slowdown_watch``): a sustained what-if slowdown opens an
incident however it arrived (from the first step, a ramp, a moderate step no iteration shows),
localized from the ranks the attribution names. It owns a job while the partition of the
irregularities topic the job's key goes to is assigned to it (``job_ownership``), and measures
only those with an iteration within ``SLEUTH_JOB_IDLE_S`` of the newest (``progress.active_jobs``):
each job is measured by one member of the group, and finished jobs cost nothing. When the
assignment moves, the new owner starts the job's watch from what ClickHouse holds. An incident
of either kind that continues a raised one's episode grows it under its id (``episodes.grown``)
instead of opening another.

Latency: for an irregular iteration's incident, from the arrival of its first irregular iteration
at this agent to the incident written, debounce included; for a slowdown's, from the start of the
round that found its records landed to the incident written (the records landed at most one
interval before). Each is logged, kept in ``latencies_s`` and handed to ``on_incident`` (called in
the localization thread), the place for a metrics histogram.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sleuth import metrics
from sleuth.errors import ConfigError, SleuthError, UnknownJob
from sleuth.localizer import Incident
from sleuth.localizer.episodes import Raised, episode_of, grown
from sleuth.settings import Settings
from sleuth.storage.incidents import ClickHouseIncidentStore
from sleuth.storage.pauses import ClickHousePauseStore
from sleuth.storage.progress import active_jobs
from sleuth.storage.source import ClickHouseSource, landed_through
from sleuth.stores import Bus, PauseStore
from sleuth.stream import connect
from sleuth.stream.services.benign_pauses import localized, settled_through, settling
from sleuth.stream.detection.publish import decode
from sleuth.stream.services.episodes import Gatherer, Pending, not_localized
from sleuth.stream.services.faust_app import assigned_partitions, create_app, run_in_own_loop, serve_until
from sleuth.stream.services.incident_sink import IncidentSink
from sleuth.stream.services.job_ownership import Ownership
from sleuth.stream.services.slowdown_watch import SlowdownWatch, WindowCache, slowdown_incidents
from sleuth.topology import Topology, load_topology
from sleuth.topology.job_fabric import single_leaf
from sleuth.whatif.clocks import ClockOffsets, OnOneClockSource, clock_offsets

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["LocalizerAgent", "cluster_topology"]

_log = logging.getLogger(__name__)

#: ``on_incident(incident, latency_s)``
IncidentCallback = Callable[[Incident, float], None]


def cluster_topology(settings: Settings) -> Topology | None:
    """The fabric ``SLEUTH_LOCALIZER_TOPOLOGY`` names (None when unset); fails naming the setting."""
    if not settings.localizer_topology:
        return None
    try:
        return load_topology(settings.localizer_topology)
    except OSError as error:
        raise ConfigError(
            f"SLEUTH_LOCALIZER_TOPOLOGY={settings.localizer_topology!r}: cannot read: {error.strerror or error}"
        ) from None


class LocalizerAgent:
    """One member of the localizers' faust app; ``run`` until ``stop`` is set."""

    def __init__(self, settings: Settings, *, client: Client, producer: Bus | None = None, topology: Topology | None = None,
                 on_incident: IncidentCallback | None = None, retry_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic, pauses: PauseStore | None = None,
                 wall_clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.settings = settings
        self.client = client
        self.topology = topology
        self.on_incident = on_incident
        self.retry_s = retry_s
        self.clock = clock
        self.wall_clock_ns = wall_clock_ns
        self.gatherer = Gatherer(debounce_s=settings.localizer_debounce_s)
        self._own_producer = producer is None
        self.sink = IncidentSink(ClickHouseIncidentStore(client, settings.clickhouse_database),
                                 bus=producer or connect.kafka_producer(settings), topic=settings.incidents_topic)
        self.received = 0  # irregularity messages taken from Kafka
        self.handled = 0  # of those, acknowledged after their gathering was dealt with
        self.replayed = 0  # irregular iterations dropped: an incident spans them already
        self.continued = 0  # incidents not raised: they continue a raised one and add no iteration to it
        self.grew = 0  # incidents not raised: they grew the raised one whose episode they continue
        self.rounds = 0  # what-if rounds over the active jobs this agent owns
        self.watch = SlowdownWatch(interval_s=settings.attribution_interval_s, window=settings.attribution_window,
                                   sustain=settings.attribution_sustain, warmup=settings.attribution_warmup,
                                   idle_s=settings.job_idle_s)
        self._windows: dict[str, WindowCache] = {}
        self._next_round = 0.0
        self.ownership: Ownership | None = None  # the partitions the last what-if round owned
        self.incidents: list[Incident] = []
        self.pauses: deque[Incident] = deque(maxlen=1_000)  # irregular incidents this agent found benign: not raised
        self.paused: PauseStore = pauses or ClickHousePauseStore(client, settings.clickhouse_database)
        self.latencies_s: deque[float] = deque(maxlen=10_000)
        self._stream: Any = None
        self._app: Any = None

    def run(self, stop: threading.Event) -> None:
        """Consume in this thread (its own event loop) until ``stop`` is set."""
        try:
            run_in_own_loop(lambda: self._serve(stop))
        finally:
            if self._own_producer:
                self.sink.bus.close(timeout=10)

    async def _serve(self, stop: threading.Event) -> None:
        await serve_until(stop, self._build_app, name="localizer", tick=self._tick)

    async def _tick(self) -> None:
        await self._localize_due()
        await self._measure_due()

    def _build_app(self, loop: asyncio.AbstractEventLoop, datadir: str) -> Any:
        settings = self.settings
        app = self._app = create_app(settings, settings.localizer_group, loop=loop, datadir=datadir)
        topic = app.topic(settings.irregularities_topic, key_serializer="raw", value_serializer="raw")

        async def gather(stream: Any) -> None:
            manual = self._stream = stream.noack()  # acknowledged in ``_localize_due``, once handled
            async for event in manual.events():
                self.received += 1
                try:
                    found = decode(event.value)
                    job, iteration = str(found["job"]), int(found["iteration"])
                except Exception as error:  # a foreign producer or a bug: skip it, never stall the partition
                    _log.error("skipping an undecodable irregularity at %s:%s: %s",
                               event.message.partition, event.message.offset, error)
                    await manual.ack(event)
                    self.handled += 1
                    continue
                self.gatherer.add(job, iteration, now=self.clock(), token=event)

        app.agent(topic, name=f"{settings.localizer_group}.localize")(gather)
        return app

    async def _localize_due(self) -> None:
        loop = asyncio.get_running_loop()
        for pending in self.gatherer.stale(self.clock(), idle_s=self.settings.job_idle_s):
            _log.error("job %s: giving up %d irregular iterations not localized for over %.0f s (SLEUTH_JOB_IDLE_S)",
                       pending.job, len(pending.arrivals), self.settings.job_idle_s)
            for event in pending.tokens:
                await self._stream.ack(event)
            self.handled += len(pending.tokens)
        for job in self.gatherer.due(self.clock()):
            pending = self.gatherer.take(job)
            try:
                # ClickHouse queries and the search are blocking work: off the loop, which heartbeats.
                done = await loop.run_in_executor(None, self._handle, pending)
            except Exception as error:
                _log.warning("localizing job %s failed, retrying in %.1fs: %s", job, 10 * self.retry_s, error)
                self.gatherer.put_back(pending, not_before=self.clock() + 10 * self.retry_s)
                continue
            if not done:
                self.gatherer.put_back(pending, not_before=self.clock() + self.retry_s)
                continue
            for event in pending.tokens:
                await self._stream.ack(event)
            self.handled += len(pending.tokens)

    def _handle(self, pending: Pending) -> bool:
        """Localize one job's gathering; False when its records have not landed yet (try again later)."""
        settings, db, job = self.settings, self.settings.clickhouse_database, pending.job
        raised, paused = self.sink.raised(job), self.paused.paused(job)
        fresh = not_localized(pending.iterations, [*raised, *paused])
        self.replayed += len(pending.arrivals) - len(fresh)
        # A starting job's irregular iterations are its warm-up's, not a straggler's (``SLEUTH_ATTRIBUTION_WARMUP``).
        fresh = [i for i in fresh if i >= settings.attribution_warmup]
        if not fresh:
            return True
        try:
            stored = ClickHouseSource(self.client, db, job)
        except UnknownJob as error:
            _log.error("dropping %d irregular iterations: %s", len(fresh), error)
            return True
        through = landed_through(self.client, db, job, world=stored.job_spec().world, since=fresh[0])
        # The iterations after the last show whether a pause recurs or goes on (benign_pauses.judge).
        settles = max(settled_through(fresh[-1], settings), pending.settle_through)
        stopped = through is None or through < settles
        if stopped:
            waited = self.clock() - pending.first_arrival - settings.localizer_debounce_s
            if waited < settings.localizer_land_timeout_s:
                return False
            _log.warning("job %s: records of iterations %s..%s (and those through %s, which settle them) still not "
                         "landed for every rank after %.0f s; localizing what has (through %s)", job, fresh[0],
                         fresh[-1], settles, waited, through)
            if through is not None:
                fresh = [i for i in fresh if i <= through]
        stored.through = through
        if not fresh:
            return True
        source = OnOneClockSource(stored, self._clocks(job, stored, fresh[0]))
        named = {device for r in raised for device in r.tops} | {p.top for p in paused if p.top}
        try:
            judged = localized(source, fresh, topology=self.topology or single_leaf(source.job_spec()),
                               settings=settings, through=through, named_elsewhere=named, stopped=stopped)
        except SleuthError as error:  # e.g. a job's GPU missing from the topology: retrying cannot help
            _log.error("job %s: cannot localize iterations %s..%s: %s", job, fresh[0], fresh[-1], error)
            return True
        # A search that followed a delay into the iteration after the last is settled later: wait for it
        # as for the gathered ones, rather than page its incident unjudged.
        settle = max((settling(incident, settings) for incident, _ in judged), default=0)
        if not stopped and through is not None and settle > through:
            pending.settle_through = settle
            return False
        for incident, reading in judged:
            if reading is None:
                self.paused.record(incident)
                self.pauses.append(incident)
                metrics.BENIGN_PAUSES.inc()
                _log.info("job %s: iterations %s are a benign pause (top suspect %s); recorded, not paged", job,
                          list(incident.iterations), incident.suspects[0].device if incident.suspects else "-")
                continue
            self._raise(reading, raised, since=min(pending.arrivals[i] for i in reading.iterations))
        return True

    def _clocks(self, job: str, source: ClickHouseSource, iteration: int) -> ClockOffsets:
        """``job``'s hosts' clocks: as its what-if rounds last read them, else as ``iteration``'s records tell."""
        cache = self._windows.get(job)
        if cache is not None and cache.clocks.across:
            return cache.clocks
        return clock_offsets(source.ranks_records(None, iterations=[iteration]), source.job_spec())

    async def _measure_due(self) -> None:
        now = self.clock()
        if now < self._next_round:
            return
        self._next_round = now + self.settings.attribution_interval_s
        try:
            ownership = self._ownership()
            if ownership is None:  # not yet told the topic's partitions: the next round asks again
                return
            await asyncio.get_running_loop().run_in_executor(None, self._measure_round, ownership)
        except Exception as error:  # ClickHouse or the group away: the next round asks again
            _log.warning("what-if round failed, next in %.1fs: %s", self.settings.attribution_interval_s, error)

    def _ownership(self) -> Ownership | None:
        """The partitions of the irregularities topic assigned to this agent now (None before the
        topic's partitions are known)."""
        assigned = assigned_partitions(self._app, self.settings.irregularities_topic)
        return None if assigned is None else Ownership.of(*assigned)

    def _measure_round(self, ownership: Ownership) -> None:
        """One what-if round: every active job of this agent's whose records landed further since its last one."""
        self.rounds += 1
        self.ownership = ownership
        started, db = self.clock(), self.settings.clickhouse_database
        jobs = {job: world for job, world in active_jobs(self.client, db, idle_s=self.settings.job_idle_s,
                                                         now_ns=self.wall_clock_ns()).items() if ownership.owns(job)}
        # A job that went idle or to another member is forgotten: if it comes back, its watch starts
        # from what ClickHouse holds then, as it does at the member that took it over.
        self.watch.forget(set(jobs))
        for job in (set(self._windows) - set(jobs)) | set(self.watch.idle(started)):
            self._windows.pop(job, None)
        for job, world in jobs.items():
            if not self.watch.asks(job, started):
                continue
            landed = landed_through(self.client, db, job, world=world, since=self.watch.measured(job) + 1)
            span = self.watch.window_of(job, landed, started)
            if span is None:
                continue
            try:
                self._measure(job, *span, started=started)
            except SleuthError as error:  # records the replay cannot order, a GPU off the fabric: not retried
                _log.error("job %s: what-if over iterations %s..%s failed: %s", job, span[0], span[1], error)
            self.watch.done(job, span[1])

    def _measure(self, job: str, first: int, last: int, *, started: float) -> None:
        """Replay ``job``'s window [first, last]; when a sustained slowdown is in it, raise its incident."""
        settings = self.settings
        source = ClickHouseSource(self.client, settings.clickhouse_database, job, through=last)
        cache = self._windows.setdefault(job, WindowCache())
        wanted = cache.missing(first, last)
        spec = source.job_spec()
        if wanted:
            filled = cache.add(wanted, source.ranks_records(None, iterations=wanted), source.iterations(iterations=wanted),
                               spec)
            if filled:
                _log.warning("job %s: %d records of iterations %s..%s were missing from their groups (a collective "
                             "without one of its ranks, a send without its receive); filled in from their groups",
                             job, filled, wanted[0], wanted[-1])
        incidents = slowdown_incidents(cache, spec, first, last, topology=self.topology or single_leaf(spec),
                                       settings=self.settings)
        if not incidents:
            return
        raised = self.sink.raised(job)
        for incident in incidents:
            self._raise(incident, raised, since=started)

    def _raise(self, incident: Incident, raised: list[Raised], *, since: float) -> None:
        """Write ``incident``, or grow the raised incident whose episode it continues."""
        old = episode_of(incident, raised, window=self.settings.localizer_window)
        if old is not None:
            merged = grown(self.sink.incident(incident.job, old.incident), incident)
            if merged is None:
                self.continued += 1
                _log.info("job %s: iterations %s continue incident %s; nothing new", incident.job,
                          list(incident.iterations), old.incident)
                return
            self.sink.write(merged)
            raised[raised.index(old)] = Raised.of(merged)
            self.grew += 1
            _log.info("incident %s grows to iterations %s..%s", merged.incident, merged.iterations[0], merged.iterations[-1])
            return
        self.sink.write(incident)
        raised.append(Raised.of(incident))
        latency = self.clock() - since
        self.incidents.append(incident)
        self.latencies_s.append(latency)
        _log.info("incident %s: %s, top suspect %s; %.2f s after it could be seen", incident.incident,
                  incident.cause, incident.suspects[0].device if incident.suspects else "-", latency)
        if self.on_incident is not None:
            self.on_incident(incident, latency)
