"""The streaming localizer's gathering (debounce) and de-duplication rules, on hand-made inputs."""

from __future__ import annotations

import pytest

from sleuth.errors import ConfigError
from sleuth.localizer import Incident, IncidentCause, Suspect
from sleuth.localizer.impact import Impact
from sleuth.localizer.episodes import Raised, episode_of, grown, one_per_episode
from sleuth.stream.services.episodes import Gatherer, not_localized
from sleuth.topology import kind_of


def incident(first: int, last: int, *, top: str = "gpu:h0003/1", cause: IncidentCause = IncidentCause.COMPUTE,
             second: str = "", lost: float = 0.1) -> Incident:
    suspects = tuple(Suspect(d, kind_of(d), 0.9 - 0.1 * k) for k, d in enumerate((top, second)) if d)
    return Incident(
        job="job", incident=f"job-{first}-{last}", t_from_ns=100 + first, t_to_ns=200 + last,
        iterations=tuple(range(first, last + 1)), cause=cause, suspects=suspects, roots=(), traversal=(), steps=(),
        ranks_fetched=1, world=16, impact=Impact(1.5, 1.0, 1.5, lost, last - first + 1), advice="", seconds=0.1,
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


def test_the_same_top_suspect_within_a_window_continues_an_incident() -> None:
    raised = [Raised.of(incident(15, 20))]
    assert episode_of(incident(21, 30), raised, window=100) == raised[0]
    assert episode_of(incident(119, 125), raised, window=100) == raised[0]
    assert episode_of(incident(120, 125), raised, window=100) is None  # a whole window later: raised again
    assert episode_of(incident(21, 30, top="nic:h0001/0", cause=IncidentCause.NETWORK), raised, window=100) is None
    assert episode_of(incident(21, 30, top="gpu:h0000/0"), raised, window=100) is None
    assert episode_of(incident(5, 9), raised, window=100) == raised[0]  # late irregularities of earlier steps
    imbalance = [Raised.of(incident(15, 20, top="", cause=IncidentCause.STAGE_IMBALANCE))]
    assert episode_of(incident(30, 31, top="", cause=IncidentCause.STAGE_IMBALANCE), imbalance, window=100)


def test_one_fault_read_mixed_then_compute_is_one_episode() -> None:
    # The demo's stack run: rank 5 slowed in iterations 15-31 read "mixed" over 15-20, "compute" over 21-25.
    first = incident(15, 20, cause=IncidentCause.MIXED, second="nic:h0001/0")
    assert episode_of(incident(21, 25), [Raised.of(first)], window=100) == Raised.of(first)


def test_a_device_second_in_one_analysis_and_first_in_the_next_ties_them() -> None:
    cable = "link:leaf:l0~nic:h0001/0"
    nic_first = Raised.of(incident(15, 20, top="nic:h0001/0", second=cable, cause=IncidentCause.NETWORK))
    cable_first = incident(21, 25, top=cable, second="nic:h0001/0", cause=IncidentCause.NETWORK)
    assert episode_of(cable_first, [nic_first], window=100) == nic_first
    elsewhere = incident(21, 25, top="link:leaf:l1~nic:h0007/0", second="nic:h0007/0", cause=IncidentCause.NETWORK)
    assert episode_of(elsewhere, [nic_first], window=100) is None


def test_an_incident_naming_a_device_first_grows_the_one_that_names_it_first_not_one_naming_it_second() -> None:
    # The demo's stack run in CI: growing the one that named the GPU second made two incidents lead with it.
    second = Raised.of(incident(5, 14, top="nvswitch:vm", second="gpu:vm/5", cause=IncidentCause.MIXED))
    first = Raised.of(incident(5, 10, top="gpu:vm/5", second="gpu:vm/4"))
    assert episode_of(incident(15, 31, top="gpu:vm/5"), [second, first], window=100) == first
    assert episode_of(incident(15, 31, top="gpu:vm/5"), [second], window=100) == second
    nearer = Raised.of(incident(40, 45, top="gpu:vm/4", second="gpu:vm/5"))
    assert episode_of(incident(50, 52, top="gpu:vm/5"), [second, nearer], window=100) == nearer


def test_a_grown_incident_keeps_its_id_spans_both_and_leads_with_the_newer_reading() -> None:
    old = incident(15, 20, cause=IncidentCause.MIXED, second="nic:h0001/0", lost=0.6)
    new = incident(18, 25, lost=0.8)  # 21-25 are new: five of its eight iterations
    merged = grown(old, new)
    assert merged is not None
    assert merged.incident == old.incident and merged.iterations == tuple(range(15, 26))
    assert merged.cause is IncidentCause.COMPUTE
    assert [s.device for s in merged.suspects] == ["gpu:h0003/1", "nic:h0001/0"]  # what on-call was told stays listed
    assert merged.t_from_ns == old.t_from_ns and merged.t_to_ns == new.t_to_ns
    assert merged.impact.gpu_hours_lost == pytest.approx(0.6 + 0.8 * 5 / 8)
    assert merged.impact.iterations == 11


def test_an_analysis_adding_no_iteration_does_not_grow_an_incident() -> None:
    assert grown(incident(15, 25), incident(18, 22)) is None


def test_localize_returns_one_incident_per_episode() -> None:
    ramp_start = incident(21, 25, cause=IncidentCause.MIXED, second="nic:h0001/0")
    ramp_rest = incident(26, 40)
    elsewhere = incident(30, 33, top="nic:h0007/0", cause=IncidentCause.NETWORK)
    much_later = incident(200, 205)
    merged = one_per_episode([ramp_rest, elsewhere, much_later, ramp_start], window=100)
    assert [(i.incident, i.iterations[0], i.iterations[-1]) for i in merged] == [
        ("job-21-25", 21, 40), ("job-30-33", 30, 33), ("job-200-205", 200, 205)]
