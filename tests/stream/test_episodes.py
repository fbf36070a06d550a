"""The streaming localizer's gathering (debounce) and de-duplication rules, on hand-made inputs."""

from __future__ import annotations

import pytest

from sleuth.errors import ConfigError
from sleuth.localizer import Incident, IncidentCause, Suspect
from sleuth.localizer.impact import Impact
from sleuth.stream.episodes import Gatherer, Raised, continuation_of, not_localized


def incident(first: int, last: int, *, top: str = "gpu:h0003/1", cause: IncidentCause = IncidentCause.COMPUTE) -> Incident:
    return Incident(
        job="job", incident=f"job-{first}-{last}", t_from_ns=0, t_to_ns=1, iterations=tuple(range(first, last + 1)),
        cause=cause, suspects=(Suspect(top, top.split(":")[0], 0.9),) if top else (), roots=(), traversal=(), steps=(),
        ranks_fetched=1, world=16, impact=Impact(1.5, 1.0, 1.5, 0.1, 10), advice="", seconds=0.1,
    )


def test_a_job_is_due_debounce_seconds_after_its_first_irregularity_and_gathers_the_rest() -> None:
    gatherer = Gatherer(debounce_s=5.0)
    gatherer.add("a", 15, now=100.0, token="m1")
    gatherer.add("a", 16, now=103.0, token="m2")
    gatherer.add("a", 15, now=104.0, token="m3")  # republished: one iteration, both events acknowledged later
    gatherer.add("b", 7, now=102.0)
    assert gatherer.due(104.9) == []
    assert gatherer.due(105.0) == ["a"]
    assert gatherer.due(107.0) == ["a", "b"]
    pending = gatherer.take("a")
    assert pending.iterations == [15, 16] and pending.first_arrival == 100.0 and pending.tokens == ["m1", "m2", "m3"]
    assert len(gatherer) == 1


def test_put_back_waits_again_and_keeps_what_arrived_meanwhile() -> None:
    gatherer = Gatherer(debounce_s=1.0)
    gatherer.add("a", 15, now=0.0, token=1)
    pending = gatherer.take("a")
    gatherer.add("a", 17, now=1.5, token=2)  # arrives while the first gathering was being localized
    gatherer.put_back(pending, not_before=2.0)
    assert gatherer.due(1.9) == []
    merged = gatherer.take("a")
    assert merged.iterations == [15, 17] and merged.tokens == [1, 2] and merged.arrivals[15] == 0.0


def test_a_negative_debounce_is_refused() -> None:
    with pytest.raises(ConfigError, match="debounce_s must be >= 0 seconds, got -1"):
        Gatherer(debounce_s=-1)


def test_iterations_an_incident_spans_are_not_localized_again() -> None:
    raised = [Raised.of(incident(15, 20)), Raised.of(incident(40, 41))]
    assert not_localized([14, 15, 20, 21, 39, 40, 41, 42], raised) == [14, 21, 39, 42]
    assert not_localized([3, 4], []) == [3, 4]


def test_the_same_top_suspect_and_cause_within_a_window_continues_an_incident() -> None:
    raised = [Raised.of(incident(15, 20))]
    assert continuation_of(incident(21, 30), raised, window=100) == raised[0]
    assert continuation_of(incident(119, 125), raised, window=100) == raised[0]
    assert continuation_of(incident(120, 125), raised, window=100) is None  # a whole window later: raised again
    assert continuation_of(incident(21, 30, top="nic:h0001/0", cause=IncidentCause.NETWORK), raised, window=100) is None
    assert continuation_of(incident(21, 30, top="gpu:h0000/0"), raised, window=100) is None
    assert continuation_of(incident(5, 9), raised, window=100) == raised[0]  # late irregularities of earlier steps
    imbalance = [Raised.of(incident(15, 20, top="", cause=IncidentCause.STAGE_IMBALANCE))]
    assert continuation_of(incident(30, 31, top="", cause=IncidentCause.STAGE_IMBALANCE), imbalance, window=100)
