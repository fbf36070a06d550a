"""The report's figures, drawn with matplotlib as inline SVG (no files, no fonts, no scripts).

Each function takes the data ``evidence`` gathered and returns one ``<svg>`` element. Text stays
text (``svg.fonttype = none``: the browser's sans-serif, selectable and small), and each figure
gets its own id salt so that the ids of several inline SVGs in one page never collide.
matplotlib's object API is used, not pyplot: no global figure state, safe in the server's threads.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps, rc_context
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import Suspect
from sleuth.localizer.search import Step

from sleuth.report.evidence import IterationSeries, Role, Timeline
from sleuth.report.heatmap import WorkerHeatmap
from sleuth.report.neighbourhood import TIERS, Neighbourhood

__all__ = ["heatmap_svg", "impact_svg", "iterations_svg", "scores_svg", "timeline_svg", "topology_svg", "traversal_svg"]

# Colours (colour-blind safe pairs from the Okabe-Ito palette).
NORMAL = "#56707f"
IRREGULAR = "#d55e00"
VISITED = "#0072b2"
ROOT = "#d55e00"
MUTED = "#c9d1d6"
_ACTION_COLOURS = {"pivot": "#009e73", "bfs": "#0072b2", "dfs": "#cc79a7", "back": "#e69f00", "member": "#d55e00"}
_MAX_TRAVERSAL_STEPS = 400
#: Cells up to which the heatmap writes each cell's S_w in it.
_MAX_ANNOTATED_CELLS = 96


def _svg(figure: Figure, name: str) -> str:
    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": f"sleuth-{name}"}):
        figure.savefig(buffer, format="svg", bbox_inches="tight",
                       metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    # Inline in HTML: the XML declaration and DOCTYPE go; the <svg> element stays whole.
    return text[text.index("<svg"):]


def _empty(axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes, color=NORMAL)
    axes.set_axis_off()


def iterations_svg(series: IterationSeries) -> str:
    """Iteration time per iteration; irregular iterations in orange; the healthy baseline dashed."""
    figure = Figure(figsize=(9, 3.2))
    axes = figure.subplots()
    if not len(series.iterations):
        _empty(axes, "no iteration records for the visited ranks")
        return _svg(figure, "iterations")
    axes.plot(series.iterations, series.times_ms, color=NORMAL, linewidth=1.2, zorder=1)
    regular = ~series.irregular
    axes.scatter(series.iterations[regular], series.times_ms[regular], s=10, color=NORMAL, zorder=2,
                 label="regular")
    axes.scatter(series.iterations[series.irregular], series.times_ms[series.irregular], s=22,
                 color=IRREGULAR, zorder=3, label="irregular")
    if series.baseline_ms > 0:
        axes.axhline(series.baseline_ms, color=VISITED, linestyle="--", linewidth=1,
                     label=f"baseline {series.baseline_ms:.1f} ms")
    axes.set_xlabel("iteration")
    axes.set_ylabel("iteration time (ms)")
    axes.legend(loc="upper left", frameon=False, fontsize=8)
    axes.grid(alpha=0.3)
    return _svg(figure, "iterations")


def timeline_svg(timeline: Timeline) -> str:
    """One row per rank; every operator a bar; root operators and examined ones coloured."""
    rows = {rank: k for k, rank in enumerate(timeline.ranks)}
    figure = Figure(figsize=(9, 0.9 + 0.28 * max(len(rows), 3)))
    axes = figure.subplots()
    if not len(timeline.rank):
        _empty(axes, f"no records of these ranks in iteration {timeline.iteration}")
        return _svg(figure, "timeline")
    start_ms = (timeline.start_ns - timeline.origin_ns) / 1e6
    width_ms = np.maximum((timeline.end_ns - timeline.start_ns) / 1e6, 1e-3)
    y = np.array([rows[int(r)] for r in timeline.rank])
    # One collection per role: thousands of operators as single Rectangles would take seconds.
    x0, x1 = start_ms, start_ms + width_ms
    corners = np.stack([np.stack(c, axis=1) for c in ((x0, y - 0.35), (x0, y + 0.35), (x1, y + 0.35), (x1, y - 0.35))],
                       axis=1)
    for role, colour, label in ((Role.OTHER, MUTED, "operator"), (Role.VISITED, VISITED, "examined by the search"),
                                (Role.ROOT, ROOT, "root operator")):
        mask = timeline.role == int(role)
        if mask.any():
            axes.add_collection(PolyCollection(corners[mask], facecolors=colour, edgecolors="none", label=label,
                                               zorder=int(role) + 1))
    axes.set_xlim(0, float(x1.max()) * 1.01)
    axes.set_yticks(range(len(rows)), [f"rank {r}" for r in timeline.ranks], fontsize=8)
    axes.set_ylim(len(rows) - 0.5, -0.5)
    axes.set_xlabel(f"time since the first operator of iteration {timeline.iteration} (ms)")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 1.2 / (len(rows) + 4)), ncol=3,
                frameon=False, fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    return _svg(figure, "timeline")


def traversal_svg(steps: Sequence[Step], traversal: Sequence[int]) -> str:
    """The search's steps in order: which rank, reached how, through which group."""
    shown = list(steps[:_MAX_TRAVERSAL_STEPS])
    ranks = list(dict.fromkeys([*traversal, *(s.rank for s in shown)]))
    rows = {rank: k for k, rank in enumerate(ranks)}
    figure = Figure(figsize=(9, 1.2 + 0.3 * max(len(rows), 3)))
    axes = figure.subplots()
    if not shown:
        _empty(axes, "the incident records no search steps")
        return _svg(figure, "traversal")
    x = np.arange(len(shown))
    y = np.array([rows[s.rank] for s in shown])
    axes.plot(x, y, color=MUTED, linewidth=1, zorder=1)
    for action, colour in _ACTION_COLOURS.items():
        mask = np.array([s.action.value == action for s in shown])
        if mask.any():
            axes.scatter(x[mask], y[mask], s=28, color=colour, zorder=2, label=action)
    previous = None
    for k, step in enumerate(shown):  # name the group where the search enters a new one
        if step.comm != previous:
            axes.annotate(step.comm, (k, rows[step.rank]), xytext=(3, 5), textcoords="offset points", fontsize=7,
                          color=NORMAL)
            previous = step.comm
    axes.set_yticks(range(len(rows)), [f"rank {r}" for r in ranks], fontsize=8)
    axes.set_ylim(len(rows) - 0.5, -0.8)
    axes.set_xlabel("search step" + (f" (first {_MAX_TRAVERSAL_STEPS})" if len(steps) > len(shown) else ""))
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15 - 1.2 / (len(rows) + 4)), ncol=4,
                frameon=False, fontsize=8)
    axes.grid(alpha=0.3)
    return _svg(figure, "traversal")


