"""Type stub of the compiled per-group median and spread (sleuth/whatif/_groups.c); keys.group_spread calls it."""

import numpy as np

def spread(n: int, groups: int, group: np.ndarray, values: np.ndarray, median: np.ndarray, deviation: np.ndarray, /) -> None: ...
