"""The detector the ingest workers run (``sleuth.stream.detection.detect.Detector``).

Per batch a worker takes from Kafka: the iteration monitor judges the iterations the batch
finished (irregularities are kept for ``take_irregularities``, which the worker publishes once the
batch is written), and the forest scores every operator instance of the batch against its identity's
window, which persists across batches (per job, rank, communicator and ordinal). Operators judged
abnormal become ``abnormal_ops`` rows (``score``: the forest's vote).

``counterfactual=True`` lets the counterfactual replay (``counterfactual.py``) overrule the forest
where the batch holds a group's members. Off by default: a worker cannot tell from the records
whether it holds *every* member of a collective (one holding two replicas of a job sees
data-parallel groups of two and takes them for whole), and a replay of part of a group calls the
wait for the absent members a transfer (``benchmarks/bench_worker_keys.py`` with it on: NIC spike
0.94 -> 0.79 at 4 workers). Turn it on where one worker takes whole jobs. The drift tuner sees every scored chunk and swaps in a
tuned copy of the forest when due.

The gateway keys records by model replica (``kafka_records``), so a worker holds the tensor mates
and pipeline peers of the operators it scores; a data- or expert-parallel collective's members, and every
member of a job registered without a layout, may land on other workers, and then its blocking and
transfer features are missing, which the model was trained to handle.
From a job's first batch, before an operator has a history, it is judged against the same
program slot on the other ranks of the batch (features.py); a worker that holds fewer than
``AttributionRules.min_peers`` ranks of a job falls back to the batch's own instances until the windows fill.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from sleuth.irregularity import Irregularity
from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.detection.counterfactual import CounterfactualReplay
from sleuth.stream.detection.drift import DriftTuner
from sleuth.stream.detection.features import OperatorWindows
from sleuth.stream.detection.iteration_monitor import IterationMonitor
from sleuth.stream.detection.model_file import DetectorModel, load_default_model
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.stream.detection.rank_state import RankState
from sleuth.stream.detection.vote_screen import VoteScreen

__all__ = ["StreamDetector"]

_log = logging.getLogger(__name__)


class StreamDetector:
    """Irregular iterations and abnormal operators of the records a worker consumes."""

    def __init__(self, model: DetectorModel | None = None, *, delta: float = DETECTION_RULES.delta,
                 iteration_window: int = DETECTION_RULES.window, tune_interval_ns: int = DETECTION_RULES.tune_interval_ns,
                 drift_bound: float = DETECTION_RULES.drift_bound, counterfactual: bool = False,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.model = model or load_default_model()
        self.windows = OperatorWindows(window=self.model.window, min_history=self.model.min_history)
        self.monitor = IterationMonitor(delta=delta, window=iteration_window)
        self.tuner = DriftTuner(self.model.forest, interval_ns=tune_interval_ns, bound=drift_bound)
        self.counterfactual = CounterfactualReplay() if counterfactual else None
        self.clock = clock
        self.scored = 0
        self.flagged = 0
        self._screen: VoteScreen | None = None  # rows the forest certainly votes normal, for the tuner's current model
        self._irregularities: list[Irregularity] = []

    def update(self, records: RecordBatch, iterations: IterationBatch, state: RankState) -> list[tuple]:
        """``abnormal_ops`` rows of this batch's abnormal operators (the ``Detector`` protocol)."""
        self._irregularities.extend(self.monitor.update(iterations))
        if not len(records):
            self.windows.push(None, None, iterations)
            return []
        chunk = self.windows.features(records, iterations)
        forest = self.tuner.model
        if self._screen is None or self._screen.forest is not forest.forest_:
            self._screen = forest.screen()  # a tuning moved the splits: boxes of the old ones no longer hold
        votes = forest.votes(chunk.X, self._screen)
        abnormal = votes.abnormal
        if self.counterfactual is not None:
            abnormal = self.counterfactual.abnormal(chunk, abnormal)
        self.windows.push(chunk, votes.enter_window, iterations)
        self.tuner.update(chunk.X, int(records["t_end_ns"].max()))
        self.scored += len(chunk.X)
        self.flagged += int(abnormal.sum())
        return self._rows(records, chunk.index[abnormal], votes.score[abnormal])

    def forget(self, jobs: set[str]) -> None:
        """Drop the windows and iteration state of ``jobs`` (idle ones; the ``Detector`` protocol)."""
        self.monitor.forget(jobs)
        rank_map = self.windows.forget(jobs)
        if self.counterfactual is not None:
            self.counterfactual.renumber(rank_map)

    def take_irregularities(self) -> list[Irregularity]:
        """The irregularities found since the last call (oldest first)."""
        found, self._irregularities = self._irregularities, []
        return found

    def _rows(self, records: RecordBatch, index: np.ndarray, scores: np.ndarray) -> list[tuple]:
        if not len(index):
            return []
        now = self.clock()
        picked = records.take(index)
        start = picked["t_start_ns"]
        columns = (picked.decoded("job").tolist(), picked["rank"].tolist(), picked.decoded("comm").tolist(),
                   picked["seq"].tolist(), picked["iteration"].tolist(), picked["op"].tolist(), picked["peer"].tolist(), start.tolist(),
                   (picked["t_end_ns"] - start).tolist(), scores.tolist())
        return [(*row, now) for row in zip(*columns)]
