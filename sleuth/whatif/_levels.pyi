"""Type stub of the compiled stepping-history split and row statistics (sleuth/whatif/_levels.c); keys.lower_level
and keys.row_spread call them."""

import numpy as np

def lower_level(
    rows: int, width: int, k: float, least: int, table: np.ndarray, level: np.ndarray, jitter: np.ndarray,
    stepped: np.ndarray, /,
) -> None: ...

def row_spread(rows: int, width: int, table: np.ndarray, median: np.ndarray, spread: np.ndarray, /) -> None: ...
