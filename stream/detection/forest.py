"""The random-forest abnormal-operator detector (Holmes §4.2.2), with scikit-learn's contract.

``fit(X, y)`` learns from feature rows (``features.FEATURE_NAMES`` columns) and labels;
``score_samples`` is the one scoring function (the trees' vote for "abnormal"), and ``predict``
only compares it with ``threshold``, so deciding stays apart from scoring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.utils.validation import check_is_fitted

from sleuth.errors import ConfigError
from sleuth.stream.detection.features import DRIFT_PRONE, FEATURE_NAMES
from sleuth.stream.detection.tree_votes import class1_votes
from sleuth.stream.detection.vote_screen import VoteScreen
from sleuth.validation import fraction

__all__ = ["AbnormalOperatorForest", "Votes", "check_features"]

_PEER_FEATURES = tuple(FEATURE_NAMES.index(n) for n in ("blocking_rel", "transfer_ratio"))
#: Features whose values depend on the job's size and model (nanoseconds, rank ids, bytes): a forest
#: that splits on them learns one job's scale and fails on another's (benchmark: F1 0 at 1,024 GPUs
#: for a model trained at 128). ``scale_free=True`` (the default) hides them from the trees; the
#: ratios, z-scores and the chunk context (features.py) carry what they said, in any job's units.
SCALE_DEPENDENT = DRIFT_PRONE + ("win_std_ns", "win_iqr_ns", "rank", "nbytes")
#: Features that count the detector's own past decisions: how many instances entered the window is
#: set by the labels in training and by the forest's votes in scoring. Hidden from the trees always:
#: in training an identity abnormal from the start never enters its window (count 0, every row
#: abnormal), so the trees would learn "count 0 is abnormal", and in scoring an identity flagged once
#: stays out of its window and is flagged again: a false alarm that feeds itself, from a job's cold
#: start on, wherever the first vote went wrong.
FEEDBACK = ("win_count",)
#: Rows scored at once with a screen: about an iteration of a 512-GPU job.
_SCREEN_SLICE = 65_536
#: Features holding codes, not quantities: a split between two op codes says nothing of the ops between.
CATEGORICAL = ("op", "comm_kind")


@dataclass(frozen=True)
class Votes:
    """One scoring pass: ``abnormal`` (vote share >= threshold), ``enter_window`` (< window_threshold)
    and ``score``, the vote share, NaN for a row a ``VoteScreen`` showed below both without walking."""

    abnormal: np.ndarray
    enter_window: np.ndarray
    score: np.ndarray


def check_features(X: Any, *, what: str = "X") -> np.ndarray:
    """``X`` as a float64 matrix with one column per feature, or a ConfigError naming the problem."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(FEATURE_NAMES):
        raise ConfigError(f"{what} must have shape (n, {len(FEATURE_NAMES)}) (features.FEATURE_NAMES), got {X.shape}")
    return X


