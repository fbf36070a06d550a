"""The incident: what the localizer reports, as frozen dataclasses, and its one JSON form.

The JSON document (``Incident.to_dict`` / ``from_dict``) is the incident's contract: what ClickHouse
``incident_details.document`` stores, what the incidents topic carries, what ``sleuth localize
--json`` prints, and what the alerter, on-call verdicts and the report read back. Every version
sleuth wrote still reads: fields added later (``steps``, a root's ``ran`` and ``again``,
``attribution``) have defaults, and unknown keys are passed over. A bad document fails naming the
field (``roots[2].cause: must be one of compute, network, got a string 'x'``).

Its ClickHouse rows are ``sleuth.storage.tables.incident_rows``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from sleuth.errors import ConfigError
from sleuth.json_fields import JsonObject
from sleuth.localizer.impact import Impact
from sleuth.localizer.search import Action, Cause, Step
from sleuth.topology import DeviceKind

__all__ = ["AttributionSummary", "Incident", "IncidentCause", "RootOperator", "Suspect"]


class IncidentCause(enum.StrEnum):
    COMPUTE = "compute"
    NETWORK = "network"
    MIXED = "mixed"  # suspects of both kinds (two concurrent faults, one of each)
    STAGE_IMBALANCE = "stage_imbalance"
    SEQLEN_IMBALANCE = "seqlen_imbalance"
    SCATTERED_PAUSES = "scattered_pauses"  # pauses that strike another worker each time (garbage collection, CPU)

    @property
    def hardware(self) -> bool:
        return self in (IncidentCause.COMPUTE, IncidentCause.NETWORK, IncidentCause.MIXED)


@dataclass(frozen=True)
class Suspect:
    device: str
    kind: DeviceKind  # a set of equal-cost spines (``spines:...``) counts as a spine
    score: float

    def to_dict(self) -> dict:
        return {"device": self.device, "kind": self.kind.value, "score": round(self.score, 6)}


@dataclass(frozen=True)
class RootOperator:
    """A root operator of one irregular iteration, with its irregularity rate R.

    ``iteration`` is the irregular iteration searched; ``ran`` the one the operator ran in (its
    ``seq`` is that iteration's: earlier when the delay came from the end of the one before);
    ``again``: later searched iterations in which the same operator was abnormal again, which
    counted toward its devices' support (``sleuth.localizer.search.Root``).
    """

    iteration: int
    cause: Cause
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
            "cause": self.cause.value,
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
            "impact": _impact_dict(self.impact),
            "advice": self.advice,
            "seconds": round(self.seconds, 4),
            "attribution": None if self.attribution is None else self.attribution.to_dict(),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "incident") -> Incident:
        """The incident :meth:`to_dict` wrote, by this version or an earlier one (see the module docstring).

        Bad documents raise :class:`ConfigError` naming ``source`` and the field at fault.
        """
        try:
            return _incident(JsonObject(data))
        except ConfigError as error:
            raise ConfigError(f"{source}: not an incident document ({error})") from None

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "incident") -> Incident:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{source}: not JSON ({error})") from None
        return cls.from_dict(data, source=source)


# -- JSON: the parts that have no ``to_dict`` of their own, and every part read back ----------


def _step_dict(step: Step) -> dict:
    return {
        "rank": step.rank, "comm": step.comm, "seq": step.seq, "op": step.op, "iteration": step.iteration,
        "action": step.action.value,
    }


def _impact_dict(impact: Impact) -> dict:
    return {
        "slowdown": round(impact.slowdown, 4),
        "baseline_ns": round(impact.baseline_ns),
        "actual_ns": round(impact.actual_ns),
        "gpu_hours_lost": impact.gpu_hours_lost,
        "iterations": impact.iterations,
    }


def _incident(f: JsonObject) -> Incident:
    attribution = f.object_or_null("attribution", None)  # absent in incidents stored before attribution
    return Incident(
        job=f.text("job"),
        incident=f.text("incident"),
        t_from_ns=f.integer("t_from_ns"),
        t_to_ns=f.integer("t_to_ns"),
        iterations=f.integers("iterations"),
        cause=f.choice("cause", IncidentCause),
        suspects=tuple(_suspect(s) for s in f.objects("suspects")),
        roots=tuple(_root(r) for r in f.objects("roots")),
        traversal=f.integers("traversal"),
        steps=tuple(_step(s) for s in f.objects("steps", ())),  # absent: none are known
        ranks_fetched=f.integer("ranks_fetched"),
        world=f.integer("world"),
        impact=_impact(f.object("impact")),
        advice=f.text("advice"),
        seconds=f.number("seconds"),
        attribution=None if attribution is None else _attribution(attribution),
    )


def _suspect(f: JsonObject) -> Suspect:
    return Suspect(f.text("device"), f.choice("kind", DeviceKind), f.number("score"))


def _root(f: JsonObject) -> RootOperator:
    iteration = f.integer("iteration")
    return RootOperator(
        iteration, f.choice("cause", Cause), f.integer("rank"), f.text("comm"), f.integer("seq"), f.text("op"),
        f.integers("ranks"), f.number("rate"),
        # Incidents stored before ``ran`` was written: the searched iteration, as they were read then.
        f.integer("ran", iteration), f.integers("again", ()),
    )


def _step(f: JsonObject) -> Step:
    return Step(f.integer("rank"), f.text("comm"), f.integer("seq"), f.text("op"), f.integer("iteration"),
                f.choice("action", Action))


def _impact(f: JsonObject) -> Impact:
    return Impact(f.number("slowdown"), f.number("baseline_ns"), f.number("actual_ns"),
                  f.number("gpu_hours_lost"), f.integer("iterations"))


def _attribution(f: JsonObject) -> AttributionSummary:
    return AttributionSummary(
        f.text("trigger"), f.number("slowdown"), f.number("gpu_hours_lost"),
        tuple((r.integer("rank"), r.number("slowdown")) for r in f.objects("top_ranks")),
        tuple((t.text("type"), t.number("slowdown")) for t in f.objects("top_types")),
        f.number("worker_share"), f.number_or_null("last_stage_share"),
    )

