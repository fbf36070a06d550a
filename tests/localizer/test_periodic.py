"""A compute straggler late on the program's beat (``localizer.periodic``)."""

from __future__ import annotations

import dataclasses

import pytest

from sleuth.errors import ConfigError
from sleuth.localizer.incident import IncidentCause, RootOperator
from sleuth.localizer.periodic import beat, on_the_beat
from sleuth.localizer.rules import LocalizerRules
from sleuth.localizer.search import Cause

from ..oncall.test_alerts import incident


@pytest.mark.parametrize(("iterations", "period"), [
    ((10, 20, 30, 40), 10),
    ((40, 10, 30, 20, 50, 30), 10),  # the order and a repeat do not matter
    ((3, 5, 7, 9), 2),
    ((10, 20, 30), None),  # three: a handful of spikes make that
    ((10, 11, 12, 13), None),  # consecutive: an episode, not a beat
    ((3, 4, 10, 11, 17, 18), None),  # a device slow two iterations at a time
    ((10, 20, 30, 41), None),  # a drifting period
])
def test_a_beat_is_four_iterations_exactly_one_period_apart(iterations, period) -> None:
    assert beat(iterations) == period


def roots(*late: tuple[int, int, Cause]) -> tuple[RootOperator, ...]:
    """Root operators late on (iteration, rank) for ``cause``."""
    return tuple(RootOperator(it, cause, rank, "world", it, "all_reduce", (0, 1, 2, 3), 0.5, it)
                 for it, rank, cause in late)


def test_a_compute_incident_whose_rank_was_late_on_a_beat_keeps_its_suspects_and_names_the_program_s_work() -> None:
    # Iteration 31's network delay on rank 2 is not rank 0's beat.
    late = roots(*((it, 0, Cause.COMPUTE) for it in (10, 20, 30, 40, 50)), (31, 2, Cause.NETWORK),
                 (50, 0, Cause.COMPUTE))
    found = incident(iterations=(10, 20, 30, 31, 40, 50), roots=late, advice="the tied ones")
    noted = on_the_beat(found)
    assert noted.suspects == found.suspects and noted.cause is IncidentCause.COMPUTE
    assert noted.advice.startswith("Rank 0 was late in iterations 10, 20, 30, 40 and 50, one every 10: ")
    assert "extra work on rank 0 every 10 steps" in noted.advice and "not gpu:h0/1" in noted.advice
    assert noted.advice.endswith(" the tied ones")


@pytest.mark.parametrize("changes", [
    {"roots": roots(*((it, 0, Cause.COMPUTE) for it in (10, 11, 12, 13, 14)))},
    {"roots": roots(*((it, 0, Cause.COMPUTE) for it in (25, 50, 75)))},
    {"roots": roots(*((it, 0, Cause.COMPUTE) for it in (10, 20, 30, 40))), "cause": IncidentCause.NETWORK},
    {"roots": roots(*((it, 0, Cause.NETWORK) for it in (10, 20, 30, 40)))},
    {"roots": roots(*((it, 0, Cause.COMPUTE) for it in (10, 20, 30, 40))), "cause": IncidentCause.SCATTERED_PAUSES,
     "suspects": ()},
])
def test_other_incidents_are_left_as_they_are(changes) -> None:
    found = incident(**changes)
    assert on_the_beat(found) is found


def test_fewer_than_three_beats_is_refused_as_a_rule() -> None:
    with pytest.raises(ConfigError, match="min_beats"):
        dataclasses.replace(LocalizerRules(), min_beats=2)
