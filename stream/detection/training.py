"""Training sets and training: from a folder of records and labels, or rows the emulator gave.

A labelled folder is what ``sleuth sim run`` / ``sleuth sim suite`` writes (``records.parquet``,
``iterations.parquet``, ``labels/abnormal.parquet`` aligned row for row with the records); on-call
verdicts later arrive in the same shape. Rows from emulated scenarios come from
``sleuth.sim.training_rows``, the emulator's side, so that the service never imports the emulator.

Most operator instances are normal and easy; the set keeps every abnormal row, the normal rows
that look suspicious (longer than ``hard_ratio`` × their window median) with probability
``hard_share`` and the rest with probability ``easy_share``, so that a forest trains in minutes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from sleuth.errors import ConfigError, RecordError
from sleuth.records import IterationBatch, RecordBatch
from sleuth.recordio import read_parquet
from sleuth.stream.detection.features import FEATURE_NAMES, OperatorWindows
from sleuth.stream.detection.forest import AbnormalOperatorForest
from sleuth.stream.detection.model_file import DetectorModel
from sleuth.stream.detection.offline import detector_decisions
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.validation import fraction

__all__ = ["apply_labels", "choose_threshold", "fit_model", "read_labelled", "sample_rows", "streaming_scores"]

_RATIO = FEATURE_NAMES.index("ratio")


def sample_rows(X: np.ndarray, y: np.ndarray, *, seed: int = 0, hard_ratio: float = 1.04, hard_share: float = 0.3,
                easy_share: float = 0.01, max_rows: int | None = None,
                abnormal_share: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Every abnormal row, a share of the hard and easy normal ones; then at most ``max_rows``, so
    that a scenario with a huge fault (a host 20x slower) does not drown the rest.

    The cap keeps abnormal rows first (up to ``abnormal_share`` of it, drawn uniformly when there
    are more) and fills the rest with normal ones. Why not a uniform draw: a slow NIC's scenario
    has a few hundred abnormal rows among 100,000 kept, and a uniform cut to 12,000 left the forest
    61 of them."""
    fraction("abnormal_share", abnormal_share)
    rng = np.random.default_rng(seed)
    draw = rng.random(len(y))
    hard = np.nan_to_num(X[:, _RATIO], nan=0.0) > hard_ratio
    keep = np.flatnonzero(y | (hard & (draw < hard_share)) | (draw < easy_share))
    if max_rows is not None and len(keep) > max_rows:
        abnormal, normal = keep[y[keep]], keep[~y[keep]]
        most = int(max_rows * abnormal_share)
        if len(abnormal) > most:
            abnormal = rng.choice(abnormal, most, replace=False)
        normal = rng.choice(normal, min(len(normal), max_rows - len(abnormal)), replace=False)
        keep = np.sort(np.concatenate([abnormal, normal]))
    return X[keep], y[keep]


def read_labelled(folder: str | Path, *, truth: str | Path | None = None) -> tuple[RecordBatch, IterationBatch, np.ndarray]:
    """Records, iterations and abnormal labels of a folder written by ``sleuth sim``.

    ``truth``: the labels file (default ``FOLDER/labels/abnormal.parquet``), a Parquet file with
    a boolean ``abnormal`` column aligned row for row with ``records.parquet``.
    """
    folder = Path(folder)
    records_path = folder / "records.parquet" if folder.is_dir() else folder
    base = records_path.parent
    if not records_path.is_file():
        raise ConfigError(f"--records: {records_path} does not exist (expected a records.parquet or its folder)")
    labels_path = Path(truth) if truth is not None else base / "labels" / "abnormal.parquet"
    if labels_path.is_dir():
        labels_path = labels_path / "labels" / "abnormal.parquet" if (labels_path / "labels").is_dir() else labels_path / "abnormal.parquet"
    if not labels_path.is_file():
        raise ConfigError(f"--truth: {labels_path} does not exist (expected labels/abnormal.parquet as `sleuth sim` writes)")
    iterations_path = base / "iterations.parquet"
    if not iterations_path.is_file():
        raise ConfigError(f"{iterations_path} does not exist: the iteration records must sit beside the records")
    table = pq.read_table(labels_path)
    if "abnormal" not in table.column_names:
        raise ConfigError(f"--truth: {labels_path} has no 'abnormal' column (columns: {table.column_names})")
    labels = table.column("abnormal").to_numpy(zero_copy_only=False).astype(bool)
    records = read_parquet(records_path, RecordBatch)
    if len(labels) != len(records):
        raise RecordError(f"--truth: {len(labels)} labels for {len(records)} records in {records_path}")
    return records, read_parquet(iterations_path, IterationBatch), labels


