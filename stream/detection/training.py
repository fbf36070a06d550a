"""Training sets and training: from the emulator, or from a folder of records and labels.

A labelled folder is what ``sleuth sim run`` / ``sleuth sim suite`` writes (``records.parquet``,
``iterations.parquet``, ``labels/abnormal.parquet`` aligned row for row with the records); on-call
verdicts later arrive in the same shape.

Most operator instances are normal and easy; the set keeps every abnormal row, the normal rows
that look suspicious (longer than ``hard_ratio`` × their window median) with probability
``hard_share`` and the rest with probability ``easy_share``, so that a forest trains in minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from sleuth.errors import ConfigError, RecordError
from sleuth.progress import track
from sleuth.records import IterationBatch, RecordBatch
from sleuth.recordio import read_parquet
from sleuth.stream.detection.features import FEATURE_NAMES, OperatorWindows
from sleuth.stream.detection.forest import AbnormalOperatorForest
from sleuth.stream.detection.model_file import DetectorModel
from sleuth.stream.detection.offline import detector_decisions, training_set

__all__ = ["THRESHOLD_GRID", "apply_labels", "choose_threshold", "emulation_rows", "fit_model", "read_labelled", "sample_ranks", "sample_rows",
           "streaming_scores"]

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
    if not 0.0 < abnormal_share <= 1.0:
        raise ConfigError(f"abnormal_share must be in (0, 1], got {abnormal_share!r}")
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


def sample_ranks(emulation: Any, groups: int) -> np.ndarray:
    """``groups`` whole tensor groups spread over the job, plus the groups of its faulty GPUs,
    hosts and NICs (``Emulation.ranks_on``).

    Whole groups, because an operator's blocking and transfer need its peers' records; spread,
    so that a sample of a large job sees every pipeline stage.
    """
    if groups < 1:
        raise ConfigError(f"groups must be >= 1, got {groups!r}")
    tp = emulation.scenario.layout.tp
    world = emulation.scenario.layout.world
    starts = set((np.linspace(0, world - tp, groups).astype(int) // tp * tp).tolist())
    for fault in emulation.scenario.faults:
        # NICs too: without them a slow NIC's own ranks entered a sample only by chance (never on
        # seeds 103-104's types suite), so training and the benchmark saw only the operators of its
        # peers that waited for it, not the slow transfers of the NIC's own operators.
        starts.update((emulation.ranks_on(fault.device) // tp * tp).tolist())
    return np.unique(np.concatenate([np.arange(s, s + tp) for s in sorted(starts)]))


def emulation_rows(scenarios: Iterable[Any], *, groups: int | None = None, max_rows: int | None = None,
                   abnormal_share: float | Callable[[Any], float] = 0.5, window: int = 20, min_history: int = 5,
                   seed: int = 0, jobs: int = 1, progress: str | None = None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Sampled training rows of each scenario and a summary.

    ``groups``: tensor groups per scenario (``sample_ranks``); None takes every rank. Sampling
    groups rather than a share of ranks lets one set mix 128 GPUs with 8,192 at a similar cost.
    ``max_rows``: rows kept per scenario, of which the abnormal ones take at most
    ``abnormal_share`` (``sample_rows``): a number, or a function of the scenario.
    ``jobs``: scenarios emulated at once, each in a process of its own; the rows are the same
    whatever the number (scenario k's draw is seeded ``seed + k``). ``progress``: the
    description of a bar counting the scenarios done (``sleuth.progress``: on stderr, when it is a
    terminal), for scripts and benchmarks; None draws none.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"jobs must be an integer >= 1, got {jobs!r}")
    scenarios = list(scenarios)
    rows = partial(_scenario_rows, groups=groups, max_rows=max_rows, abnormal_share=abnormal_share, window=window,
                   min_history=min_history)
    seeds = [seed + k for k in range(len(scenarios))]
    shown = (lambda parts: track(parts, progress, total=len(scenarios))) if progress is not None else iter
    if jobs == 1 or len(scenarios) < 2:
        parts = list(shown(map(rows, scenarios, seeds)))
    else:
        # Processes, not threads: the emulator and the feature pass are Python and numpy on many
        # small arrays, which threads would take turns at under the GIL. Each process holds one
        # scenario at a time (a whole 8,192-GPU job takes about 10 GB while its rows are built).
        with ProcessPoolExecutor(min(jobs, len(scenarios))) as pool:
            parts = list(shown(pool.map(rows, scenarios, seeds)))
    summary = {"scenarios": [scenario.name for scenario in scenarios],
               "operators_seen": sum(part[2] for part in parts), "abnormal_seen": sum(part[3] for part in parts)}
    return np.vstack([part[0] for part in parts]), np.concatenate([part[1] for part in parts]), summary


def _scenario_rows(scenario: Any, seed: int, *, groups: int | None, max_rows: int | None,
                   abnormal_share: float | Callable[[Any], float], window: int,
                   min_history: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """One scenario's kept rows, and how many operators and abnormal ones it had before the draw."""
    from sleuth.sim import Emulation

    emulation = Emulation(scenario)
    ranks = np.arange(scenario.layout.world) if groups is None else sample_ranks(emulation, groups)
    labels, _ = emulation.abnormal(ranks)
    X, y = training_set(emulation.ranks_records(ranks), emulation.iterations(ranks=ranks), labels, window=window,
                        min_history=min_history)
    share = abnormal_share(scenario) if callable(abnormal_share) else abnormal_share
    kept_X, kept_y = sample_rows(X, y, seed=seed, max_rows=max_rows, abnormal_share=share)
    return kept_X, kept_y, len(y), int(y.sum())


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


