"""Baselines the detectors are measured against (Holmes appendix F; Greyhound without verification).

Operators (all on the same feature rows as the forest, so only the decision rule differs):

* :class:`ThreeSigma` — per operator series: longer than mean + 3 std of its identity's window.
* :class:`KNNDetector` — k-nearest neighbours on standardized features.
* :class:`SVMDetector` — an RBF support-vector machine on standardized features.
* the untuned random forest is :class:`~sleuth.stream.detection.forest.AbnormalOperatorForest`
  itself, without the drift tuner.

Iterations (on a job's iteration-time series):

* :func:`median_rule` — longer than δ × the median of the previous ``window`` iterations.
* :func:`unverified_change_points` — every Bayesian change point accepted as it comes: the
  iterations after an upward change (any size) are irregular until the next change.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

import math
from typing import Any, Self

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.impute import SimpleImputer
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.utils.validation import check_is_fitted

from sleuth.errors import ConfigError
from sleuth.stream.detection.changepoint import BayesianChangePoint
from sleuth.stream.detection.features import FEATURE_NAMES
from sleuth.stream.detection.forest import check_features
from sleuth.stream.detection.rules import DETECTION_RULES

__all__ = ["KNNDetector", "SVMDetector", "ThreeSigma", "median_rule", "unverified_change_points"]

_DURATION, _MEAN, _STD = (FEATURE_NAMES.index(n) for n in ("duration_ns", "win_mean_ns", "win_std_ns"))


class ThreeSigma(ClassifierMixin, BaseEstimator):
    """Abnormal when the classic z-score (mean, standard deviation) against the identity's window
    exceeds ``sigmas``; nothing to learn. The forest's ``zscore`` feature is the robust one."""

    def __init__(self, *, sigmas: float = 3.0) -> None:
        self.sigmas = sigmas

    def fit(self, X: Any, y: Any = None) -> Self:
        check_features(X)
        self.classes_ = np.array([False, True])
        return self

    def score_samples(self, X: Any) -> np.ndarray:
        X = check_features(X)
        std = X[:, _STD]
        with np.errstate(invalid="ignore"):
            z = (X[:, _DURATION] - X[:, _MEAN]) / np.where(std > 0, std, np.nan)
        return np.nan_to_num(z, nan=0.0) / self.sigmas

    def predict(self, X: Any) -> np.ndarray:
        return self.score_samples(X) > 1.0


class _Subsampled(ClassifierMixin, BaseEstimator, metaclass=ABCMeta):
    """Shared fit for the distance-based baselines: they cost O(n²), so train on at most ``max_train`` rows."""

    max_train: int
    random_state: int | None

    @abstractmethod
    def _estimator(self) -> Any:
        """The scikit-learn classifier at the end of the pipeline."""

    def fit(self, X: Any, y: Any) -> Self:
        X = check_features(X)
        y = np.asarray(y).astype(bool)
        if y.shape != (len(X),):
            raise ConfigError(f"y must hold one label per row of X ({len(X)}), got shape {y.shape}")
        if len(X) > self.max_train:
            # Keep every class represented: sample each class in proportion, abnormal at least half its rows.
            rng = np.random.default_rng(self.random_state)
            abnormal, normal = np.flatnonzero(y), np.flatnonzero(~y)
            take_ab = min(len(abnormal), self.max_train // 2)
            pick = np.concatenate([rng.choice(abnormal, take_ab, replace=False),
                                   rng.choice(normal, min(len(normal), self.max_train - take_ab), replace=False)])
            X, y = X[pick], y[pick]
        self.pipeline_ = make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), StandardScaler(),
                                       self._estimator()).fit(_log_scale(X), y)
        self.classes_ = np.array([False, True])
        return self

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "pipeline_")
        X = check_features(X)
        return self.pipeline_.predict(_log_scale(X)).astype(bool) if len(X) else np.zeros(0, bool)


class KNNDetector(_Subsampled):
    def __init__(self, *, n_neighbors: int = 5, max_train: int = 20_000, random_state: int | None = 0) -> None:
        self.n_neighbors = n_neighbors
        self.max_train = max_train
        self.random_state = random_state

    def _estimator(self) -> Any:
        return KNeighborsClassifier(n_neighbors=self.n_neighbors)


class SVMDetector(_Subsampled):
    def __init__(self, *, C: float = 10.0, max_train: int = 5_000, random_state: int | None = 0) -> None:
        self.C = C
        self.max_train = max_train
        self.random_state = random_state

    def _estimator(self) -> Any:
        return SVC(C=self.C, kernel="rbf", gamma="scale")


def _log_scale(X: np.ndarray) -> np.ndarray:
    # Durations and sizes span six orders of magnitude; distances need them on a log scale.
    out = X.copy()
    for name in ("duration_ns", "win_mean_ns", "win_std_ns", "win_q1_ns", "win_q2_ns", "win_q3_ns", "win_iqr_ns",
                 "nbytes", "iteration_ns", "iteration_mean_ns", "rank_mean_op_ns"):
        k = FEATURE_NAMES.index(name)
        out[:, k] = np.log1p(np.maximum(out[:, k], 0))
    return out


def median_rule(times: np.ndarray, *, delta: float = DETECTION_RULES.delta, window: int = DETECTION_RULES.window) -> np.ndarray:
    """Per iteration: longer than ``delta`` × the median of the previous ``window`` iterations."""
    times = np.asarray(times, dtype=np.float64)
    out = np.zeros(len(times), bool)
    for i in range(1, len(times)):
        out[i] = times[i] > delta * np.median(times[max(0, i - window) : i])
    return out


def unverified_change_points(times: np.ndarray) -> np.ndarray:
    """Per iteration: inside a run that began at an upward change point (no size check)."""
    times = np.asarray(times, dtype=np.float64)
    detector = BayesianChangePoint()
    out = np.zeros(len(times), bool)
    level_start, up = 0, False
    for i, t in enumerate(times):
        detector.update(math.log(max(t, 1.0)))
        if detector.drift_detected and detector.change_at is not None:
            c = detector.change_at
            up = times[c : i + 1].mean() > times[level_start:c].mean() if c > level_start else False
            level_start = c
            if up:
                out[c : i + 1] = True
        elif up:
            out[i] = True
    return out