class AbnormalOperatorForest(ClassifierMixin, BaseEstimator):
    """Random forest over operator features; label 1 = abnormal.

    ``peer_dropout``: the share of training rows copied with their blocking and transfer features
    missing, so that the model also scores operators whose peers' records went to another worker
    (the trees route missing values, scikit-learn >= 1.4). ``scale_free``: hide the
    ``SCALE_DEPENDENT`` features from the trees (a per-job model trained on the job's own records
    may want them, and then the drift tuner keeps their thresholds in step); the ``FEEDBACK``
    features are hidden whatever it says. ``threshold``: the
    vote share that counts as abnormal (``scripts/train_default_model.py`` picks it on held-out
    scenarios). ``window_threshold``: only instances voted below it enter their identity's window
    (``decide``); those between it and ``threshold`` are neither flagged nor learned from, so that
    a slowdown the forest is unsure of does not creep into the window it is judged against.
    ``n_jobs``: cores for ``fit``; scoring runs on one thread.
    """

    def __init__(self, *, n_estimators: int = 40, max_depth: int | None = 14, min_samples_leaf: int = 2,
                 max_features: float | str = "sqrt", threshold: float = 0.5, window_threshold: float = 0.3, peer_dropout: float = 0.3,
                 scale_free: bool = True, n_jobs: int | None = None, random_state: int | None = 0) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.threshold = threshold
        self.window_threshold = window_threshold
        self.peer_dropout = peer_dropout
        self.scale_free = scale_free
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> Self:
        fraction("threshold", self.threshold, one=False)
        if not 0.0 < self.window_threshold <= self.threshold:
            raise ConfigError(f"window_threshold must be in (0, threshold={self.threshold}], got {self.window_threshold!r}")
        fraction("peer_dropout", self.peer_dropout, zero=True, one=False)
        X = check_features(X)
        y = np.asarray(y).astype(bool)
        if y.shape != (len(X),):
            raise ConfigError(f"y must hold one label per row of X ({len(X)}), got shape {y.shape}")
        if y.all() or not y.any():
            raise ConfigError("training labels must contain both normal and abnormal operators")
        with np.errstate(all="ignore"):
            # What the drift tuner compares the live data with.
            self.feature_means_ = np.nanmean(X, axis=0)
        if self.peer_dropout > 0:
            rng = np.random.default_rng(self.random_state)
            pick = rng.random(len(X)) < self.peer_dropout
            dropped = X[pick].copy()
            dropped[:, list(_PEER_FEATURES)] = np.nan
            X, y = np.vstack([X, dropped]), np.concatenate([y, y[pick]])
        X = self._visible(X)
        self.forest_ = RandomForestClassifier(
            n_estimators=self.n_estimators, max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf,
            max_features=self.max_features, n_jobs=self.n_jobs, random_state=self.random_state,
        ).fit(X, y)
        # n_jobs is for fitting: a chunk of ~10,000 operators scores faster on one thread than
        # joblib hands it to two (8 against 15 ms, and 10 against 30 ms with the cores shared).
        self.forest_.set_params(n_jobs=None)
        self.classes_ = np.array([False, True])
        self.n_features_in_ = X.shape[1]
        self.feature_names_ = FEATURE_NAMES
        return self

    def score_samples(self, X: Any) -> np.ndarray:
        """Share of the trees' vote for "abnormal", in [0, 1]."""
        check_is_fitted(self, "forest_")
        X = check_features(X)
        if not len(X):
            return np.zeros(0)
        # The trees compare float32 (scikit-learn converts to it); converting once here is the same.
        return class1_votes(self.forest_, self._visible(X, np.float32))

    def _visible(self, X: np.ndarray, dtype: type = np.float64) -> np.ndarray:
        hidden = FEEDBACK + (SCALE_DEPENDENT if self.scale_free else ())
        # Converted and zeroed a feature at a time (the features' matrix is column-major), then laid out
        # row by row as the trees read it: zeroing columns of a row-major copy strides over every row.
        by_feature: np.ndarray = np.array(np.asarray(X).T, dtype=dtype)
        by_feature[[FEATURE_NAMES.index(n) for n in hidden]] = 0.0  # constant: never split on
        return np.ascontiguousarray(by_feature.T)

    def predict_proba(self, X: Any) -> np.ndarray:
        score = self.score_samples(X)
        return np.column_stack([1.0 - score, score])

    def predict(self, X: Any) -> np.ndarray:
        return self.score_samples(X) >= self.threshold

    def decide(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """(abnormal, normal enough to enter the windows) from one scoring pass."""
        votes = self.votes(X)
        return votes.abnormal, votes.enter_window

    def screen(self) -> VoteScreen:
        """A screen for this forest's splits and thresholds (``votes``): a tuned copy needs its own."""
        check_is_fitted(self, "forest_")
        return VoteScreen(self.forest_, min(self.threshold, self.window_threshold),
                          categorical=tuple(FEATURE_NAMES.index(n) for n in CATEGORICAL))

    def votes(self, X: Any, screen: VoteScreen | None = None) -> Votes:
        """The decisions of one scoring pass; rows ``screen`` covers are not walked (the same decisions),
        and the rows walked teach it (``VoteScreen.learn``)."""
        check_is_fitted(self, "forest_")
        X = check_features(X)
        if screen is not None and (screen.forest is not self.forest_
                                   or screen.below > min(self.threshold, self.window_threshold)):
            raise ConfigError("the vote screen was made for another forest or higher thresholds (make it with screen())")
        visible = self._visible(X, np.float32)
        if screen is None:
            score = class1_votes(self.forest_, visible)
            return Votes(score >= self.threshold, score < self.window_threshold, score)
        score = np.full(len(X), np.nan)
        walk = np.ones(len(X), bool)
        # A slice at a time: what the screen learns from a backlog's first iterations serves the rest of it.
        for start in range(0, len(X), _SCREEN_SLICE):
            rows = visible[start:start + _SCREEN_SLICE]
            kinds = screen.kinds(rows)
            walked = ~screen.screened(rows, kinds)
            walk[start:start + len(rows)] = walked
            if walked.any():
                some = rows if walked.all() else rows[walked]
                score[start + np.flatnonzero(walked)] = class1_votes(self.forest_, some)
                screen.learn(some, kinds[walked])
        with np.errstate(invalid="ignore"):  # NaN: screened, certainly below both thresholds
            return Votes(score >= self.threshold, ~walk | (score < self.window_threshold), score)
