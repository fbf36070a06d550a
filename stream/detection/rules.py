"""Detection's rules: when an iteration is irregular, an operator abnormal, and the trees retuned.

Declared once; the detectors' keyword options (``IterationMonitor(delta=...)``,
``DriftTuner(bound=...)``, ...) default to ``DETECTION_RULES``, and the modules that read a rule
without such an option read it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from sleuth.validation import checked, fraction, number_above, positive_int

__all__ = ["DETECTION_RULES", "DetectionRules"]

_WEEK_NS = 7 * 24 * 3600 * 10**9


@dataclass(frozen=True, kw_only=True)
class DetectionRules:
    """The detectors' defaults: the δ rule, the labels' line, drift tuning and the threshold's choice."""

    #: An iteration longer than this times the mean of the previous ``window`` is δ-irregular:
    #: Holmes §3.1, a sudden slowdown of a tenth is worth a search.
    delta: float = 1.1
    #: Iterations whose mean the δ rule compares with: Holmes's, long enough that one spike moves
    #: the mean little, short enough to follow a job's own slow drift.
    window: int = 10
    #: An operator is abnormal when it lasts more than this times its fault-free length: the labels'
    #: line (docs/design.md), so the counterfactual replay answers the labels' own question.
    excess: float = 1.05
    #: The drift tuner retunes on this schedule in the job's own clock: Holmes §4.2.2 tunes weekly.
    tune_interval_ns: int = _WEEK_NS
    #: ... and at once when a drift-prone feature's mean moved by more than this share of its
    #: training mean: a twentieth, so that the splits never sit far off the data between schedules.
    drift_bound: float = 0.05
    #: Vote shares ``training.choose_threshold`` tries. From 0.5, the shipped window threshold: the
    #: streaming votes depend on which instances entered the windows, so a decision threshold below
    #: the window threshold would change the votes it was chosen on.
    threshold_grid: tuple[float, ...] = tuple(float(t) / 1000 for t in range(500, 976, 25))
    #: F1 differences smaller than this between grid points are noise (a few operators of a scenario).
    regret_tolerance: float = 0.002

    def __post_init__(self) -> None:
        checked(
            self, prefix="rules.", delta=partial(number_above, low=1), window=positive_int,
            excess=partial(number_above, low=1), tune_interval_ns=positive_int, drift_bound=partial(number_above, low=0),
            regret_tolerance=partial(fraction, zero=True, one=False),
        )
        for share in self.threshold_grid:
            fraction("rules.threshold_grid", share, one=False)


DETECTION_RULES = DetectionRules()
