"""The iteration monitor: δ-irregular iterations (Holmes §3.1), change points (Greyhound §4.2), types.

Per job, the monitor turns per-rank iteration records into the job's iteration time (as a
trainer's step timer sees it: from the previous iteration's last end, or this one's first start
when the job idled in between, to this iteration's last end) and judges each finished iteration:

* **δ-irregular**: longer than ``delta`` × the mean of the previous ``window`` iterations.
* **change point**: Bayesian online change-point detection on log iteration time; a change is
  confirmed only when the mean of the ``verify`` iterations after it differs from the mean before
  it by at least ``min_change`` (Greyhound's verification), and so does the median (our addition:
  a burst of spikes moves the mean of ten iterations, a level shift moves the median too).
* **type**: after a confirmed upward change and until a confirmed recovery, iterations longer than
  ``delta`` × the pre-change mean are *persistent* degradation; otherwise a δ-irregular iteration is
  a *fluctuation* when the recent episodes of irregularity recur at a regular period (Holmes
  appendix B: every 6-9 iterations), else a *spike*.

An iteration is finished once a later iteration of the job has been seen (records of a rank that
arrive after that are too late for the monitor and counted in ``late``); ``flush`` finishes the rest.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from sleuth.irregularity import Irregularity, IrregularityKind
from sleuth.records import IterationBatch
from sleuth.stream.detection.changepoint import BayesianChangePoint
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.validation import checked, fraction, number_above, positive_int

__all__ = ["IterationMonitor", "irregular_iterations", "job_iteration_times", "last_judgements"]


@dataclass
class _Job:
    pending: dict[int, list[int]] = field(default_factory=dict)  # iteration -> [min start, max end]
    done_through: int = -(2**62)
    last_end: int | None = None
    times: deque = field(default_factory=deque)  # recent finished iteration times (window)
    history: list[tuple[int, int, int, int]] = field(default_factory=list)  # (iteration, time, start, end)
    flagged: set = field(default_factory=set)  # history indices already reported
    cp: BayesianChangePoint | None = None
    candidates: list[int] = field(default_factory=list)  # history indices awaiting verification
    segment_start: int = 0
    persistent_baseline: float | None = None
    episodes: deque = field(default_factory=lambda: deque(maxlen=8))  # history index of each episode start


class IterationMonitor:
    """Streaming irregular-iteration detector (river style: ``update`` per batch, read the result)."""

    def __init__(self, *, delta: float = DETECTION_RULES.delta, window: int = DETECTION_RULES.window,
                 min_change: float = DETECTION_RULES.min_change, verify: int = DETECTION_RULES.verify_iterations,
                 before: int = 50, periodic_cv: float = DETECTION_RULES.periodic_cv,
                 periodic_max_gap: int = DETECTION_RULES.periodic_max_gap, history: int = 4096) -> None:
        self.delta = delta
        self.window = window
        self.min_change = min_change
        self.verify = verify
        self.before = before
        self.periodic_cv = periodic_cv
        self.periodic_max_gap = periodic_max_gap
        self.history = history
        checked(self, delta=partial(number_above, low=1, finite=False), window=positive_int, verify=positive_int,
                before=positive_int, periodic_max_gap=positive_int, history=positive_int,
                min_change=partial(fraction, one=False))
        self.late = 0
        self._jobs: dict[str, _Job] = {}

    def update(self, iterations: IterationBatch) -> list[Irregularity]:
        """Fold in a batch of iteration records; the irregularities of the iterations it finished."""
        found: list[Irregularity] = []
        if not len(iterations):
            return found
        jobs = iterations.decoded("job")
        for name in np.unique(jobs).tolist():
            pick = jobs == name
            state = self._jobs.setdefault(name, _Job())
            it = iterations["iteration"][pick]
            starts, ends = iterations["t_start_ns"][pick], iterations["t_end_ns"][pick]
            known = it >= 0
            it, starts, ends = it[known], starts[known], ends[known]
            late = it <= state.done_through
            self.late += int(late.sum())
            for i, s, e in zip(it[~late].tolist(), starts[~late].tolist(), ends[~late].tolist()):
                span = state.pending.get(i)
                if span is None:
                    state.pending[i] = [s, e]
                else:
                    span[0], span[1] = min(span[0], s), max(span[1], e)
            if state.pending:
                newest = max(state.pending)
                found += self._finish(name, state, [i for i in sorted(state.pending) if i < newest])
        return found

    def flush(self) -> list[Irregularity]:
        """Finish every pending iteration (end of an offline batch, or a job that ended)."""
        found: list[Irregularity] = []
        for name, state in self._jobs.items():
            found += self._finish(name, state, sorted(state.pending))
        return found

    def forget(self, jobs: set[str]) -> None:
        """Drop the state of ``jobs`` (idle ones): one that comes back is judged afresh."""
        for job in jobs:
            self._jobs.pop(job, None)

    def times(self, job: str) -> tuple[np.ndarray, np.ndarray]:
        """(iterations, times ns) the monitor finished for ``job`` (the last ``history``)."""
        state = self._jobs.get(job)
        rows = state.history if state else []
        return np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64)

    # -- judging -------------------------------------------------------------------------------

    def _finish(self, job: str, state: _Job, ready: list[int]) -> list[Irregularity]:
        found = []
        for i in ready:
            start, end = state.pending.pop(i)
            begin = start if state.last_end is None else max(state.last_end, start)
            state.last_end = end
            state.done_through = i
            found += self._judge(job, state, i, end - begin, begin, end)
        return found

    def _judge(self, job: str, state: _Job, iteration: int, time: int, start: int, end: int) -> list[Irregularity]:
        out: list[Irregularity] = []
        state.history.append((iteration, time, start, end))
        k = len(state.history) - 1
        window_mean = float(np.mean(state.times)) if state.times else None
        state.times.append(time)
        if len(state.times) > self.window:
            state.times.popleft()
        if state.cp is None:
            state.cp = BayesianChangePoint()
        state.cp.update(math.log(max(time, 1)))
        if state.cp.drift_detected and state.cp.change_at is not None:
            state.candidates.append(k - (state.cp.t - 1 - state.cp.change_at))
        out += self._verify(job, state, k)

        irregular = window_mean is not None and time > self.delta * window_mean
        if irregular and (k == 0 or k - 1 not in state.flagged):
            state.episodes.append(k)
        if state.persistent_baseline is not None and time > self.delta * state.persistent_baseline:
            if k not in state.flagged:
                state.flagged.add(k)
                out.append(Irregularity(job, iteration, IrregularityKind.PERSISTENT, time,
                                        int(state.persistent_baseline), start, end))
        elif irregular:
            state.flagged.add(k)
            kind = IrregularityKind.FLUCTUATION if self._periodic(state) else IrregularityKind.SPIKE
            out.append(Irregularity(job, iteration, kind, time, int(window_mean), start, end))  # type: ignore[arg-type]  # irregular: the window has a mean
        self._trim(state)
        return out

    def _verify(self, job: str, state: _Job, k: int) -> list[Irregularity]:
        """Confirm or drop change-point candidates that now have ``verify`` iterations after them."""
        out: list[Irregularity] = []
        keep = []
        for c in state.candidates:
            if k - c + 1 < self.verify:
                keep.append(c)
                continue
            lo = max(state.segment_start, c - self.before, 0)
            before = np.array([r[1] for r in state.history[lo:c]], float)
            after = np.array([r[1] for r in state.history[c : c + self.verify]], float)
            if len(before) < 3:
                continue
            up = (after.mean() >= (1 + self.min_change) * before.mean()
                  and np.median(after) >= (1 + self.min_change) * np.median(before))
            down = (after.mean() * (1 + self.min_change) <= before.mean()
                    and np.median(after) * (1 + self.min_change) <= np.median(before))
            if up and state.persistent_baseline is None:
                state.persistent_baseline = float(before.mean())
                state.segment_start = c
                for j in range(c, k + 1):
                    iteration, time, start, end = state.history[j]
                    # The change point itself is always reported: the confirmation is news even
                    # when its iteration already went out as a spike.
                    if j == c or (j not in state.flagged and time > self.delta * state.persistent_baseline):
                        state.flagged.add(j)
                        out.append(Irregularity(job, iteration, IrregularityKind.PERSISTENT, time,
                                                int(state.persistent_baseline), start, end, change_point=j == c))
            elif down and state.persistent_baseline is not None:
                state.persistent_baseline = None
                state.segment_start = c
        state.candidates = keep
        return out

    def _periodic(self, state: _Job) -> bool:
        """Whether the recent episode starts recur at a period: most gaps sit near a multiple of
        the median gap (a missed peak doubles a gap; a hiccup in between makes one short gap)."""
        gaps = np.diff(list(state.episodes)[-6:])
        if len(gaps) < 3:
            return False
        period = float(np.median(gaps))
        if not 2 <= period <= self.periodic_max_gap:
            return False
        multiple = np.maximum(np.round(gaps / period), 1)
        regular = (multiple <= 2) & (np.abs(gaps - multiple * period) <= max(1.0, self.periodic_cv * period))
        return bool(regular.sum() >= 3 and regular.mean() >= 0.75)

    def _trim(self, state: _Job) -> None:
        # Indices into history shift when it is trimmed; trim in large steps so it is rare.
        excess = len(state.history) - self.history
        if excess < self.history // 4 or excess <= 0:
            return
        cut = excess
        state.history = state.history[cut:]
        state.flagged = {j - cut for j in state.flagged if j >= cut}
        state.candidates = [c - cut for c in state.candidates if c >= cut]
        state.segment_start = max(0, state.segment_start - cut)
        state.episodes = deque((e - cut for e in state.episodes if e >= cut), maxlen=state.episodes.maxlen)


def irregular_iterations(iterations: IterationBatch, *, delta: float = DETECTION_RULES.delta, window: int = DETECTION_RULES.window,
                         **options: object) -> list[Irregularity]:
    """The irregular iterations of an offline batch (every job in it), in iteration order per job,
    each once: as the monitor last judged it (a spike that a confirmed change point later made
    persistent is that change point)."""
    monitor = IterationMonitor(delta=delta, window=window, **options)  # type: ignore[arg-type]
    return last_judgements(monitor.update(iterations) + monitor.flush())


def last_judgements(found: list[Irregularity]) -> list[Irregularity]:
    """``found`` (the monitor's stream of judgements) with one per job and iteration, the last one,
    the jobs in their first judgement's order and each job's iterations in order."""
    latest = {(i.job, i.iteration): i for i in found}
    order = {job: k for k, job in enumerate(dict.fromkeys(i.job for i in found))}
    return sorted(latest.values(), key=lambda i: (order[i.job], i.iteration))


def job_iteration_times(iterations: IterationBatch) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per job: (iterations, job iteration times ns), as the monitor measures them."""
    monitor = IterationMonitor(history=max(len(iterations), 1))
    monitor.update(iterations)
    monitor.flush()
    return {job: monitor.times(job) for job in monitor._jobs}
