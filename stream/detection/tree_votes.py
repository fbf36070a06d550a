"""A fitted scikit-learn random forest's share of votes for class 1, bit for bit what
``RandomForestClassifier.predict_proba(X)[:, 1]`` returns, at less cost per row.

``predict_proba`` validates ``X`` once per tree, has each tree gather both classes' fractions and
normalise them, and hands the trees to joblib one by one; here each tree only walks its nodes
(``tree_.apply``, the same compiled walk ``predict_proba`` makes) and the class-1 fraction of the
leaf reached is added in tree order, then divided by the number of trees, as scikit-learn does.
"""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import RandomForestClassifier

__all__ = ["class1_votes"]


def class1_votes(forest: RandomForestClassifier, X: np.ndarray) -> np.ndarray:
    """``forest.predict_proba(X)[:, 1]`` for a single-output, two-class forest; ``X``: C-contiguous float32."""
    if X.dtype != np.float32 or not X.flags.c_contiguous:
        raise ValueError("X must be a C-contiguous float32 matrix (what the trees compare)")
    out = np.zeros(len(X))
    for tree in forest.estimators_:
        nodes = tree.tree_
        # value: (nodes, outputs, classes), each leaf's class fractions, as predict_proba reads them.
        out += nodes.value[:, 0, 1][nodes.apply(X)]
    out /= len(forest.estimators_)
    return out
