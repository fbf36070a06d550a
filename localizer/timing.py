"""Blocking and transfer times of one operator across its members (docs/design.md; What-if §3).

A member's operator starts when that member launches it and ends when the whole group is done,
so for one instance:

* ``transfer = min(member ends) - max(member starts)``: the data movement itself; long means
  the network. The earliest end, because an end is when a member *observed* completion: on a
  CPU backend a member that is busy elsewhere notices late, and that is not transfer time;
* ``lateness = max(member starts) - median(starts of the other members)``: how long the others
  blocked waiting for the last launcher; long means that member was late (compute, launch, or
  a delay further upstream on it).

Both are computed for every iteration of the window at once (members x columns matrices), so
the same numbers serve the search's decision in one iteration and the cross-iteration series.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.localizer.operators import RankOperators

__all__ = ["Split", "split"]


@dataclass(frozen=True, eq=False)
class Split:
    """Per column: transfer and lateness (NaN where a member's record is missing) and who was late."""

    transfer: np.ndarray
    lateness: np.ndarray
    late: np.ndarray  # index into the members of the last launcher, per column
    complete: np.ndarray  # every member's record present


def split(members: Sequence[tuple[RankOperators, int]]) -> Split:
    """The blocking/transfer split of one operator slot held by ``members`` as (operators, row)."""
    starts = np.stack([ops.start[row] for ops, row in members]).astype(np.float64)
    ends = np.stack([ops.end[row] for ops, row in members]).astype(np.float64)
    present = np.stack([ops.present[row] for ops, row in members])
    complete = present.all(axis=0)
    starts[~present] = np.nan
    ends[~present] = np.nan
    n_cols = starts.shape[1]
    late = np.zeros(n_cols, dtype=np.int64)
    if complete.any():
        late[complete] = np.argmax(starts[:, complete], axis=0)
    latest = starts[late, np.arange(n_cols)]
    others = starts.copy()
    others[late, np.arange(n_cols)] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # incomplete columns are NaN on purpose
        transfer = np.nanmin(ends, axis=0) - latest
        lateness = latest - np.nanmedian(others, axis=0)
    transfer[~complete] = np.nan
    lateness[~complete] = np.nan
    return Split(transfer=transfer, lateness=lateness, late=late, complete=complete)
