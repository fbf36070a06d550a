"""The cluster emulator: hybrid-parallel jobs with injected faults and ground truth.

Modules, one job each:

* :mod:`~sleuth.sim.model` — the model's shape and what each operator costs (FLOPs, bytes)
* :mod:`~sleuth.sim.faults` — injected faults, their time profiles and the ``--fault`` grammar
* :mod:`~sleuth.sim.network` — transfer times over the topology and which units a fault crosses
* :mod:`~sleuth.sim.schedule` — the 1F1B schedule and a walk order over all stages
* :mod:`~sleuth.sim.plan` — per-stage programs, slots (records) and index arrays
* :mod:`~sleuth.sim.engine` — the vectorized causal timing engine
* :mod:`~sleuth.sim.scenario` — :class:`Scenario` and :class:`Emulation` (a lazy record source + truth)
* :mod:`~sleuth.sim.output` — writing records, iterations, job spec and truth to a folder
* :mod:`~sleuth.sim.suites` — named, seeded scenario sets
* :mod:`~sleuth.sim.live` — emulated loggers streaming to the collector over gRPC
* :mod:`~sleuth.sim.training_rows` — training rows for the abnormal-operator forest from emulated scenarios
"""

from sleuth.sim.engine import Timing
from sleuth.sim.faults import FAULT_GRAMMAR, Fault, FaultKind, Profile, parse_fault
from sleuth.sim.model import ModelSpec
from sleuth.sim.output import write_emulation
from sleuth.sim.scenario import Emulation, GroundTruth, IterationTruth, Scenario
from sleuth.sim.suites import SUITES, suite

#: The emulator as a :class:`sleuth.sources.RecordSource`.
EmulatedSource = Emulation

__all__ = [
    "FAULT_GRAMMAR",
    "SUITES",
    "EmulatedSource",
    "Emulation",
    "Fault",
    "FaultKind",
    "GroundTruth",
    "IterationTruth",
    "ModelSpec",
    "Profile",
    "Scenario",
    "Timing",
    "parse_fault",
    "suite",
    "write_emulation",
]
