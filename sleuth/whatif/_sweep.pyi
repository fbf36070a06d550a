"""Type stub of the compiled level sweep and levels (sleuth/whatif/_sweep.c); timeline.latest_ends and
timeline.dependencies call them."""

import numpy as np

def sweep(
    width: int, columns: int, column: int, first: np.ndarray, holds_previous: np.ndarray, previous: np.ndarray,
    op_bounds: np.ndarray, loose: np.ndarray, loose_bounds: np.ndarray, group_begin: np.ndarray,
    group_bounds: np.ndarray, members: np.ndarray, part_bounds: np.ndarray, segment: np.ndarray,
    anchor: np.ndarray, gap: np.ndarray, ideal_gap: np.ndarray, transfer: np.ndarray, ideal_transfer: np.ndarray,
    own: np.ndarray, keep_gap: np.ndarray, keep_transfer: np.ndarray, slot: np.ndarray, link: np.ndarray,
    start: np.ndarray, end: np.ndarray, latest: np.ndarray, carry: np.ndarray, /,
) -> None: ...

def levels(
    n: int, groups: int, first: np.ndarray, holds: np.ndarray, complete: np.ndarray, group: np.ndarray,
    parts: np.ndarray, settled: np.ndarray, op_order: np.ndarray, op_bounds: np.ndarray, loose: np.ndarray,
    loose_bounds: np.ndarray, members: np.ndarray, member_bounds: np.ndarray, begins: np.ndarray,
    begin_bounds: np.ndarray, part_levels: np.ndarray, /,
) -> int: ...
