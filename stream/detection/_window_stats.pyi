"""Type stub of the compiled operator windows (stream/detection/_window_stats.c); features.OperatorWindows calls it."""

import numpy as np

def push(
    width: int, rows: np.ndarray, values: np.ndarray, transfers: np.ndarray, window: np.ndarray, filled: np.ndarray,
    born: np.ndarray, transfer_window: np.ndarray, transfer_filled: np.ndarray, transfer_born: np.ndarray,
    stats: np.ndarray, /,
) -> None: ...
