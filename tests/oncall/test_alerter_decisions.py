"""The alerter's decisions against the in-memory store (no services): open, update, stay quiet, resolve, recover."""

from __future__ import annotations

import pytest

from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import Incident, IncidentCause, Suspect
from sleuth.oncall.alerter import Alerter
from sleuth.oncall.alerts import Alert, AlertStatus, Severity
from sleuth.storage.memory import MemoryAlertStore
from sleuth.topology import DeviceKind

from .test_alerts import incident as _incident

GPU, HOST = "gpu:h0/1", "host:h0"


def incident(name: str = "j1-10-12", iterations: tuple[int, ...] = (10, 11, 12), slowdown: float = 1.2,
             **changes) -> Incident:
    """An incident of job j1 blaming ``GPU`` then ``HOST``."""
    impact = Impact(slowdown, 1e8, slowdown * 1e8, 0.5, len(iterations))
    return _incident(incident=name, iterations=iterations, impact=impact, **changes)


class Receiver:
    """The alerter's ``notify``: records each announcement; ``fail`` makes the next ones raise."""

    def __init__(self) -> None:
        self.announced: list[list[Alert]] = []
        self.fail = False

    def __call__(self, alerts: list[Alert]) -> None:
        if self.fail:
            raise RuntimeError("the receiver is down")
        self.announced.append(list(alerts))


def alerter(store: MemoryAlertStore, receiver: Receiver, *, resolve_after: int = 5, stopped_after_s: float = 3600.0,
            clock=None) -> Alerter:
    ticks = iter(range(1_000, 1_000_000))
    return Alerter(store, notify=receiver, resolve_after=resolve_after, stopped_after_s=stopped_after_s,
                   critical_slowdown=1.5, critical_gpu_hours=10.0, clock=clock or (lambda: next(ticks)))


def test_an_incident_opens_one_alert_per_suspect_and_its_replay_changes_nothing() -> None:
    store, receiver = MemoryAlertStore(), Receiver()
    decide = alerter(store, receiver)
    opened = decide.on_incident(incident())
    assert [(a.device, a.status, a.severity) for a in opened] == [
        (GPU, AlertStatus.FIRING, Severity.WARNING), (HOST, AlertStatus.FIRING, Severity.WARNING)]
    assert [[a.device for a in batch] for batch in receiver.announced] == [[GPU, HOST]]
    assert store.load(announced=False) == [] and {a.device for a in store.load(status=AlertStatus.FIRING)} == {GPU, HOST}
    saves = store.saves
    assert decide.on_incident(incident()) == []  # Kafka delivered it again
    assert len(receiver.announced) == 1 and store.saves == saves


def test_new_evidence_updates_the_open_alert_and_a_grown_incident_extends_it_quietly() -> None:
    store, receiver = MemoryAlertStore(), Receiver()
    decide = alerter(store, receiver)
    [first, _] = decide.on_incident(incident())
    updated = decide.on_incident(incident("j1-40-42", (40, 41, 42), slowdown=1.6))
    gpu = next(a for a in updated if a.device == GPU)
    assert gpu.starts_ns == first.starts_ns and gpu.incidents == ("j1-10-12", "j1-40-42")
    assert (gpu.first_irregular, gpu.last_irregular, gpu.severity) == (10, 42, Severity.CRITICAL)
    assert len(receiver.announced) == 2
    grown = decide.on_incident(incident("j1-40-42", (40, 41, 42, 43, 44), slowdown=1.6))
    assert {a.last_irregular for a in grown} == {44}
    assert len(receiver.announced) == 2  # the span is not news to a receiver
    assert {a.last_irregular for a in store.load(status=AlertStatus.FIRING)} == {44}


def test_alerts_resolve_once_the_job_completed_enough_iterations_past_the_last_irregular_one() -> None:
    store, receiver = MemoryAlertStore(), Receiver()
    decide = alerter(store, receiver, resolve_after=5)
    decide.on_incident(incident())
    assert decide.resolvable_from() == {"j1": 17}  # what ClickHouse is asked from: 5 past iteration 12
    assert decide.resolve({"j1": 16}) == []  # 4 past iteration 12
    assert decide.on_irregular("j1", 14) != []  # the workers saw another irregular iteration
    assert decide.resolvable_from() == {"j1": 19}
    assert decide.resolve({"j1": 18}) == []  # 4 past iteration 14
    resolved = decide.resolve({"j1": 19, "other": 1_000})
    assert {(a.device, a.status) for a in resolved} == {(GPU, AlertStatus.RESOLVED), (HOST, AlertStatus.RESOLVED)}
    assert {a.resolution for a in resolved} == {"5 regular iterations past the last irregular one (14)"}
    assert all(a.ends_ns > a.starts_ns for a in resolved) and not decide.open and decide.resolvable_from() == {}
    assert [a.status for a in receiver.announced[-1]] == [AlertStatus.RESOLVED] * 2
    reopened = decide.on_incident(incident("j1-60-61", (60, 61)))
    assert {a.starts_ns for a in reopened}.isdisjoint({a.starts_ns for a in resolved})  # a new alert, not the old one


