"""The incident: what the localizer reports, as a frozen dataclass and JSON.

Its ClickHouse rows are ``sleuth.storage.tables.incident_rows``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sleuth.errors import ConfigError
from sleuth.localizer.impact import Impact
from sleuth.localizer.search import Action, Step

__all__ = ["AttributionSummary", "Incident", "IncidentCause", "RootOperator", "Suspect"]


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
    """A root operator of one irregular iteration, with its irregularity rate R.

    ``iteration`` is the irregular iteration searched; ``ran`` the one the operator ran in (its
    ``seq`` is that iteration's: earlier when the delay came from the end of the one before);
    ``again``: later searched iterations in which the same operator was abnormal again, which
    counted toward its devices' support (``sleuth.localizer.search.Root``).
    """

    iteration: int
    cause: str
    rank: int
    comm: str
    seq: int
    op: str
    ranks: tuple[int, ...]
    rate: float
    ran: int
    again: tuple[int, ...] = ()

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
            "ran": self.ran,
            "again": list(self.again),
        }


@dataclass(frozen=True)
class AttributionSummary:
    """What the what-if attribution (``sleuth.whatif``) says the job pays, carried by an incident.

    ``trigger``: "slowdown" when a sustained S opened the incident, "irregular" when a
    δ-irregular iteration did. ``top_ranks``: (rank, S_w); ``top_types``: (operator type, S_t).
    """

    trigger: str
    slowdown: float
    gpu_hours_lost: float
    top_ranks: tuple[tuple[int, float], ...]
    top_types: tuple[tuple[str, float], ...]
    worker_share: float
    last_stage_share: float | None

    def to_dict(self) -> dict:
        return {
            "trigger": self.trigger,
            "slowdown": round(self.slowdown, 4),
            "gpu_hours_lost": self.gpu_hours_lost,
            "top_ranks": [{"rank": r, "slowdown": round(v, 4)} for r, v in self.top_ranks],
            "top_types": [{"type": t, "slowdown": round(v, 4)} for t, v in self.top_types],
            "worker_share": round(self.worker_share, 4),
            "last_stage_share": None if self.last_stage_share is None else round(self.last_stage_share, 4),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttributionSummary:
        share = data["last_stage_share"]
        return cls(
            str(data["trigger"]), float(data["slowdown"]), float(data["gpu_hours_lost"]),
            tuple((int(x["rank"]), float(x["slowdown"])) for x in data["top_ranks"]),
            tuple((str(x["type"]), float(x["slowdown"])) for x in data["top_types"]),
            float(data["worker_share"]), None if share is None else float(share),
        )


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
    attribution: AttributionSummary | None = None  # what the job pays, when the records were attributed

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
            "steps": [_step_dict(s) for s in self.steps],
            "ranks_fetched": self.ranks_fetched,
            "world": self.world,
            "impact": self.impact.to_dict(),
            "advice": self.advice,
            "seconds": round(self.seconds, 4),
            "attribution": None if self.attribution is None else self.attribution.to_dict(),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "incident") -> Incident:
        """The incident :meth:`to_dict` wrote (``steps`` may be absent: then none are known).

        Bad documents raise :class:`ConfigError` naming ``source`` and the key at fault.
        """
        try:
            return _incident_from_dict(data)
        except (KeyError, TypeError, ValueError) as error:
            what = f"missing key {error}" if isinstance(error, KeyError) else str(error)
            raise ConfigError(f"{source}: not an incident document ({what})") from None

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "incident") -> Incident:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{source}: not JSON ({error})") from None
        return cls.from_dict(data, source=source)


def _step_dict(step: Step) -> dict:
    return {
        "rank": step.rank, "comm": step.comm, "seq": step.seq, "op": step.op, "iteration": step.iteration,
        "action": step.action.value,
    }


def _incident_from_dict(data: Mapping[str, Any]) -> Incident:
    if not isinstance(data, Mapping):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    impact = data["impact"]
    return Incident(
        job=str(data["job"]),
        incident=str(data["incident"]),
        t_from_ns=int(data["t_from_ns"]),
        t_to_ns=int(data["t_to_ns"]),
        iterations=tuple(int(i) for i in data["iterations"]),
        cause=IncidentCause(data["cause"]),
        suspects=tuple(Suspect(str(s["device"]), str(s["kind"]), float(s["score"])) for s in data["suspects"]),
        roots=tuple(
            RootOperator(
                int(r["iteration"]), str(r["cause"]), int(r["rank"]), str(r["comm"]), int(r["seq"]), str(r["op"]),
                tuple(int(k) for k in r["ranks"]), float(r["rate"]),
                # Incidents stored before ``ran`` was written: the searched iteration, as they were read then.
                int(r.get("ran", r["iteration"])), tuple(int(i) for i in r.get("again", ())),
            )
            for r in data["roots"]
        ),
        traversal=tuple(int(r) for r in data["traversal"]),
        steps=tuple(
            Step(int(s["rank"]), str(s["comm"]), int(s["seq"]), str(s["op"]), int(s["iteration"]), Action(s["action"]))
            for s in data.get("steps", ())
        ),
        ranks_fetched=int(data["ranks_fetched"]),
        world=int(data["world"]),
        impact=Impact(
            float(impact["slowdown"]), float(impact["baseline_ns"]), float(impact["actual_ns"]),
            float(impact["gpu_hours_lost"]), int(impact["iterations"]),
        ),
        advice=str(data["advice"]),
        seconds=float(data["seconds"]),
        # Incidents stored before attribution was written carry none.
        attribution=None if data.get("attribution") is None else AttributionSummary.from_dict(data["attribution"]),
    )
