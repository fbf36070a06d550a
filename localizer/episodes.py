"""One episode, one incident: which incidents describe the same fault, and how one grows.

A persistent fault keeps producing irregular iterations, and a slow job keeps paying: analysed
again, it gives another incident. One less than ``window`` iterations from a known one that names
the same device first or second (or, naming no device, the same non-hardware cause) is the same
episode going on. A first analysis of three iterations may read ``mixed`` where ten read
``compute``, or put a NIC's cable first and the NIC second: the fault is one, and so is its
incident, which *grows* (``grown``) instead of a second one opening.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import Incident
from sleuth.localizer.rules import LOCALIZER_RULES

__all__ = ["Raised", "episode_of", "grown", "one_per_episode"]


@dataclass(frozen=True)
class Raised:
    """What de-duplication needs to know of an incident already raised."""

    incident: str
    first: int
    last: int
    cause: str
    tops: tuple[str, ...]  # the first ``LocalizerRules.tied_suspects`` suspects' devices, () for a non-hardware diagnosis

    @property
    def top(self) -> str:
        return self.tops[0] if self.tops else ""

    @classmethod
    def of(cls, incident: Incident) -> Raised:
        tops = tuple(s.device for s in incident.suspects[:LOCALIZER_RULES.tied_suspects])
        return cls(incident.incident, min(incident.iterations), max(incident.iterations), incident.cause.value, tops)


def episode_of(incident: Incident, raised: Iterable[Raised], *, window: int) -> Raised | None:
    """The raised incident whose episode ``incident`` continues (see the module docstring), if any.

    Of several, the one naming the same device first wins, then the nearest: growing one that named
    the device only second would make two incidents lead with it, one fault paged twice.
    """
    new = Raised.of(incident)
    best: tuple[int, int] | None = None
    found = None
    for old in raised:
        gap = max(new.first - old.last, old.first - new.last, 0)
        if gap >= window:
            continue
        if new.tops and old.tops and (new.top in old.tops or old.top in new.tops):
            rank = (0 if new.top == old.top else 1, gap)
        elif not new.tops and not old.tops and new.cause == old.cause:
            rank = (0, gap)
        else:
            continue
        if best is None or rank < best:
            best, found = rank, old
    return found


def grown(old: Incident, new: Incident) -> Incident | None:
    """``old`` grown by ``new``, the same episode analysed again (None when ``new`` adds no iteration).

    The newer analysis saw more, so its cause, suspects, roots and slowdown lead; the devices only
    ``old`` named stay listed after them (on-call was told of them); the GPU-hours lost add up over
    the iterations each covers alone, ``new``'s counted pro rata.
    """
    added = sorted(set(new.iterations) - set(old.iterations))
    if not added:
        return None
    named = {s.device for s in new.suspects}
    suspects = new.suspects + tuple(s for s in old.suspects if s.device not in named)
    iterations = tuple(sorted(set(old.iterations) | set(new.iterations)))
    share = len(added) / len(new.iterations)
    impact = Impact(new.impact.slowdown, new.impact.baseline_ns, new.impact.actual_ns,
                    old.impact.gpu_hours_lost + share * new.impact.gpu_hours_lost, len(iterations))
    # The longer search record is kept: ClickHouse replaces rows by key, so a shorter one would leave stale steps.
    steps, traversal = (old.steps, old.traversal) if len(old.steps) >= len(new.steps) else (new.steps, new.traversal)
    return replace(new, incident=old.incident, t_from_ns=min((t for t in (old.t_from_ns, new.t_from_ns) if t), default=0),
                   t_to_ns=max(old.t_to_ns, new.t_to_ns), iterations=iterations, suspects=suspects, impact=impact,
                   steps=steps, traversal=traversal)


def one_per_episode(incidents: Sequence[Incident], *, window: int) -> list[Incident]:
    """``incidents`` with every one that continues an earlier one's episode grown into it."""
    kept: list[Incident] = []
    for incident in sorted(incidents, key=lambda i: min(i.iterations)):
        old = episode_of(incident, [Raised.of(k) for k in kept], window=window)
        if old is None:
            kept.append(incident)
            continue
        at = next(k for k, known in enumerate(kept) if known.incident == old.incident)
        kept[at] = grown(kept[at], incident) or kept[at]
    return kept
