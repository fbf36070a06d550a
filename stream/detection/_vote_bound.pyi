"""Type stub of the compiled vote bound (stream/detection/_vote_bound.c); vote_screen.VoteScreen calls it."""

import numpy as np

def vote_bound(
    roots: np.ndarray, left: np.ndarray, right: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
    missing_left: np.ndarray, value: np.ndarray, lo: np.ndarray, hi: np.ndarray, missing: np.ndarray, /,
) -> float: ...