def topology_svg(neighbourhood: Neighbourhood) -> str:
    """Hosts, GPUs, NICs, leaves and spines around the suspects; suspects in orange."""
    nodes = {n.device: n for n in neighbourhood.nodes}
    width = max((n.x for n in neighbourhood.nodes), default=0.0) + 1
    figure = Figure(figsize=(min(max(6.0, 0.45 * width + 1.5), 16.0), 4.2))
    axes = figure.subplots()
    if not nodes:
        _empty(axes, "no suspect device is in this topology")
        return _svg(figure, "topology")
    for a, b, link in neighbourhood.edges:
        hot = bool(link) and neighbourhood.highlighted(link)
        axes.plot([nodes[a].x, nodes[b].x], [nodes[a].tier, nodes[b].tier], color=IRREGULAR if hot else MUTED,
                  linewidth=3 if hot else 0.8, zorder=1)
    for node in neighbourhood.nodes:
        hot = neighbourhood.highlighted(node.device)
        involved = node.device in neighbourhood.involved
        colour = IRREGULAR if hot else VISITED if involved else "white"
        axes.scatter([node.x], [node.tier], s=140 if node.tier in (0, 3, 4) else 70, color=colour,
                     edgecolors=IRREGULAR if hot else NORMAL, linewidths=1.5 if hot else 0.8, zorder=2,
                     marker="s" if node.tier in (0, 3, 4) else "o")
        axes.annotate(node.label, (node.x, node.tier), xytext=(0, -12 if node.tier == 1 else 9),
                      textcoords="offset points", ha="center", va="top" if node.tier == 1 else "bottom", fontsize=6.5,
                      color=IRREGULAR if hot else "#222222")
    axes.set_yticks(range(len(TIERS)), [t.value for t in TIERS], fontsize=8)
    axes.set_ylim(-0.7, len(TIERS) - 0.4)
    axes.set_xticks([])
    for side in ("top", "right", "bottom"):
        axes.spines[side].set_visible(False)
    handles = [
        Line2D([], [], marker="o", linestyle="", color=IRREGULAR, label="suspect"),
        Line2D([], [], marker="o", linestyle="", color=VISITED, label="GPU of a root operator"),
        Line2D([], [], color=IRREGULAR, linewidth=3, label="suspect link"),
    ]
    axes.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=3, frameon=False, fontsize=8)
    return _svg(figure, "topology")


