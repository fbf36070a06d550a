"""Level shifts of the iteration time inside an analysis window: faults that start late.

The δ rule flags an iteration only while it is longer than δ x the mean of the recent ones. A
second fault that starts once that mean has caught up with a first one (or any persistent fault
that slows the job by less than δ) raises the iteration time by a step that is never
δ-irregular, so a search driven by irregular iterations alone never looks at it. Such a step is
plain in the window's iteration-time series, though: its level changes, and the noise of a
healthy job (jitter, a rare pause) is small next to the change of a median over many iterations.

Binary segmentation: split a segment where the difference of the two sides' medians, divided
by its standard error (robust noise from the median absolute deviation of successive
differences), is largest; keep the split when that ratio is at least ``t_min`` and the step is
at least ``min_step`` of the level before it; recurse on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sleuth.localizer.rules import LOCALIZER_RULES

__all__ = ["Shift", "level_shifts", "persists"]


@dataclass(frozen=True)
class Shift:
    """An upward step of the iteration time at column ``at``; the level before it began at ``since``."""

    at: int
    since: int
    ratio: float  # level after / level before


def level_shifts(
    times: np.ndarray, *, start: int, after: int | None = None, min_len: int = LOCALIZER_RULES.shift_min_len,
    t_min: float = LOCALIZER_RULES.shift_t_min, min_step: float = LOCALIZER_RULES.shift_min_step,
) -> list[Shift]:
    """Upward level shifts of ``times`` (per column, NaN where unknown) in columns after ``after``.

    ``start`` is where the segmentation begins; the shifts returned lie strictly after ``after``
    (by default ``start``: the first irregular column, whose own onset is already searched),
    each at least ``min_len`` columns from a segment end, ascending.
    """
    searched = start if after is None else after
    values = np.asarray(times, dtype=np.float64)
    known = np.flatnonzero(np.isfinite(values))
    known = known[known >= start]
    if len(known) < 2 * min_len:
        return []
    series = values[known]
    noise = _noise(series)
    cuts: list[int] = []
    _split(series, 0, len(series), min_len, t_min, min_step, noise, cuts)
    bounds = [0, *sorted(cuts), len(series)]
    shifts = []
    for k in range(1, len(bounds) - 1):
        segment_start, cut = bounds[k - 1], bounds[k]
        before, after = series[segment_start:cut], series[cut : bounds[k + 1]]
        ratio = float(np.median(after) / np.median(before))
        # The split was judged against the segment it cut, wider than the final neighbours: a
        # cut placed a column early keeps one value of the old level on its left, and a second
        # cut can then split the new level's noise into a step of under a percent. The step is
        # held to ``min_step`` again between the segments that remain.
        if ratio >= 1 + min_step and int(known[cut]) > searched:
            shifts.append(Shift(at=int(known[cut]), since=int(known[segment_start]), ratio=ratio))
    return shifts


def persists(
    times: np.ndarray, *, at: int, reference: np.ndarray, probe: int, min_len: int = LOCALIZER_RULES.shift_min_len,
    t_min: float = LOCALIZER_RULES.lasting_t_min, min_step: float = LOCALIZER_RULES.shift_min_step,
) -> Shift | None:
    """The step at column ``at`` when the iteration time stays up after it: the ``probe`` columns
    after ``at`` against the ``reference`` columns (a boolean mask), by the same test as a level
    shift; None when either side has under ``min_len`` known values or the level came back.

    A persistent fault that slows the job by a little over δ is δ-irregular once, at its onset,
    while the window mean catches up; the iterations after it are as slow and say more than the
    onset alone, where a hiccup of its own may have added to it. One step at a known column
    needs a lower ``t_min`` than ``level_shifts``, which takes the best of every cut: the pivot's
    own iteration times are noisier than the job's (several times the job's noise), so a step the
    job's times show clearly reaches a smaller t there.
    """
    values = np.asarray(times, dtype=np.float64)
    before = values[np.flatnonzero(np.asarray(reference, dtype=bool))]
    before = before[np.isfinite(before)]
    after = values[at + 1 : at + 1 + probe]
    after = after[np.isfinite(after)]
    if len(before) < min_len or len(after) < min_len:
        return None
    level = float(np.median(before))
    step = float(np.median(after)) - level
    t = step / (_noise(before) * np.sqrt(1.0 / len(before) + 1.0 / len(after)))
    if step < min_step * level or t < t_min:
        return None
    return Shift(at=at, since=int(np.flatnonzero(reference)[0]), ratio=float(np.median(after)) / level)


def _noise(series: np.ndarray) -> float:
    """Robust noise of one value: the scaled MAD of successive differences, over sqrt(2)."""
    steps = np.diff(series)
    noise = 1.4826 * float(np.median(np.abs(steps - np.median(steps)))) / np.sqrt(2)
    return max(noise, 1e-9 * float(np.median(series)))


def _split(series: np.ndarray, lo: int, hi: int, min_len: int, t_min: float, min_step: float, noise: float,
           cuts: list[int]) -> None:
    best, best_t = -1, 0.0
    for cut in range(lo + min_len, hi - min_len + 1):
        left, right = series[lo:cut], series[cut:hi]
        step = abs(float(np.median(right) - np.median(left)))
        t = step / (noise * np.sqrt(1.0 / len(left) + 1.0 / len(right)))
        if t > best_t and step >= min_step * float(np.median(left)):
            best, best_t = cut, t
    if best < 0 or best_t < t_min:
        return
    cuts.append(best)
    _split(series, lo, best, min_len, t_min, min_step, noise, cuts)
    _split(series, best, hi, min_len, t_min, min_step, noise, cuts)
