"""Replaying an offline batch through the operator windows, one iteration at a time.

The same path serves training (the windows learn from the labels: an instance enters its
identity's window only when labelled normal) and detection (only when the model judged it
normal), so a model is trained on exactly the features it later scores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from sleuth.errors import RecordError
from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.detection.counterfactual import CounterfactualReplay
from sleuth.stream.detection.features import Chunk, OperatorWindows
from sleuth.stream.detection.rules import DETECTION_RULES

if TYPE_CHECKING:
    from sleuth.stream.detection.forest import AbnormalOperatorForest
    from sleuth.stream.detection.model_file import DetectorModel

__all__ = ["abnormal_mask", "detector_decisions", "iteration_chunks", "replay", "training_set"]


def iteration_chunks(records: RecordBatch, iterations: IterationBatch) -> Iterator[tuple[np.ndarray, RecordBatch, IterationBatch]]:
    """(positions, records, iteration records) of each iteration, ascending; iteration -1 skipped."""
    order = np.argsort(records["iteration"], kind="stable")
    values = records["iteration"][order]
    cuts = np.flatnonzero(np.diff(values)) + 1
    it_order = np.argsort(iterations["iteration"], kind="stable")
    it_values = iterations["iteration"][it_order]
    for part in np.split(order, cuts):
        if not len(part):
            continue
        step = int(records["iteration"][part[0]])
        if step < 0:
            continue
        lo, hi = np.searchsorted(it_values, [step, step + 1])
        yield part, records.take(part), iterations.take(it_order[lo:hi])


Judge = Callable[[Chunk, np.ndarray], tuple[np.ndarray, np.ndarray]]


def replay(records: RecordBatch, iterations: IterationBatch, judge: Judge, *,
           windows: OperatorWindows | None = None) -> np.ndarray:
    """Run every iteration's chunk through ``windows``; ``judge(chunk, positions)`` returns the
    chunk rows' abnormal flags and which rows enter the windows. Returns the flags aligned with ``records``."""
    windows = windows or OperatorWindows()
    flags = np.zeros(len(records), bool)
    for positions, chunk_records, chunk_iterations in iteration_chunks(records, iterations):
        chunk = windows.features(chunk_records, chunk_iterations)
        abnormal, normal = judge(chunk, positions[chunk.index])
        flags[positions[chunk.index]] = abnormal
        windows.push(chunk, normal, chunk_iterations)
    return flags


def training_set(records: RecordBatch, iterations: IterationBatch, abnormal: np.ndarray, *,
                 window: int = DETECTION_RULES.operator_window,
                 min_history: int = DETECTION_RULES.min_history) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows and labels of every record with a known iteration, windows fed by the labels."""
    abnormal = np.asarray(abnormal, dtype=bool)
    if abnormal.shape != (len(records),):
        raise RecordError(f"labels: {abnormal.shape[0] if abnormal.ndim else 0} values for {len(records)} records")
    xs, ys = [], []

    def judge(chunk: Chunk, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xs.append(chunk.X)
        ys.append(abnormal[positions])
        return abnormal[positions], ~abnormal[positions]

    replay(records, iterations, judge, windows=OperatorWindows(window=window, min_history=min_history))
    if not xs:
        return np.zeros((0, 0)), np.zeros(0, bool)
    return np.vstack(xs), np.concatenate(ys)


def detector_decisions(records: RecordBatch, iterations: IterationBatch, forest: AbnormalOperatorForest, *,
                       window: int = DETECTION_RULES.operator_window, min_history: int = DETECTION_RULES.min_history,
                       counterfactual: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(votes, flags)`` of every record as a worker holding all of them decides: the forest's vote
    (0 for records never scored; an instance enters its window only when voted below
    ``window_threshold``), and the flags, the counterfactual replay's verdict where it is certain
    and the forest's elsewhere (the forest's alone with ``counterfactual=False``)."""
    votes = np.zeros(len(records))
    flags = np.zeros(len(records), bool)
    replayer = CounterfactualReplay() if counterfactual else None

    def judge(chunk: Chunk, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        vote = forest.score_samples(chunk.X)
        votes[positions] = vote
        forest_flags = vote >= forest.threshold
        flags[positions] = forest_flags if replayer is None else replayer.abnormal(chunk, forest_flags)
        return flags[positions], vote < forest.window_threshold

    replay(records, iterations, judge, windows=OperatorWindows(window=window, min_history=min_history))
    return votes, flags


def abnormal_mask(records: RecordBatch, iterations: IterationBatch, *, model: DetectorModel | None = None,
                  counterfactual: bool = True) -> np.ndarray:
    """Which operator instances of an offline batch are abnormal (records with iteration -1: never).

    The batch is replayed iteration by iteration, as a worker would have seen it; ``model``
    defaults to the shipped one. ``counterfactual``: the counterfactual replay
    (``counterfactual.py``) overrules the forest, which is right when the batch holds every rank
    of its jobs (a records folder of a whole job); pass False for a subset of ranks, whose
    collectives would look whole with members missing.
    """
    from sleuth.stream.detection.model_file import load_default_model

    if not isinstance(records, RecordBatch) or not isinstance(iterations, IterationBatch):
        raise RecordError(f"abnormal_mask takes a RecordBatch and an IterationBatch, got "
                          f"{type(records).__name__} and {type(iterations).__name__}")
    model = model or load_default_model()
    return detector_decisions(records, iterations, model.forest, window=model.window, min_history=model.min_history,
                              counterfactual=counterfactual)[1]
