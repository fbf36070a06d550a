"""A straggler on the program's beat: one rank late in every P-th iteration, and in no other.

Hardware keeps time in seconds, not in the job's step count: a device that fluctuates on its own
clock drifts across the iterations, the more so as its slow ones run longer (Holmes, appendix B:
the periodicity "may not be strict"). Work that a training loop runs on one rank every P steps
(``if step % P == 0``: a checkpoint, logging, an evaluation) lands on exactly every P-th iteration.
Neither the records nor an injected fault can tell that work from a device, so the incident keeps
its suspects and says what its iterations say (``on_the_beat``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from sleuth.localizer.incident import Incident, IncidentCause
from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.localizer.search import Cause

__all__ = ["beat", "on_the_beat"]


def beat(iterations: Sequence[int], *, min_beats: int = LOCALIZER_RULES.min_beats) -> int | None:
    """The period P when ``iterations`` are at least ``min_beats`` iterations exactly P >= 2 apart, else None."""
    steps = np.diff(np.unique(np.asarray(iterations, dtype=np.int64)))
    if len(steps) + 1 < min_beats or steps[0] < 2 or np.any(steps != steps[0]):
        return None
    return int(steps[0])


def on_the_beat(incident: Incident, *, min_beats: int = LOCALIZER_RULES.min_beats) -> Incident:
    """``incident`` with advice on the program's work when the rank its compute roots find late most
    was late on a beat (the iterations of its compute roots: another rank's stray delay is not its)."""
    late = Counter(root.rank for root in incident.roots if root.cause is Cause.COMPUTE)
    if incident.cause is not IncidentCause.COMPUTE or not incident.suspects or not late:
        return incident
    rank = late.most_common(1)[0][0]
    iterations = sorted({root.iteration for root in incident.roots
                         if root.cause is Cause.COMPUTE and root.rank == rank})
    period = beat(iterations, min_beats=min_beats)
    if period is None:
        return incident
    shown = ", ".join(str(i) for i in iterations[:-1]) + f" and {iterations[-1]}"
    note = (f"Rank {rank} was late in iterations {shown}, one every {period}: the job's step count, which hardware "
            f"does not keep. If the job runs extra work on rank {rank} every {period} steps (a checkpoint, logging, "
            f"an evaluation), that work is the cost, not {incident.suspects[0].device}: make it asynchronous or "
            "spread it over the ranks.")
    return replace(incident, advice=f"{note} {incident.advice}".strip())
