"""Type stub of the compiled operator-window statistics (stream/detection/_window_stats.c); features.OperatorWindows calls it."""

import numpy as np

def refresh(
    width: int, rows: np.ndarray, ring: np.ndarray, filled: np.ndarray, transfer_ring: np.ndarray,
    transfer_filled: np.ndarray, stats: np.ndarray, /,
) -> None: ...

#: The ring width sorted by the compiled network (the default ``DetectionRules.operator_window``).
UNROLLED: int