def scores_svg(suspects: Sequence[Suspect]) -> str:
    """The suspects' normalized MAP scores, best on top."""
    figure = Figure(figsize=(7, 0.8 + 0.45 * max(len(suspects), 2)))
    axes = figure.subplots()
    if not suspects:
        _empty(axes, "no suspect devices (not a hardware fault)")
        return _svg(figure, "scores")
    names = [f"{s.device} ({s.kind})" for s in suspects]
    scores = [s.score for s in suspects]
    axes.barh(range(len(suspects)), scores, color=IRREGULAR, height=0.6)
    for k, score in enumerate(scores):
        axes.annotate(f"{score:.3f}", (score, k), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    axes.set_yticks(range(len(suspects)), names, fontsize=8)
    axes.set_ylim(len(suspects) - 0.5, -0.5)
    axes.set_xlim(0, max(1.0, max(scores) * 1.15))
    axes.set_xlabel("score (MAP, normalized over the candidates)")
    axes.grid(axis="x", alpha=0.3)
    return _svg(figure, "scores")


def impact_svg(impact: Impact) -> str:
    """Healthy baseline against the mean iteration time since the incident began."""
    figure = Figure(figsize=(6, 2.2))
    axes = figure.subplots()
    values = [impact.baseline_ns / 1e6, impact.actual_ns / 1e6]
    axes.barh([0, 1], values, color=[NORMAL, IRREGULAR], height=0.6)
    for k, value in enumerate(values):
        axes.annotate(f"{value:.1f} ms", (value, k), xytext=(4, 0), textcoords="offset points", va="center",
                      fontsize=8)
    axes.set_yticks([0, 1], ["healthy baseline", f"since the incident\n({impact.iterations} iterations)"], fontsize=8)
    axes.set_ylim(1.5, -0.5)
    axes.set_xlim(0, max(values + [1e-9]) * 1.25)
    axes.set_xlabel(f"mean iteration time (ms): slowdown x{impact.slowdown:.2f}, "
                    f"{impact.gpu_hours_lost:.3g} GPU-hours lost")
    axes.grid(axis="x", alpha=0.3)
    return _svg(figure, "impact")


def heatmap_svg(heatmap: WorkerHeatmap) -> str:
    """S_w per data-parallel replica (x) and pipeline stage (y); the hottest cell outlined."""
    grid = heatmap.grid
    if grid is None:
        figure = Figure(figsize=(7, 1.2))
        _empty(figure.subplots(), heatmap.note)
        return _svg(figure, "heatmap")
    dp, pp = grid.shape
    figure = Figure(figsize=(min(9.0, 2.5 + 0.55 * dp), 1.3 + 0.45 * min(pp, 16)))
    axes = figure.subplots()
    top = max(float(grid.max()), 1.01)
    # Vector cells, not an image: an <image> would be a data: URL the browser loads (the page loads nothing).
    # 32 shades: the colour bar is then 32 vector cells, not 256.
    image = axes.pcolormesh(np.arange(dp + 1) - 0.5, np.arange(pp + 1) - 0.5, grid.T,
                            cmap=colormaps["Oranges"].resampled(32), vmin=1.0, vmax=top)
    if dp * pp <= _MAX_ANNOTATED_CELLS:
        middle = 1.0 + (top - 1.0) / 2
        for d in range(dp):
            for p in range(pp):
                axes.text(d, p, f"{grid[d, p]:.2f}", ha="center", va="center", fontsize=7,
                          color="white" if grid[d, p] > middle else "#1d2a33")
    hot = heatmap.hottest
    axes.add_patch(Rectangle((hot[0] - 0.5, hot[1] - 0.5), 1, 1, fill=False, edgecolor=VISITED, linewidth=2))  # type: ignore[index]  # a drawn heat map has a hottest cell
    step = max(1, dp // 16)
    axes.set_xticks(range(0, dp, step))
    axes.set_yticks(range(0, pp, max(1, pp // 16)))
    axes.set_xlabel("data-parallel replica (dp)")
    axes.set_ylabel("pipeline stage (pp)")
    bar = figure.colorbar(image, ax=axes, fraction=0.04, pad=0.02)
    bar.solids.set_rasterized(False)  # type: ignore[union-attr]  # a drawn bar has solids; matplotlib rasterizes a long colour bar: an image again
    bar.set_label("S_w", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    return _svg(figure, "heatmap")
