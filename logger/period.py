"""The iteration period of a rank's operator sequence, when nothing marks its steps.

Greyhound (§4.2): a training job repeats the same sequence of communication operators every
iteration, so the sequence's autocorrelation peaks at the iteration's length. Operators are
categorical (kind, communicator, size, peer), so the autocorrelation at lag L is the share of
positions whose operator equals the one L later; the period is the smallest lag at which that
share reaches the threshold (0.95) with at least two whole periods observed.

Counting iterations as ``position // period`` drifts for good at the first operator outside the
pattern: a loss all-reduce every hundredth step, an evaluation, a checkpoint's barrier. So
:class:`PeriodicSteps` follows the stream along its period's motif (the step that repeats most
exactly), phase by phase: an operator the motif does not expect there is an insertion (it stays
in the step it falls in), or where the operators after it follow the motif from a nearby phase, the
stream moved there (a skipped operator, or an earlier one taken for an insertion).
"""

from __future__ import annotations

import numpy as np

from sleuth.validation import fraction, integer
from sleuth.whatif.keys import ranges

__all__ = ["PeriodicSteps", "find_period", "signatures"]

#: Operators after a mismatch that must follow the motif from a new phase before the stream is
#: taken to have moved there: one alike operator is chance, a run of them is the program.
CONFIRM = 4
_CHUNK_MIN, _CHUNK_MAX = 1 << 8, 1 << 16  # codes compared with the motif at once
_ALIGN = 1024  # the stream's first codes that place the motif's phase


def signatures(records: np.ndarray, known: dict[tuple[int, ...], int] | None = None) -> np.ndarray:
    """One integer per operator: equal when kind, communicator, size and peer are equal. Pass the
    same ``known`` (updated in place) for every batch of a stream to keep its codes across batches."""
    known = {} if known is None else known
    keys = np.stack(
        [
            records["op"].astype("i8"),
            records["comm"].astype("i8"),
            records["nbytes"].astype("i8", casting="unsafe"),
            records["peer"].astype("i8"),
        ],
        axis=1,
    )
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    coded = np.array([known.setdefault(tuple(key), len(known)) for key in distinct.tolist()], dtype=np.int64)
    return coded[inverse.reshape(-1)] if len(coded) else np.zeros(0, dtype=np.int64)


