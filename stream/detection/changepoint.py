"""Bayesian online change-point detection (Adams & MacKay 2007), as Greyhound §4.2 uses it.

A river-style streaming detector: ``update(x)`` one value at a time, then read ``drift_detected``
and ``change_at``. The model is a Gaussian of unknown mean and variance (Normal-Gamma prior,
Student-t predictive) with a constant hazard; the run-length posterior is truncated at
``max_run`` so memory and time per update stay constant over a months-long job.

Greyhound reports a change when the posterior says a new run began; because the posterior of
``r_t = 0`` alone equals the hazard by construction, we read the mass of "a run began within the
last ``lag`` values" instead, and date the change at that run's start. Whether a change is real
(means differ by >= 10%) is the caller's verification, kept apart from detection.
"""

from __future__ import annotations

import math

import numpy as np

from sleuth.errors import ConfigError
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.validation import fraction, integer, positive_int

__all__ = ["BayesianChangePoint"]


class BayesianChangePoint:
    """Online change points in a series (feed it values on a comparable scale, e.g. log times)."""

    def __init__(self, *, hazard: float = DETECTION_RULES.change_hazard, threshold: float = DETECTION_RULES.change_mass,
                 lag: int = DETECTION_RULES.change_lag, max_run: int = DETECTION_RULES.change_max_run,
                 prior_strength: float = 1.0, prior_scale: float = 0.05) -> None:
        fraction("hazard", hazard, one=False)
        fraction("threshold", threshold, one=False)
        positive_int("lag", lag)
        integer("max_run", max_run, low=lag + 1, low_shown=f"lag + 1 ({lag + 1})")
        self.hazard = hazard
        self.threshold = threshold
        self.lag = lag
        self.max_run = max_run
        self.prior_strength = prior_strength
        self.prior_scale = prior_scale
        self.t = 0
        self.drift_detected = False
        self.change_at: int | None = None  # index (0-based count of updates) where the new run began
        self._last_change = -1
        self._reset_posterior(None)

    def _reset_posterior(self, x0: float | None) -> None:
        self._log_r = np.zeros(1)  # log P(run length = k), k = 0.. ; starts with a run of 0
        self._mu0 = 0.0 if x0 is None else x0
        k = self.prior_strength
        self._kappa = np.array([k])
        self._alpha = np.array([1.0])
        self._beta = np.array([self.prior_scale**2])
        self._mu = np.array([self._mu0])

    def update(self, x: float) -> BayesianChangePoint:
        if not math.isfinite(x):
            raise ConfigError(f"change-point input must be finite, got {x!r}")
        if self.t == 0:
            self._reset_posterior(x)
        # Student-t predictive of x under each run length.
        scale2 = self._beta * (self._kappa + 1) / (self._alpha * self._kappa)
        nu = 2 * self._alpha
        z = (x - self._mu) ** 2 / scale2
        log_pred = (_lgamma((nu + 1) / 2) - _lgamma(nu / 2) - 0.5 * np.log(nu * math.pi * scale2)
                    - (nu + 1) / 2 * np.log1p(z / nu))
        growth = self._log_r + log_pred + math.log1p(-self.hazard)
        change = np.logaddexp.reduce(self._log_r + log_pred) + math.log(self.hazard)
        log_r = np.concatenate([[change], growth])
        log_r -= np.logaddexp.reduce(log_r)
        # Posterior update of the sufficient statistics (index k+1 extends run k by x).
        mu = np.concatenate([[self._mu0], (self._kappa * self._mu + x) / (self._kappa + 1)])
        beta = np.concatenate([[self.prior_scale**2],
                               self._beta + self._kappa * (x - self._mu) ** 2 / (2 * (self._kappa + 1))])
        kappa = np.concatenate([[self.prior_strength], self._kappa + 1])
        alpha = np.concatenate([[1.0], self._alpha + 0.5])
        if len(log_r) > self.max_run:
            log_r, mu, beta, kappa, alpha = (a[: self.max_run] for a in (log_r, mu, beta, kappa, alpha))
            log_r -= np.logaddexp.reduce(log_r)
        self._log_r, self._mu, self._beta, self._kappa, self._alpha = log_r, mu, beta, kappa, alpha
        # The new prior mean follows the latest value: a new run is judged against where the
        # series is now, not where it started.
        self._mu0 = x
        self.drift_detected = False
        recent = np.exp(log_r[1 : self.lag + 1])  # runs that began 0..lag-1 updates ago
        if self.t >= self.lag and recent.sum() > self.threshold:
            start = self.t - int(np.argmax(recent))
            if start > self._last_change + self.lag:
                self.drift_detected = True
                self.change_at = start
                self._last_change = start
        self.t += 1
        return self


def _lgamma(values: np.ndarray) -> np.ndarray:
    return np.vectorize(math.lgamma, otypes=[float])(values)
