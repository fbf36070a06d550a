"""The incident: what the localizer reports, as a frozen dataclass, JSON and ClickHouse rows.

ClickHouse tables (``sleuth.stream.schema``): one ``incidents`` row, one ``incident_details``
row (fetch counts, impact, advice and the whole JSON document), one ``suspects`` row per suspect
and one ``traversals`` row per search step.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from sleuth.localizer.impact import Impact
from sleuth.localizer.search import Step

__all__ = ["Incident", "IncidentCause", "RootOperator", "Suspect"]


class IncidentCause(enum.Enum):
    COMPUTE = "compute"
    NETWORK = "network"
    MIXED = "mixed"  # suspects of both kinds (two concurrent faults, one of each)
    STAGE_IMBALANCE = "stage_imbalance"
    SEQLEN_IMBALANCE = "seqlen_imbalance"

    @property
    def hardware(self) -> bool:
        return self in (IncidentCause.COMPUTE, IncidentCause.NETWORK, IncidentCause.MIXED)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Suspect:
    device: str
    kind: str
    score: float

    def to_dict(self) -> dict:
        return {"device": self.device, "kind": self.kind, "score": round(self.score, 6)}


@dataclass(frozen=True)
class RootOperator:
    """A root operator of one irregular iteration, with its irregularity rate R."""

    iteration: int
    cause: str
    rank: int
    comm: str
    seq: int
    op: str
    ranks: tuple[int, ...]
    rate: float

    def to_dict(self) -> dict:
        return {
            "iteration": self.iteration,
            "cause": self.cause,
            "rank": self.rank,
            "comm": self.comm,
            "seq": self.seq,
            "op": self.op,
            "ranks": list(self.ranks),
            "rate": round(self.rate, 6),
        }


@dataclass(frozen=True)
class Incident:
    job: str
    incident: str
    t_from_ns: int
    t_to_ns: int
    iterations: tuple[int, ...]
    cause: IncidentCause
    suspects: tuple[Suspect, ...]
    roots: tuple[RootOperator, ...]
    traversal: tuple[int, ...]
    steps: tuple[Step, ...]
    ranks_fetched: int
    world: int
    impact: Impact
    advice: str
    seconds: float  # localization time, fetching included

    @property
    def fraction_fetched(self) -> float:
        return self.ranks_fetched / self.world

    def to_dict(self) -> dict:
        return {
            "job": self.job,
            "incident": self.incident,
            "t_from_ns": self.t_from_ns,
            "t_to_ns": self.t_to_ns,
            "iterations": list(self.iterations),
            "cause": self.cause.value,
            "suspects": [s.to_dict() for s in self.suspects],
            "roots": [r.to_dict() for r in self.roots],
            "traversal": list(self.traversal),
            "ranks_fetched": self.ranks_fetched,
            "world": self.world,
            "impact": self.impact.to_dict(),
            "advice": self.advice,
            "seconds": round(self.seconds, 4),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def clickhouse_rows(self, *, created_ns: int) -> dict[str, list[tuple]]:
        """Rows per table, in each table's column order (``sleuth.stream.schema``)."""
        roots = json.dumps([r.to_dict() for r in self.roots])
        return {
            "incidents": [
                (
                    self.job, self.incident, self.t_from_ns, self.t_to_ns, list(self.iterations),
                    self.cause.value, roots, list(self.traversal), self.impact.slowdown, created_ns,
                )
            ],
            "incident_details": [
                (
                    self.job, self.incident, self.ranks_fetched, self.world, self.impact.slowdown,
                    self.impact.gpu_hours_lost, self.advice, self.to_json(), created_ns,
                )
            ],
            "suspects": [
                (self.job, self.incident, s.device, s.kind, s.score, position, created_ns)
                for position, s in enumerate(self.suspects)
            ],
            "traversals": [
                (self.job, self.incident, k, s.rank, s.comm, s.seq, s.iteration, s.action.value, created_ns)
                for k, s in enumerate(self.steps)
            ],
        }
