"""The report's DP x PP heatmap of per-worker slowdown (What-if figure 14)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sleuth.errors import LayoutError
from sleuth.layout import ParallelLayout
from sleuth.report import gather, render_html
from sleuth.report.heatmap import slowdown_grid, worker_heatmap
from sleuth.sources import MemorySource

from .conftest import SLOW_GPU, Emulated


def faulty_cell(emulated: Emulated) -> tuple[int, int]:
    spec = emulated.source.job_spec()
    host, gpu = SLOW_GPU.removeprefix("gpu:").split("/")
    [rank] = [p.rank for p in spec.placements if p.host == host and p.gpu == int(gpu)]
    coordinates = spec.layout.coordinates(rank)
    return coordinates.dp, coordinates.pp


def test_the_hottest_cell_is_the_slow_gpus_replica_and_stage(emulated: Emulated) -> None:
    spec = emulated.source.job_spec()
    heatmap = worker_heatmap(emulated.incident, emulated.source)
    assert heatmap.grid.shape == (spec.layout.dp, spec.layout.pp) == (8, 2)
    dp, pp = faulty_cell(emulated)
    assert heatmap.hottest == (dp, pp)
    others = np.delete(heatmap.grid.reshape(-1), dp * spec.layout.pp + pp)
    assert heatmap.grid[dp, pp] > 1.05 and others.max() < heatmap.grid[dp, pp] - 0.05  # it stands out
    assert len(heatmap.ranks[dp][pp]) == spec.layout.tp  # the cell's tensor ranks, the slow one among them
    assert set(heatmap.iterations) <= set(emulated.incident.iterations) and 0 < len(heatmap.iterations) <= 8

    html = render_html(gather(emulated.incident, emulated.source, emulated.topology))
    assert 'id="fig-heatmap"' in html and "<script" not in html
    assert f'id="heatmap-hottest" class="hot" data-dp="{dp}" data-pp="{pp}"' in html


def test_a_job_without_a_layout_says_so_instead_of_the_figure(emulated: Emulated) -> None:
    spec = emulated.source.job_spec()
    bare = replace(spec, layout=None)
    source = MemorySource(bare, emulated.source.ranks_records(range(spec.world)), emulated.source.iterations())
    heatmap = worker_heatmap(emulated.incident, source)
    assert heatmap.grid is None and heatmap.hottest is None and "no parallel layout" in heatmap.note
    html = render_html(gather(emulated.incident, source, emulated.topology))
    assert 'id="heatmap-note"' in html and "no parallel layout" in html and 'id="fig-heatmap"' not in html


def test_records_without_the_incidents_iterations_say_so(emulated: Emulated) -> None:
    spec = emulated.source.job_spec()
    before = [i for i in emulated.source.iteration_ids().tolist() if i < min(emulated.incident.iterations)]
    source = MemorySource(spec, emulated.source.ranks_records(range(spec.world), iterations=before),
                          emulated.source.iterations(iterations=before))
    heatmap = worker_heatmap(emulated.incident, source)
    assert heatmap.grid is None and "none of the incident's iterations" in heatmap.note


def test_a_cell_takes_the_largest_slowdown_of_its_ranks() -> None:
    layout = ParallelLayout(16, 2, 2, 2, cp=2)  # tp2 cp2 pp2 dp2: four ranks a cell
    values = np.ones(16)
    values[layout.rank_of(tp=1, cp=1, dp=1, pp=0)] = 1.4
    values[layout.rank_of(tp=0, cp=0, dp=1, pp=0)] = 1.1
    values[layout.rank_of(tp=0, cp=1, dp=0, pp=1)] = 1.2
    grid, ranks = slowdown_grid(values, layout)
    assert grid.tolist() == [[1.0, 1.2], [1.4, 1.0]]
    assert all(len(cell) == 4 for row in ranks for cell in row)
    assert layout.rank_of(tp=1, cp=1, dp=1, pp=0) in ranks[1][0]
    assert sorted(r for row in ranks for cell in row for r in cell) == list(range(16))
    with pytest.raises(LayoutError, match="world of 16"):
        slowdown_grid(values[:8], layout)
