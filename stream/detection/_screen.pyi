"""Type stub of the compiled vote screen (stream/detection/_screen.c): kinds and the membership
test; VoteScreen calls them."""

import numpy as np

def kinds(
    width: int, X: np.ndarray, split: np.ndarray, categorical: np.ndarray, code_bits: int, out: np.ndarray, /,
) -> None: ...

def screened(
    width: int, X: np.ndarray, kinds: np.ndarray, keys: np.ndarray, first_box: np.ndarray, lo: np.ndarray,
    hi: np.ndarray, columns: np.ndarray, first_column: np.ndarray, inside: np.ndarray, /,
) -> None: ...