def apply_labels(records: RecordBatch, labels: np.ndarray,
                 verdicts: Iterable[tuple[str, int, str, int, int, bool]]) -> tuple[np.ndarray, int]:
    """``labels`` with the on-call verdicts (job, rank, comm, seq, iteration, abnormal) set on the records they
    name (every record of that operator instance); the new labels and how many records they changed."""
    labels = labels.copy()
    job, comm = records.decoded("job"), records.decoded("comm")
    changed = 0
    for v_job, rank, v_comm, seq, iteration, abnormal in verdicts:
        match = ((records["rank"] == rank) & (records["seq"] == seq) & (records["iteration"] == iteration)
                 & (comm == v_comm) & (job == v_job))
        changed += int((labels[match] != abnormal).sum())
        labels[match] = abnormal
    return labels, changed


def fit_model(X: np.ndarray, y: np.ndarray, *, window: int = DETECTION_RULES.operator_window,
              min_history: int = DETECTION_RULES.min_history, training: dict | None = None,
              **params: Any) -> DetectorModel:
    forest = AbnormalOperatorForest(**params).fit(X, y)
    summary = dict(training or {})
    summary.update(rows=int(len(y)), abnormal_rows=int(y.sum()))
    return DetectorModel(forest, window, min_history, {"training": summary})


def streaming_scores(forest: AbnormalOperatorForest, records: RecordBatch, iterations: IterationBatch, *,
                     window: int = DETECTION_RULES.operator_window,
                     min_history: int = DETECTION_RULES.min_history) -> np.ndarray:
    """Each record's vote as a worker scores it: replayed iteration by iteration, an instance entering
    its window only when the forest voted it below ``window_threshold`` (0 for records never scored).

    Why not ``training_set`` rows: their windows are cleaned by the labels, and a fault the forest
    half-admits into its windows in scoring looks less abnormal there than in the labels' windows,
    so a threshold chosen on those rows sits too high for the votes a worker casts."""
    return detector_decisions(records, iterations, forest, window=window, min_history=min_history,
                              counterfactual=False)[0]


def _f1(score: np.ndarray, labels: np.ndarray, threshold: float) -> float:
    flags = score >= threshold
    return 2 * int((flags & labels).sum()) / max(int(flags.sum()) + int(labels.sum()), 1)


def choose_threshold(held_out: Mapping[str, tuple[np.ndarray, np.ndarray]], *, grid: Iterable[float] = DETECTION_RULES.threshold_grid,
                     tolerance: float = DETECTION_RULES.regret_tolerance) -> tuple[float, dict[float, dict[str, float]]]:
    """The vote share whose worst shortfall from any held-out scenario's own best F1 is smallest.

    ``held_out``: scenario name -> (votes, labels), votes as ``streaming_scores`` gives them.
    Why not the best mean F1: it trades scenarios against each other. Kinds of fault do best at
    different thresholds (a slow GPU's lower, a NIC's or a leaf's higher), and the mean leans to
    whichever kind has more scenarios. Why not the
    best minimum F1: a NIC spike's F1 is capped near 0.7 by operators no slower than their own
    fault-free instances, so the minimum is that one scenario's optimum whatever it costs the
    others. The shortfall from each scenario's own best (its regret) weighs every scenario against
    what it can reach. Thresholds within ``tolerance`` of the smallest worst regret tie, and the
    best mean F1 among them wins. Returns the threshold and, per grid point, the mean and minimum
    F1 and the worst regret with the scenario it falls on.

    One number for every operator: what sets the scenarios' best thresholds apart is the kind of
    fault, which a worker does not know when it scores; thresholds per observable context (op,
    communicator kind, peers' lateness) are what the trees' own splits already are.
    """
    grid = [float(t) for t in grid]
    if not held_out:
        raise ConfigError("choose_threshold needs at least one held-out set")
    if not grid or not all(0.0 < t < 1.0 for t in grid):
        raise ConfigError(f"grid must hold vote shares in (0, 1), got {grid!r}")
    names = list(held_out)
    f1 = np.array([[_f1(np.asarray(score), np.asarray(labels, bool), t) for t in grid]
                   for score, labels in (held_out[n] for n in names)])
    regret = f1.max(axis=1, keepdims=True) - f1
    worst = regret.max(axis=0)
    mean = f1.mean(axis=0)
    candidates = np.flatnonzero(worst <= worst.min() + tolerance)
    best = int(candidates[np.argmax(mean[candidates])])
    table = {t: {"mean_f1": round(float(mean[i]), 4), "min_f1": round(float(f1[:, i].min()), 4),
                 "worst_regret": round(float(worst[i]), 4), "worst_scenario": names[int(regret[:, i].argmax())]}
             for i, t in enumerate(grid)}
    return grid[best], table
