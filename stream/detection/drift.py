"""Drift auto-tuning (Holmes §4.2.2, figure 10b): shift the trees' split thresholds with the data.

The tuner tracks the means of the drift-prone features (``features.DRIFT_PRONE``) of the rows it
is shown. When the tuning is due — on a schedule (default weekly, in the job's own clock) or at
once when a mean has moved by more than ``bound`` (relative to its training mean) since the last
tuning — it copies the *original* model and adds each feature's shift (current mean − training
mean) to the threshold of every tree node that splits on that feature (``tree_.threshold``); a
tuning that moves no split (a scale-free forest never splits on them) keeps the original itself.
Tuning always starts from the original, so shifts never compound; the original stays available
as ``original`` and every tuning is logged and kept in ``tunings`` with its deltas.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from sleuth.errors import ConfigError
from sleuth.stream.detection.features import DRIFT_PRONE, FEATURE_NAMES
from sleuth.stream.detection.forest import AbnormalOperatorForest, check_features
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.validation import number_above

__all__ = ["DriftTuner", "Tuning", "shift_thresholds"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tuning:
    """One tuning: when (data time, ns), why ("schedule" or "bound"), and the shift per feature."""

    at_ns: int
    reason: str
    deltas: dict[str, float]
    nodes: int  # tree nodes whose threshold moved


def shift_thresholds(model: AbnormalOperatorForest, deltas: dict[str, float]) -> tuple[AbnormalOperatorForest, int]:
    """A copy of ``model`` whose splits on each feature in ``deltas`` moved by its delta; the nodes moved."""
    unknown = sorted(set(deltas) - set(FEATURE_NAMES))
    if unknown:
        raise ConfigError(f"cannot shift unknown features {unknown}")
    tuned = copy.deepcopy(model)
    moved = 0
    for tree in tuned.forest_.estimators_:
        nodes = tree.tree_
        # tree_.threshold is a view on the tree's node array: writing it moves the splits.
        threshold = nodes.threshold
        for name, delta in deltas.items():
            at = nodes.feature == FEATURE_NAMES.index(name)
            threshold[at] += delta
            moved += int(at.sum())
    return tuned, moved


class DriftTuner:
    """River-style: ``update(X, t_ns)`` with each scored chunk, read ``tuned`` and use ``model``."""

    def __init__(self, original: AbnormalOperatorForest, *, features: tuple[str, ...] = DRIFT_PRONE,
                 interval_ns: int = DETECTION_RULES.tune_interval_ns, bound: float = DETECTION_RULES.drift_bound,
                 min_rows: int = 50_000) -> None:
        if not hasattr(original, "feature_means_"):
            raise ConfigError("the model has no training feature means (fit it with AbnormalOperatorForest.fit)")
        unknown = sorted(set(features) - set(FEATURE_NAMES))
        if unknown:
            raise ConfigError(f"drift features {unknown} are not model features")
        number_above("interval_ns", interval_ns, 0, finite=False)
        number_above("bound", bound, 0, finite=False)
        self.original = original
        self.model = original
        self.features = tuple(features)
        self.interval_ns = interval_ns
        self.bound = bound
        self.min_rows = min_rows
        self.tunings: list[Tuning] = []
        self.tuned = False  # whether the last update tuned
        self._columns = [FEATURE_NAMES.index(f) for f in self.features]
        self._train = np.array([original.feature_means_[c] for c in self._columns])
        self._applied = np.zeros(len(self._columns))
        self._sum = np.zeros(len(self._columns))
        self._count = np.zeros(len(self._columns))
        self._since: int | None = None

    def update(self, X: Any, t_ns: int) -> Self:
        """Fold in a chunk's feature rows observed at data time ``t_ns``; tune when due."""
        X = check_features(X)
        self.tuned = False
        values = X[:, self._columns]
        known = ~np.isnan(values)
        self._sum += np.where(known, values, 0.0).sum(axis=0)
        self._count += known.sum(axis=0)
        if self._since is None:
            self._since = t_ns
        if self._count.min() < self.min_rows:
            return self
        shift = self._sum / self._count - self._train
        moved = np.abs(shift - self._applied) > self.bound * np.abs(self._train)
        reason = "schedule" if t_ns - self._since >= self.interval_ns else "bound" if moved.any() else None
        if reason:
            self._tune(shift, t_ns, reason)
        return self

    def _tune(self, shift: np.ndarray, t_ns: int, reason: str) -> None:
        deltas = {name: float(d) for name, d in zip(self.features, shift)}
        tuned, nodes = shift_thresholds(self.original, deltas)
        # A copy with no split moved is the original: kept, so what was learned of it (the vote screen) holds.
        self.model = tuned if nodes else self.original
        self._applied = shift
        self.tunings.append(Tuning(t_ns, reason, deltas, nodes))
        self.tuned = True
        _log.info("drift tuning (%s) at %d: %d nodes moved, deltas %s", reason, t_ns, nodes,
                  {k: round(v, 1) for k, v in deltas.items()})
        self._sum[:] = 0
        self._count[:] = 0
        self._since = t_ns