def test_a_failed_announcement_is_announced_by_the_next_process_once() -> None:
    store, receiver = MemoryAlertStore(), Receiver()
    receiver.fail = True
    with pytest.raises(RuntimeError):
        alerter(store, receiver).on_incident(incident())
    assert {a.device for a in store.load(announced=False)} == {GPU, HOST}
    receiver.fail = False
    restarted = alerter(store, receiver)  # a new process, the same store
    assert set(restarted.open) == {("j1", GPU), ("j1", HOST)}
    assert restarted.on_incident(incident()) == []  # the incident redelivered: nothing new
    assert {a.device for a in restarted.announce_pending()} == {GPU, HOST}
    assert store.load(announced=False) == [] and restarted.announce_pending() == []
    assert len(receiver.announced) == 1


def test_a_non_hardware_incident_is_one_job_level_alert() -> None:
    store, receiver = MemoryAlertStore(), Receiver()
    [alert] = alerter(store, receiver).on_incident(incident(cause=IncidentCause.STAGE_IMBALANCE, suspects=(), advice="rebalance"))
    assert (alert.device, alert.kind, alert.advice) == ("stage_imbalance", "job", "rebalance")
    assert store.load(job="j1") == [alert]


@pytest.mark.parametrize("resolve_after", [0, True, 2.5])
def test_resolve_after_must_be_a_count_of_iterations(resolve_after) -> None:
    with pytest.raises(ValueError, match=f"^resolve_after must be a positive integer, got {resolve_after}$"):
        alerter(MemoryAlertStore(), Receiver(), resolve_after=resolve_after)


def test_the_alerts_of_a_job_that_stopped_reporting_resolve_after_the_idle_time_ending_when_it_stopped() -> None:
    store, receiver, now = MemoryAlertStore(), Receiver(), [0]
    decide = alerter(store, receiver, stopped_after_s=60.0, clock=lambda: now[0])
    decide.on_incident(incident())  # irregular 10-12
    decide.on_incident(incident("j2-10-12", job="j2"))
    assert decide.reporting_from() == {"j1": 12, "j2": 12}
    assert decide.resolve_stopped({"j1": 12, "j2": 14}) == []
    now[0] = 30 * 10**9
    assert decide.resolve_stopped({"j1": 13, "j2": 15}) == []  # both go on
    now[0] = 89 * 10**9
    assert decide.resolve_stopped({"j1": 13, "j2": 16}) == []  # j1 at 13 for 59 s
    now[0] = 90 * 10**9
    resolved = decide.resolve_stopped({"j1": 13, "j2": 17})
    assert {(a.job, a.device, a.status) for a in resolved} == {("j1", GPU, AlertStatus.RESOLVED),
                                                                ("j1", HOST, AlertStatus.RESOLVED)}
    assert {a.ends_ns for a in resolved} == {30 * 10**9}  # when 13 was first seen: the job paid nothing after it
    assert {a.resolution for a in resolved} == {"the job stopped reporting: iteration 13, then nothing for 60 s"}
    assert [a.status for a in receiver.announced[-1]] == [AlertStatus.RESOLVED] * 2
    assert {a.job for a in decide.open.values()} == {"j2"} and set(decide.progress) == {"j2"}


def test_a_job_with_no_iteration_past_its_alerts_resolves_once_idle_and_a_restart_waits_again() -> None:
    store, receiver, now = MemoryAlertStore(), Receiver(), [5 * 10**9]
    decide = alerter(store, receiver, stopped_after_s=60.0, clock=lambda: now[0])
    decide.on_incident(incident())
    assert decide.resolve_stopped({}) == []
    now[0] = 64 * 10**9
    restarted = alerter(store, receiver, stopped_after_s=60.0, clock=lambda: now[0])  # knows nothing of the wait
    assert restarted.resolve_stopped({}) == []
    now[0] = 124 * 10**9
    resolved = restarted.resolve_stopped({})
    assert {a.ends_ns for a in resolved} == {64 * 10**9} and {a.resolution for a in resolved} == {
        "the job stopped reporting: no iteration past the last irregular one (12), then nothing for 60 s"}
    assert not restarted.open and store.load(status=AlertStatus.FIRING) == []


def test_an_alert_opened_after_its_job_stopped_moving_ends_when_it_started() -> None:
    store, receiver, now = MemoryAlertStore(), Receiver(), [0]
    decide = alerter(store, receiver, stopped_after_s=60.0, clock=lambda: now[0])
    decide.on_incident(incident())
    decide.resolve_stopped({"j1": 13})  # seen at 13 at 0 s
    now[0] = 30 * 10**9
    decide.on_incident(incident("j1-12-13", (12, 13), suspects=(Suspect("nic:h0/1", DeviceKind.NIC, 0.9),),
                                cause=IncidentCause.NETWORK))  # a late incident of the stopped job
    now[0] = 60 * 10**9
    resolved = decide.resolve_stopped({"j1": 13})
    assert {(a.device, a.ends_ns) for a in resolved} == {(GPU, 0), (HOST, 0), ("nic:h0/1", 30 * 10**9)}
    assert all(a.ends_ns >= a.starts_ns for a in resolved)


@pytest.mark.parametrize("stopped_after_s", [0, -1.0, float("nan")])
def test_stopped_after_must_be_a_positive_time(stopped_after_s) -> None:
    with pytest.raises(ValueError, match="^stopped_after_s must be a positive number of seconds"):
        alerter(MemoryAlertStore(), Receiver(), stopped_after_s=stopped_after_s)
