"""Type stub of the compiled vote-screen membership test (stream/detection/_screen.c); vote_screen.VoteScreen calls it."""

import numpy as np

def screened(
    width: int, X: np.ndarray, kinds: np.ndarray, keys: np.ndarray, first_box: np.ndarray, lo: np.ndarray,
    hi: np.ndarray, columns: np.ndarray, first_column: np.ndarray, inside: np.ndarray, /,
) -> None: ...
