"""The 1F1B pipeline schedule, and an order in which the emulator can walk all stages at once.

Stage ``s`` of ``p`` with ``m`` micro-batches runs ``w = min(p - s - 1, m)`` warm-up forwards,
then alternates one forward and one backward, then drains the remaining backwards
(Megatron-LM's non-interleaved schedule). Interleaved (virtual) stages are not modelled.

Dependencies between stages: the forward of micro-batch ``k`` on stage ``s`` needs the
activations that stage ``s-1`` sent at the end of its forward of ``k``; the backward of ``k``
on stage ``s`` needs the gradient stage ``s+1`` sent at the end of its backward of ``k``.
Sends do not block the sender (isend), so these are the only cross-stage edges, and
:func:`walk_order` gives one topological order of all (stage, block) pairs.
"""

from __future__ import annotations

import enum

from sleuth.errors import ConfigError
from sleuth.validation import positive_int

__all__ = ["Pass", "one_f_one_b", "walk_order"]


class Pass(enum.IntEnum):
    FORWARD = 0
    BACKWARD = 1


def one_f_one_b(stage: int, stages: int, microbatches: int) -> tuple[tuple[Pass, int], ...]:
    """The blocks ``(pass, micro-batch)`` stage ``stage`` runs in one iteration, in order."""
    if not 0 <= stage < stages:
        raise ConfigError(f"stage {stage} is outside 0..{stages - 1}")
    positive_int("microbatches", microbatches)
    warmup = min(stages - stage - 1, microbatches)
    order: list[tuple[Pass, int]] = [(Pass.FORWARD, k) for k in range(warmup)]
    for i in range(microbatches - warmup):
        order.append((Pass.FORWARD, warmup + i))
        order.append((Pass.BACKWARD, i))
    order.extend((Pass.BACKWARD, k) for k in range(microbatches - warmup, microbatches))
    return tuple(order)


def walk_order(stages: int, microbatches: int) -> tuple[tuple[int, int], ...]:
    """``(stage, block index)`` pairs in an order that respects every cross-stage dependency."""
    programs = [one_f_one_b(s, stages, microbatches) for s in range(stages)]
    done: set[tuple[int, Pass, int]] = set()
    position = [0] * stages
    order: list[tuple[int, int]] = []
    total = sum(len(p) for p in programs)
    while len(order) < total:
        progressed = False
        for s in range(stages):
            while position[s] < len(programs[s]):
                kind, k = programs[s][position[s]]
                needs = (s - 1, kind, k) if kind is Pass.FORWARD else (s + 1, kind, k)
                if 0 <= needs[0] < stages and needs not in done:
                    break
                done.add((s, kind, k))
                order.append((s, position[s]))
                position[s] += 1
                progressed = True
        if not progressed:  # pragma: no cover - 1F1B is deadlock-free with non-blocking sends
            raise ConfigError("pipeline schedule deadlocks")
    return tuple(order)
