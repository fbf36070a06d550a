"""Detection's rules: when an iteration is irregular, an operator abnormal, and the trees retuned.

Declared once; the detectors' keyword options (``IterationMonitor(delta=...)``,
``DriftTuner(bound=...)``, ...) default to ``DETECTION_RULES``, and the modules that read a rule
without such an option read it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from sleuth.validation import checked, fraction, integer, number_above, positive_int

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

    # -- the iteration monitor: change points and their types ----------------------------------
    #: A change point is confirmed when the means before and after it, and the medians, differ by at
    #: least this share: Greyhound's verification, at the δ rule's tenth.
    min_change: float = 0.10
    #: Iterations after a candidate change it is verified on, as many as the δ rule's window: a burst
    #: of spikes among them moves their mean but not their median, and a lasting level is confirmed soon.
    verify_iterations: int = 10
    #: Gaps between irregular episodes within this share of a multiple of their median (at least one
    #: iteration) are regular: a period of 6-9 iterations (Holmes appendix B) wobbles by one.
    periodic_cv: float = 0.15
    #: Periods longer than this are no fluctuation: Holmes's recur every 6-9 iterations, and episodes
    #: more than two δ windows apart are separate spikes.
    periodic_max_gap: int = 20
    #: Prior chance that a new level begins at any iteration (Bayesian online change points): rare, a
    #: training job's level holds for hundreds of iterations, and the verification decides what is real.
    change_hazard: float = 1 / 200
    #: Posterior mass that a run began within the last ``change_lag`` values at which a change is
    #: reported: well past even odds, so that one spike's passing doubt is not a change.
    change_mass: float = 0.9
    #: Values after a change that the posterior may take to see it: a new level is told from a spike
    #: only by the few values that stay up after it.
    change_lag: int = 5
    #: Run lengths the posterior keeps: memory and time per update stay constant over a months-long
    #: job, at twice the hazard's expected run.
    change_max_run: int = 400

    # -- the abnormal-operator detector's windows and the counterfactual replay ----------------
    #: Normal durations kept per operator identity: a median and IQR that one slow value hardly
    #: moves, recent enough to follow the job's own drift (at most 65,535: a window tells its values'
    #: ages by a 16-bit push count).
    operator_window: int = 20
    #: Normal durations an identity's own window needs before it is trusted over the same program
    #: slot on the other ranks: quartiles of fewer say little.
    min_history: int = 5
    #: The replay puts back a transfer over this multiple of its usual one: a slowed transfer runs
    #: several times its usual length while a transfer's jitter stays far below it, so any cut between
    #: the two puts back the same transfers.
    transfer_cut: float = 2.0
    #: The replay scales back the compute of a rank computing this much over its program's peers in
    #: the iteration: under the labels' 5% line, so compute that makes an operator abnormal is put
    #: back, and above the jitter of a median over the iteration's gaps.
    compute_cut: float = 1.03
    #: Records the detectors judge at a time (whole iterations; one larger iteration alone): a batch
    #: a worker took from a backlog is judged a slice at a time, each against windows that hold the
    #: iterations before it, as if the worker had kept up, and its sorts and matrices stay that small.
    slice_records: int = 32_768

    def __post_init__(self) -> None:
        checked(
            self, prefix="rules.", delta=partial(number_above, low=1), window=positive_int,
            excess=partial(number_above, low=1), tune_interval_ns=positive_int, drift_bound=partial(number_above, low=0),
            regret_tolerance=partial(fraction, zero=True, one=False),
        )
        for share in self.threshold_grid:
            fraction("rules.threshold_grid", share, one=False)
        checked(
            self, prefix="rules.", min_change=partial(fraction, one=False), verify_iterations=positive_int,
            periodic_cv=partial(number_above, low=0), periodic_max_gap=positive_int,
            change_hazard=partial(fraction, one=False), change_mass=partial(fraction, one=False), change_lag=positive_int,
            operator_window=partial(integer, low=2, high=65_535), transfer_cut=partial(number_above, low=1),
            compute_cut=partial(number_above, low=1), slice_records=positive_int,
        )
        integer("rules.change_max_run", self.change_max_run, low=self.change_lag + 1,
                low_shown=f"change_lag + 1 ({self.change_lag + 1})")
        integer("rules.min_history", self.min_history, low=1, high=self.operator_window,
                high_shown=f"operator_window ({self.operator_window})")


DETECTION_RULES = DetectionRules()
