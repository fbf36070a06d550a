"""What an incident costs (What-if §3.3): slowdown against a healthy baseline, GPU-hours lost.

Baseline: the median iteration time of the window's healthy reference iterations. Slowdown
S = mean iteration time from the first irregular iteration on / baseline. GPU-hours lost so far:
the time above the baseline summed over those iterations, times the job's GPUs (each GPU of a
synchronous job waits for the slowest).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sleuth.localizer.operators import Window

__all__ = ["Impact", "estimate"]

_NS_PER_HOUR = 3_600e9


@dataclass(frozen=True)
class Impact:
    slowdown: float
    baseline_ns: float
    actual_ns: float
    gpu_hours_lost: float
    iterations: int  # iterations from the first irregular one to the window's end


def estimate(times: np.ndarray, window: Window, *, world: int) -> Impact:
    """The impact over ``window`` from per-column iteration times (ns; NaN where unknown)."""
    known = np.isfinite(times)
    reference = known & window.reference
    baseline = float(np.median(times[reference])) if reference.any() else float(np.nanmin(times)) if known.any() else 0.0
    first = int(np.argmax(window.irregular)) if window.irregular.any() else len(window)
    affected = times[first:][known[first:]]
    if not len(affected) or baseline <= 0:
        return Impact(1.0, baseline, baseline, 0.0, 0)
    actual = float(affected.mean())
    lost = float(np.clip(affected - baseline, 0, None).sum()) * world / _NS_PER_HOUR
    return Impact(actual / baseline, baseline, actual, lost, len(affected))
