"""Per-worker slowdown as a data-parallel replica x pipeline stage grid (What-if paper, figure 14).

The report replays the incident's iterations of every rank (``sleuth.whatif.attribute``): S_w is
what the job would gain were that worker's operators at the length their peers show. Each cell
is one (dp, pp) coordinate of the job's layout (``sleuth.layout.ParallelLayout``); the ranks that
share it (its tensor ranks, and its context- and expert-parallel ranks where there are some) are
aggregated by their largest S_w, so one slow GPU lights its cell whole.

Kept apart from the drawing (``figures.heatmap_svg``). When the job has no layout, or the replay
cannot measure workers, :class:`WorkerHeatmap` carries no grid and a note that says why, and the
report prints the note where the figure would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sleuth.errors import LayoutError, RecordError
from sleuth.layout import DIMENSIONS, ParallelLayout
from sleuth.localizer.incident import Incident
from sleuth.sources import RecordSource

__all__ = ["MAX_ITERATIONS", "WorkerHeatmap", "slowdown_grid", "worker_heatmap"]

#: Iterations of the incident the replay reads (evenly spread over it): every rank's records of
#: each are fetched, and S_w is measured on the slowest few of them anyway.
MAX_ITERATIONS = 8


@dataclass(frozen=True)
class WorkerHeatmap:
    """S_w per (dp, pp) cell, or why there is none.

    ``grid[dp, pp]``: the largest S_w of the cell's ranks (None when not measured, see ``note``);
    ``ranks[dp][pp]``: those ranks; ``iterations``: the incident's iterations replayed;
    ``unit``: how the replay measured workers ("replica x stage" or "rank")."""

    grid: np.ndarray | None
    ranks: tuple[tuple[tuple[int, ...], ...], ...] = ()
    iterations: tuple[int, ...] = ()
    unit: str = ""
    note: str = ""

    @property
    def hottest(self) -> tuple[int, int] | None:
        """The (dp, pp) of the cell with the largest slowdown (the first such cell)."""
        if self.grid is None:
            return None
        dp, pp = np.unravel_index(int(np.argmax(self.grid)), self.grid.shape)
        return int(dp), int(pp)


def slowdown_grid(by_worker: Sequence[float], layout: ParallelLayout) -> tuple[np.ndarray, tuple]:
    """The (dp, pp) grid of the largest ``by_worker`` value of each cell's ranks, and the ranks of each cell."""
    values = np.asarray(by_worker, dtype=np.float64)
    if values.shape != (layout.world,):
        raise LayoutError(f"by_worker holds {values.size} values for a world of {layout.world}")
    coords = layout.coordinate_array()
    dp, pp = coords[:, DIMENSIONS.index("dp")], coords[:, DIMENSIONS.index("pp")]
    grid = np.full((layout.dp, layout.pp), -np.inf)
    np.maximum.at(grid, (dp, pp), values)
    members: list[list[list[int]]] = [[[] for _ in range(layout.pp)] for _ in range(layout.dp)]
    for rank, (d, p) in enumerate(zip(dp.tolist(), pp.tolist())):
        members[d][p].append(rank)
    return grid, tuple(tuple(tuple(cell) for cell in row) for row in members)


def worker_heatmap(incident: Incident, source: RecordSource, *, max_iterations: int = MAX_ITERATIONS) -> WorkerHeatmap:
    """The heatmap of ``incident``: every rank's records of (at most ``max_iterations`` of) its
    iterations replayed by the what-if attribution."""
    from sleuth.whatif.attribution import attribute  # the replay's modules, only when a report is built

    spec = source.job_spec()
    if spec.layout is None:
        return WorkerHeatmap(None, note="the job's spec has no parallel layout, so its ranks' data-parallel "
                                        "replicas and pipeline stages are unknown: no DP x PP heatmap")
    held = set(source.iteration_ids().tolist())
    wanted = [i for i in incident.iterations if i in held]
    if not wanted:
        return WorkerHeatmap(None, note="the records hold none of the incident's iterations: no DP x PP heatmap")
    if len(wanted) > max_iterations:
        wanted = [wanted[k] for k in np.linspace(0, len(wanted) - 1, max_iterations).round().astype(int)]
    try:  # every rank (None): the replay needs the whole job
        found = attribute(source.ranks_records(None, iterations=wanted), spec,
                          iterations=source.iterations(ranks=None, iterations=wanted))
    except RecordError as error:
        return WorkerHeatmap(None, iterations=tuple(wanted), note=f"the what-if replay could not order the records: {error}")
    if not found.worker_unit:
        return WorkerHeatmap(None, iterations=tuple(wanted),
                             note="the what-if replay measured no per-worker slowdown for these iterations")
    grid, members = slowdown_grid(found.by_worker, spec.layout)
    return WorkerHeatmap(grid, members, tuple(wanted), found.worker_unit)
