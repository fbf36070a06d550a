"""``VoteScreen``: rows left unwalked are decided as the walk decides them, the compiled bound is its
Python reference's, and a screen serves only the forest and thresholds it was made for."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from sleuth.errors import ConfigError
from sleuth.stream.detection import StreamDetector, vote_screen
from sleuth.stream.detection.drift import shift_thresholds
from sleuth.stream.detection.features import FEATURE_NAMES
from sleuth.stream.detection.forest import CATEGORICAL
from sleuth.stream.detection.model_file import load_default_model
from sleuth.stream.detection.rank_state import RankState
from sleuth.stream.detection.tree_votes import class1_votes
from sleuth.stream.detection.vote_screen import VoteScreen

from .conftest import emulation, small_model


def rows_of_kinds(rng: np.random.Generator, n: int, *, shift: float = 0.0) -> np.ndarray:
    """Two continuous features and a code (0-2) deciding the label's rule, a tenth of the first missing."""
    X = np.column_stack([rng.normal(shift, 1, n), rng.normal(0, 1, n), rng.integers(0, 3, n).astype(float)])
    X[rng.random(n) < 0.1, 0] = np.nan
    return X


def label(X: np.ndarray) -> np.ndarray:
    return np.where(X[:, 2] == 1, X[:, 1] > 1.5, np.nan_to_num(X[:, 0], nan=3.0) > 2.0)


@pytest.fixture(scope="module")
def forest() -> RandomForestClassifier:
    rng = np.random.default_rng(0)
    X = rows_of_kinds(rng, 6000)
    return RandomForestClassifier(n_estimators=15, max_depth=9, random_state=0).fit(X, label(X))


def test_rows_the_screen_passes_are_voted_below_its_share_and_most_rows_are_passed(forest) -> None:
    screen = VoteScreen(forest, 0.5, categorical=(2,), min_rows=64)
    rng = np.random.default_rng(1)
    passed = walked = 0
    for chunk in range(40):  # the rows drift a little from chunk to chunk, as iteration-wide features do
        X = np.ascontiguousarray(rows_of_kinds(rng, 500, shift=0.1 * np.sin(chunk)), np.float32)
        kinds = screen.kinds(X)
        inside = screen.screened(X, kinds)
        votes = class1_votes(forest, X)
        assert (votes[inside] < 0.5).all()
        passed, walked = passed + inside.sum(), walked + (~inside).sum()
        screen.learn(np.ascontiguousarray(X[~inside]), kinds[~inside])
    assert screen.boxes >= 2
    assert passed > walked  # after the first chunks, most rows lie in a box


def test_the_compiled_bound_is_the_python_walk_s_on_the_shipped_model() -> None:
    if vote_screen._vote_bound is None:
        pytest.fail("the compiled vote bound is not built (pip install -e . with a C compiler)")
    model = load_default_model().forest
    screen = model.screen()
    rng = np.random.default_rng(2)
    args = (screen._roots, screen._left, screen._right, screen._feature, screen._threshold, screen._missing_left,
            screen._value)
    for _ in range(30):
        centre = rng.normal(1.0, 1.0, model.n_features_in_)
        width = rng.exponential(0.3, model.n_features_in_)
        missing = (rng.random(model.n_features_in_) < 0.1).astype(np.uint8)
        lo, hi = centre - width, centre + width
        assert vote_screen._vote_bound.vote_bound(*args, lo, hi, missing) == vote_screen._walk_bound(*args, lo, hi, missing)


def test_the_bound_covers_every_row_inside_the_box(forest) -> None:
    screen = VoteScreen(forest, 0.5, categorical=(2,))
    rng = np.random.default_rng(3)
    for _ in range(20):
        lo = np.array([rng.normal(0, 1), rng.normal(0, 1), 0.0])
        hi = lo + np.array([rng.exponential(1), rng.exponential(1), 2.0])
        X = np.column_stack([rng.uniform(lo[0], hi[0], 300), rng.uniform(lo[1], hi[1], 300), rng.integers(0, 3, 300)])
        X = np.ascontiguousarray(X, np.float32)
        votes = class1_votes(forest, X) * len(forest.estimators_)
        assert votes.max() <= screen.bound(lo, hi, np.zeros(3, np.uint8)) + 1e-9


def test_a_screen_decides_as_the_walk_on_the_shipped_model() -> None:
    model = load_default_model().forest
    screen = model.screen()
    rng = np.random.default_rng(5)
    base = model._visible(np.abs(rng.normal(1.0, 0.05, (1, model.n_features_in_))), np.float64)
    for _ in range(30):
        X = base * rng.normal(1.0, 0.03, (800, model.n_features_in_))
        X[rng.random(800) < 0.05] *= 3.0  # a few rows far off
        X[:, [FEATURE_NAMES.index(n) for n in CATEGORICAL]] = 1.0  # an all-reduce on a data-parallel group
        screened, walked = model.votes(X, screen), model.votes(X)
        assert np.array_equal(screened.abnormal, walked.abnormal)
        assert np.array_equal(screened.enter_window, walked.enter_window)
        known = ~np.isnan(screened.score)
        assert np.array_equal(screened.score[known], walked.score[known])
    assert screen.boxes >= 1


