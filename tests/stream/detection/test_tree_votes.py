"""``class1_votes`` is scikit-learn's ``predict_proba(X)[:, 1]`` bit for bit, missing values included."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from sleuth.stream.detection.model_file import load_default_model
from sleuth.stream.detection.tree_votes import class1_votes


def test_votes_equal_predict_proba_on_a_forest_with_missing_values() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 6))
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.3
    X[rng.random(X.shape) < 0.1] = np.nan
    forest = RandomForestClassifier(n_estimators=12, max_depth=8, random_state=0).fit(X, y)
    X32 = np.ascontiguousarray(X, np.float32)
    assert np.array_equal(class1_votes(forest, X32), forest.predict_proba(X32)[:, 1])


def test_votes_equal_predict_proba_for_the_shipped_model() -> None:
    model = load_default_model().forest
    rng = np.random.default_rng(4)
    X = model._visible(rng.lognormal(size=(2000, model.n_features_in_)) * rng.choice([1, 1e3, 1e6], size=(2000, 1)),
                       np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    assert np.array_equal(class1_votes(model.forest_, X), model.forest_.predict_proba(X)[:, 1])


def test_refuses_what_the_trees_do_not_compare() -> None:
    forest = RandomForestClassifier(n_estimators=2, random_state=0).fit([[0.0], [1.0]], [False, True])
    with pytest.raises(ValueError, match="float32"):
        class1_votes(forest, np.zeros((2, 1)))
