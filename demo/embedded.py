"""The demo with no services: the logger writes Parquet into a folder, and detection and
localization run in this process on that folder (or, for the emulated job, on the emulation
itself, which is a ``RecordSource`` that materializes only the ranks the search fetches)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sleuth.records_folder import read_records
from sleuth.settings import Settings
from sleuth.topology.job_fabric import single_leaf
from sleuth.jobspec import JobSpec
from sleuth.localizer import localize
from sleuth.localizer.incident import Incident
from sleuth.localizer.offline import localize_records
from sleuth.sim import Emulation
from sleuth.sources import MemorySource, RecordSource
from sleuth.stream.detection import irregular_iterations
from sleuth.topology import Routing, Topology

from sleuth.demo.cases import RealJob, SpineJob, gpu_of_rank

if TYPE_CHECKING:
    from clickhouse_driver import Client

__all__ = ["Outcome", "real_job", "spine_job"]


@dataclass(frozen=True)
class Outcome:
    """One localized demo job: its incidents, the device that was really at fault, and what
    the report needs to redraw them."""

    job: str
    truth: str
    incidents: tuple[Incident, ...]
    source: RecordSource
    topology: Topology
    irregular: tuple[int, ...]
    client: Client | None = None  # the ClickHouse connection ``source`` reads through, on the stack path

    def close(self) -> None:
        """Disconnect from ClickHouse once the report has been drawn (a no-op without a stack)."""
        if self.client is not None:
            self.client.disconnect()

    @property
    def found(self) -> bool:
        """Whether an incident blames hardware with the faulty device as its top suspect."""
        return any(i.cause.hardware and i.suspects and i.suspects[0].device == self.truth for i in self.incidents)


def real_job(case: RealJob, folder: Path, settings: Settings) -> Outcome:
    """Run the training job with ``SLEUTH_LOG_DIR`` set, then localize its folder as ``sleuth localize``
    does: with the what-if attribution (``settings``' line, sustain and warm-up), which sets a
    scattered pause apart from the slowed rank."""
    case.run({"SLEUTH_LOG_DIR": str(folder)})
    records, iterations = read_records(folder)
    spec = JobSpec.read(folder)
    topology = single_leaf(spec)
    found = localize_records(spec, records, iterations, topology=topology, warmup=settings.attribution_warmup,
                             slowdown=settings.attribution_slowdown, sustain=settings.attribution_sustain,
                             window=settings.localizer_window)
    irregular = tuple(sorted({int(i.iteration) for i in found.irregular}))
    return Outcome(case.job, gpu_of_rank(spec, case.rank), found.incidents, MemorySource(spec, records, iterations),
                   topology, irregular)


def spine_job(case: SpineJob) -> Outcome:
    """Emulate the spine fault and localize it on the emulation, δ-irregular iterations only: the
    search fetches the ranks it visits (523 of 4,096), where an attribution would replay them all."""
    scenario = case.scenario()
    return _localized(case.job, case.spine, Emulation(scenario), scenario.topology, routing=case.routing)


def _localized(job: str, truth: str, source: RecordSource, topology: Topology, *, routing: Routing = Routing.ECMP) -> Outcome:
    iterations = source.iterations()
    irregular = irregular_iterations(iterations)
    incidents = localize(source, irregular_iterations=irregular, topology=topology, routing=routing)
    found = tuple(sorted({int(i.iteration) for i in irregular}))
    return Outcome(job, truth, tuple(incidents), source, topology, found)
