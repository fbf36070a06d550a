"""Type stub of the compiled stepping-history split (sleuth/whatif/_levels.c); keys.lower_level calls it."""

import numpy as np

def lower_level(
    rows: int, width: int, k: float, least: int, table: np.ndarray, level: np.ndarray, jitter: np.ndarray,
    stepped: np.ndarray, /,
) -> None: ...