def fit_model(X: np.ndarray, y: np.ndarray, *, window: int = 20, min_history: int = 5, training: dict | None = None,
              **params: Any) -> DetectorModel:
    forest = AbnormalOperatorForest(**params).fit(X, y)
    summary = dict(training or {})
    summary.update(rows=int(len(y)), abnormal_rows=int(y.sum()))
    return DetectorModel(forest, window, min_history, {"training": summary})


def streaming_scores(forest: AbnormalOperatorForest, records: RecordBatch, iterations: IterationBatch, *,
                     window: int = 20, min_history: int = 5) -> np.ndarray:
    """Each record's vote as a worker scores it: replayed iteration by iteration, an instance entering
    its window only when the forest voted it below ``window_threshold`` (0 for records never scored).

    Why not ``training_set`` rows: their windows are cleaned by the labels, and a fault the forest
    half-admits into its windows in scoring looks less abnormal there than in the labels' windows.
    On seed 103 the labels' windows put the best threshold at the top of the old grid (0.9, mean
    F1 still rising); the streaming votes put it at 0.875 there and 0.825 on seed 104, and the
    benchmark's 2,048 GPUs lost recall at 0.9 (seed 7: precision 1.000, recall 0.942)."""
    return detector_decisions(records, iterations, forest, window=window, min_history=min_history,
                              counterfactual=False)[0]


#: Vote shares ``choose_threshold`` tries. From 0.5, the shipped window threshold: the streaming
#: votes depend on which instances entered the windows, so a decision threshold below the window
#: threshold would change the votes it was chosen on.
THRESHOLD_GRID = tuple(float(t) for t in np.round(np.arange(0.5, 0.9751, 0.025), 3))
#: F1 differences smaller than this between grid points are noise (a few operators of a scenario).
REGRET_TOLERANCE = 0.002


def _f1(score: np.ndarray, labels: np.ndarray, threshold: float) -> float:
    flags = score >= threshold
    return 2 * int((flags & labels).sum()) / max(int(flags.sum()) + int(labels.sum()), 1)


def choose_threshold(held_out: Mapping[str, tuple[np.ndarray, np.ndarray]], *, grid: Iterable[float] = THRESHOLD_GRID,
                     tolerance: float = REGRET_TOLERANCE) -> tuple[float, dict[float, dict[str, float]]]:
    """The vote share whose worst shortfall from any held-out scenario's own best F1 is smallest.

    ``held_out``: scenario name -> (votes, labels), votes as ``streaming_scores`` gives them.
    Why not the best mean F1 (the old rule): it trades scenarios against each other. On seeds
    103-106 most of a slow GPU's scale runs do best between 0.5 and 0.75 and a slow NIC's spike or
    a leaf's near 0.85-0.9, and the mean leans to whichever group has more members. Why not the
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
