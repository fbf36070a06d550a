"""An irregular iteration: what the iteration monitor (``sleuth.stream.detection``) publishes on the
irregularities topic, and whose kinds are the time profiles the emulator injects (``sleuth.sim.faults``).

It lives in the shared core, not in detection, so that the emulator names the kinds without
importing the detectors (and their scikit-learn) and the service names them without the emulator.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

__all__ = ["Irregularity", "IrregularityKind"]


class IrregularityKind(enum.StrEnum):
    SPIKE = "spike"
    FLUCTUATION = "fluctuation"
    PERSISTENT = "persistent"


@dataclass(frozen=True)
class Irregularity:
    """One irregular iteration of a job.

    ``baseline_ns``: what the iteration was compared with (the window mean, or the pre-change mean
    for persistent degradation); ``change_point``: this iteration starts a confirmed degradation.
    """

    job: str
    iteration: int
    kind: IrregularityKind
    duration_ns: int
    baseline_ns: int
    t_start_ns: int = 0
    t_end_ns: int = 0
    change_point: bool = False

    @property
    def ratio(self) -> float:
        return self.duration_ns / self.baseline_ns if self.baseline_ns else math.inf

    def to_dict(self) -> dict:
        return {"job": self.job, "iteration": self.iteration, "kind": self.kind.value,
                "duration_ns": self.duration_ns, "baseline_ns": self.baseline_ns, "ratio": round(self.ratio, 6),
                "t_start_ns": self.t_start_ns, "t_end_ns": self.t_end_ns, "change_point": self.change_point}