def test_a_screen_serves_only_its_forest_and_thresholds() -> None:
    model = small_model().forest
    screen = model.screen()
    X = np.ones((3, model.n_features_in_))
    tuned, _ = shift_thresholds(model, {"duration_ns": 5.0})
    with pytest.raises(ConfigError, match="another forest"):
        tuned.votes(X, screen)
    stricter = VoteScreen(model.forest_, min(model.threshold, model.window_threshold) + 0.1)
    with pytest.raises(ConfigError, match="higher thresholds"):
        model.votes(X, stricter)


def test_codes_out_of_range_are_never_screened(forest) -> None:
    screen = VoteScreen(forest, 0.5, categorical=(2,), min_rows=16)
    rng = np.random.default_rng(6)
    for _ in range(10):
        X = np.ascontiguousarray(rows_of_kinds(rng, 400), np.float32)
        screen.learn(X, screen.kinds(X))
    assert screen.boxes
    X = np.ascontiguousarray(rows_of_kinds(rng, 400), np.float32)
    assert screen.screened(X, screen.kinds(X)).any()
    X[:, 2] += 0.5  # not a code
    assert not screen.screened(X, screen.kinds(X)).any()
    X[:, 2] = -1
    assert not screen.screened(X, screen.kinds(X)).any()


def test_a_stream_detector_makes_a_new_screen_when_the_tuner_moves_the_splits() -> None:
    em = emulation(iterations=12)
    detector = StreamDetector(small_model())
    state = RankState()
    for it in range(6):
        detector.update(em.records(iterations=[it]), em.iterations(iterations=[it]), state)
    first = detector._screen
    assert first is not None and first.forest is detector.tuner.model.forest_
    detector.tuner.model, _ = shift_thresholds(detector.tuner.original, {"duration_ns": 1.0})
    detector.update(em.records(iterations=[6]), em.iterations(iterations=[6]), state)
    assert detector._screen is not first and detector._screen.forest is detector.tuner.model.forest_


def test_the_compiled_membership_test_is_numpy_s_on_every_row(forest) -> None:
    if vote_screen._screen is None:
        pytest.fail("the compiled screen is not built (pip install -e . with a C compiler)")
    screen = VoteScreen(forest, 0.5, categorical=(2,), min_rows=16)
    rng = np.random.default_rng(7)
    checked = 0
    for chunk in range(25):  # boxes grow between checks: the packed copy must follow them
        X = np.ascontiguousarray(rows_of_kinds(rng, 600, shift=0.3 * np.sin(chunk)), np.float32)
        X[rng.random(600) < 0.05, 1] = np.nan  # missing values compare false both ways: never outside
        X[rng.random(600) < 0.02, 0] = np.inf
        kinds = screen.kinds(X)
        kinds[rng.random(600) < 0.03] = 12345  # kinds with no box
        compiled, reference = screen.screened(X, kinds), screen._numpy_screened(X, kinds)
        assert np.array_equal(compiled, reference)
        checked += compiled.sum()
        screen.learn(np.ascontiguousarray(X[~compiled]), kinds[~compiled])
    assert screen.boxes >= 3 and checked > 1000
    # Rows other than the C-contiguous float32 matrix the trees walk take numpy's path, with the same answer.
    X64 = rows_of_kinds(rng, 300)
    assert np.array_equal(screen.screened(X64, screen.kinds(X64)), screen._numpy_screened(X64, screen.kinds(X64)))


def test_the_compiled_kinds_are_numpy_s_on_every_row(forest) -> None:
    if vote_screen._screen is None:
        pytest.fail("the compiled screen is not built (pip install -e . with a C compiler)")
    screen = VoteScreen(forest, 0.5, categorical=(2,), min_rows=16)
    rng = np.random.default_rng(8)
    X = np.ascontiguousarray(rows_of_kinds(rng, 3000), np.float32)
    X[rng.random(3000) < 0.05, 1] = np.nan
    odd = rng.random(3000)  # codes missing, fractional, negative, past the code bits, infinite, zero of either sign
    X[odd < 0.02, 2] = np.nan
    X[(odd >= 0.02) & (odd < 0.04), 2] += 0.5
    X[(odd >= 0.04) & (odd < 0.06), 2] = -1
    X[(odd >= 0.06) & (odd < 0.08), 2] = 2.0 ** 15
    X[(odd >= 0.08) & (odd < 0.09), 2] = np.inf
    X[(odd >= 0.09) & (odd < 0.10), 2] = -0.0
    compiled, reference = screen.kinds(X), screen._numpy_kinds(X)
    assert np.array_equal(compiled, reference)
    assert (compiled == -1).sum() > 100 and len(np.unique(compiled)) > 5
    # A real model's screen, on a real job's feature rows: the same kinds.
    model = load_default_model().forest
    real = model.screen()
    from sleuth.stream.detection.features import OperatorWindows

    em = emulation(iterations=3)
    chunk = OperatorWindows().features(em.records(iterations=[2]))
    rows = model._visible(chunk.X, np.float32)
    assert np.array_equal(real.kinds(rows), real._numpy_kinds(rows))
