"""Programs: which ranks run the same sequence of operators in an iteration, slot by slot.

A rank's *program* in an iteration is the sequence of (op, bytes) of its operators; its ``k``-th
gap on every rank that runs the same program is one *slot*. Ranks of one pipeline stage run one
program, so a slot's median over its ranks is the length that gap has without a straggler among
them, which is what both the detection replay and the what-if attribution put back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sleuth.whatif.keys import dense_ids, mix, places_in_runs

__all__ = ["ProgramSlots", "program_slots"]


@dataclass(frozen=True)
class ProgramSlots:
    """Per operator (in chain order): its run (one rank's iteration), slot and the run's peers."""

    run: np.ndarray  # int64 id of the operator's (rank, iteration) run
    run_start: np.ndarray  # first operator of each run
    position: np.ndarray  # the operator's place in its run
    slot: np.ndarray  # int64 dense id of (program, position)
    peers: np.ndarray  # ranks running the operator's program in its iteration


def program_slots(op: np.ndarray, nbytes: np.ndarray, rank: np.ndarray, iteration: np.ndarray,
                  first: np.ndarray, stage: np.ndarray | None = None) -> ProgramSlots:
    """The slots of operators given in chain order (rank, then start; ``first`` opens a chain).
    ``stage``: per operator, its rank's pipeline stage where the layout is known; ranks of two
    stages never share a program, even where their operators coincide (under GPipe the middle
    stages send and receive alike, but one computes a backward where the other a forward)."""
    n = len(op)
    run = np.r_[True, (rank[1:] != rank[:-1]) | (iteration[1:] != iteration[:-1])] | first if n else np.zeros(0, bool)
    run_id = np.cumsum(run) - 1
    run_start = np.flatnonzero(run)
    position = places_in_runs(run)
    # A program's signature: a hash of its (position, op, bytes) sequence, summed per run.
    mixed = mix(mix(mix(position.astype(np.uint64)) + op.astype(np.uint64)) + nbytes.astype(np.uint64))
    signature = np.add.reduceat(mixed, run_start) if n else np.zeros(0, np.uint64)
    length = np.diff(np.r_[run_start, n])
    keys = [signature, length.astype(np.uint64), iteration[run_start].astype(np.uint64)]
    if stage is not None:
        keys.append(stage[run_start].astype(np.uint64))
    program = dense_ids(*keys)
    peers = np.bincount(program)[program] if n else np.zeros(0, np.int64)
    slot = dense_ids(program[run_id], position)
    return ProgramSlots(run_id, run_start, position, slot, peers[run_id])