def find_period(codes: np.ndarray, *, threshold: float = 0.95, min_repeats: int = 2) -> int | None:
    """The smallest lag L with autocorrelation ≥ ``threshold``, observed ``min_repeats`` times.

    ``codes`` is the operator sequence (integers, equal when the operators are alike). None
    when no lag qualifies yet: the sequence is too short or not periodic.
    """
    fraction("threshold", threshold, error=ValueError)
    integer("min_repeats", min_repeats, low=2, error=ValueError)
    codes = np.asarray(codes)
    n = len(codes)
    for lag in range(1, n // min_repeats + 1):
        if (codes[lag:] == codes[:-lag]).mean() >= threshold:
            return lag
    return None


class PeriodicSteps:
    """The iteration of each operator of a rank's stream, from its period's motif. ``number``
    takes the stream's codes in order (in as many calls as they come) and returns their
    iterations: step 0 starts at the first operator that follows the motif (a stream that starts
    within the job, at position ``first``, counts from the job's first operator), and an operator
    outside the motif moves no later step."""

    def __init__(self, motif: np.ndarray, phase: int, iteration: int) -> None:
        self.motif = np.asarray(motif, dtype=np.int64)
        self.period = len(self.motif)
        self._phase = phase
        self._iteration = iteration
        order = np.argsort(self.motif, kind="stable")
        codes, starts = np.unique(self.motif[order], return_index=True)
        self._phases = dict(zip(codes.tolist(), np.split(order, starts[1:])))

    @classmethod
    def find(cls, codes: np.ndarray, *, first: int = 0, threshold: float = 0.95) -> PeriodicSteps | None:
        """The steps of a stream whose first codes are ``codes`` (the first at position
        ``first``), None when they show no period (:func:`find_period`)."""
        codes = np.asarray(codes, dtype=np.int64)
        period = find_period(codes, threshold=threshold)
        if period is None:
            return None
        # The motif: the step whose operators recur a period later the most often.
        missed = np.r_[0, np.cumsum(codes[:-period] != codes[period:])]
        start = int(np.argmin(missed[period:] - missed[:-period]))
        motif = codes[start:start + period]
        # The motif's rotation the stream's first step follows best (of those alike, the one with
        # no operator outside the pattern before the motif's step).
        head = codes[:min(period, _ALIGN)]
        order = np.argsort(motif, kind="stable")
        low, high = np.searchsorted(motif[order], head), np.searchsorted(motif[order], head, side="right")
        at = np.repeat(np.arange(len(head)), high - low)
        phase = order[ranges(low, high)]
        votes = np.bincount((phase - at) % period, minlength=period)  # r: position i follows motif[(i + r) % period]
        best = np.flatnonzero(votes == votes.max())
        rotation = int(best[np.argmin(np.abs((best + start + period // 2) % period - period // 2))])
        if first:  # a stream that starts within the job (a wrapped buffer) counts from the job's start
            return cls(np.roll(motif, first - rotation), first % period, first // period)
        # One that starts with the job: its first operator that follows the pattern starts step 0.
        begins = int(np.argmax(head == motif[(np.arange(len(head)) + rotation) % period]))
        return cls(np.roll(motif, -(begins + rotation)), 0, 0)

    def number(self, codes: np.ndarray) -> np.ndarray:
        """The iterations of the stream's next ``codes``."""
        return self.positions(codes) // self.period

    def positions(self, codes: np.ndarray) -> np.ndarray:
        """Where the stream's next ``codes`` are along the repeated motif, counted in operators
        (``iteration × period + phase``; an operator outside the motif at the one it falls before)."""
        codes = np.asarray(codes, dtype=np.int64)
        out = np.empty(len(codes), dtype=np.int64)
        i, chunk = 0, _CHUNK_MIN
        while i < len(codes):
            # Vectorized over the run that follows the motif (in growing chunks: mismatches come in
            # bursts); one decision at each mismatch.
            ahead = np.arange(min(len(codes) - i, chunk))
            followed = codes[i:i + len(ahead)] == self.motif[(self._phase + ahead) % self.period]
            run = len(ahead) if followed.all() else int(np.argmin(followed))
            out[i:i + run] = self._iteration * self.period + self._phase + ahead[:run]
            self._advance(run)
            i += run
            chunk = min(2 * chunk, _CHUNK_MAX) if run == len(ahead) else _CHUNK_MIN
            if run < len(ahead):
                out[i] = self._mismatch(codes, i)
                i += 1
        return out

    def _advance(self, steps: int) -> None:
        self._iteration += (self._phase + steps) // self.period
        self._phase = (self._phase + steps) % self.period

    def _mismatch(self, codes: np.ndarray, i: int) -> int:
        """The position of ``codes[i]``, which the motif does not expect at the current phase."""
        phases = self._phases.get(int(codes[i]))
        following = codes[i + 1:i + 1 + CONFIRM]
        if phases is not None and len(following):
            forward = (phases - self._phase) % self.period
            backward = forward - self.period
            # Back no further than the step's start: a stream's iterations never run backwards.
            shifts = np.r_[forward, backward[backward >= -self._phase]]
            shifts = shifts[np.argsort(np.abs(shifts), kind="stable")]
            expected = self.motif[(self._phase + shifts[:, None] + 1 + np.arange(len(following))) % self.period]
            confirmed = (expected == following).all(axis=1)
            if confirmed.any():
                shift = int(shifts[np.argmax(confirmed)])
                if shift > 0:
                    self._advance(shift)
                else:
                    self._phase += shift
                position = self._iteration * self.period + self._phase
                self._advance(1)
                return position
        return self._iteration * self.period + self._phase  # an insertion: in the step it falls in
