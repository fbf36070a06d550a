"""The alerter's decisions: incidents open or update alerts, regular iterations resolve them.

One open alert per (job, device). An incident that names a device with an open alert adds its
evidence to it (latest incident, impact, severity, the span of irregular iterations); a replayed
incident (Kafka delivers at least once) changes nothing and notifies nobody; an incident that grew
(the localizer writes it again, same id, while its episode lasts) extends the alert's span quietly
unless its severity or cause changed.

Resolution: a job's alerts resolve once the job has completed ``resolve_after`` iterations after
its last irregular one. The last irregular iteration is the latest of (a) the iterations the
incidents named and (b) the irregular iterations the workers publish on the irregularities topic,
which arrive as soon as detection sees them, before any localization. How far the job got is read
from ClickHouse ``iterations`` (``progress.completed_iterations``): the iteration every rank of the
job's registered world has finished, so a rank that lags does not resolve an alert early. Only the
iterations from the first that could resolve one of the job's alerts on are read (``resolvable_from``).
A job that stops reporting (it ended, or died, while slow) never gets there: its alerts resolve once
its newest iteration has not moved for ``stopped_after_s`` seconds of the alerter's clock
(``resolve_stopped``), ending when that iteration was first seen, since the job paid nothing after it.

Every change is saved (an ``AlertStore``: ClickHouse in service, ``MemoryAlertStore`` in unit tests)
as unannounced before it is announced (``notify``), and saved again as announced after: a restart reloads the open alerts and the changes not yet announced, and
``announce_pending`` (the service calls it on every tick) announces those, so a crash or a failed
``notify`` between saving and announcing delays an announcement but never loses it (at least once: a
crash after ``notify`` and before the second save announces the change again, with the same
fingerprint). ``reannounce`` hands the open alerts to ``refresh`` for receivers that forget an
alert they have not heard of for a while (Alertmanager).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from sleuth import metrics
from sleuth.localizer.incident import Incident
from sleuth.oncall.alerts import Alert, AlertStatus, Evidence, evidence_from_incident, severity_of
from sleuth.stores import AlertStore
from sleuth.validation import positive_int

__all__ = ["Alerter"]


class Alerter:
    def __init__(self, store: AlertStore, *, notify: Callable[[list[Alert]], None], resolve_after: int,
                 stopped_after_s: float, critical_slowdown: float, critical_gpu_hours: float,
                 clock: Callable[[], int] = time.time_ns, refresh: Callable[[list[Alert]], None] | None = None) -> None:
        self.store = store
        self.notify = notify
        self.resolve_after = positive_int("resolve_after", resolve_after, error=ValueError)
        if not stopped_after_s > 0:
            raise ValueError(f"stopped_after_s must be a positive number of seconds, got {stopped_after_s!r}")
        self.stopped_after_ns = int(stopped_after_s * 1e9)
        self.critical_slowdown = critical_slowdown
        self.critical_gpu_hours = critical_gpu_hours
        self.clock = clock
        self.refresh = refresh
        self.open: dict[tuple[str, str], Alert] = {a.key: a for a in store.load(status=AlertStatus.FIRING)}
        # Saved but not announced yet, by the alert's identity (job, device, starts_ns): the latest version.
        self.unannounced: dict[tuple[str, str, int], Alert] = {_identity(a): a for a in store.load(announced=False)}
        # job -> (its newest iteration, when this process first saw it there): what tells a job that stopped.
        self.progress: dict[str, tuple[int, int]] = {}
        self._count_open()

    def _count_open(self) -> None:
        """``sleuth_open_incidents``: the incidents the firing alerts cite."""
        metrics.OPEN_INCIDENTS.set(len({i for alert in self.open.values() for i in alert.incidents}))

    def resolvable_from(self) -> dict[str, int]:
        """job -> the least iteration that, once every rank of the job finished it, resolves one of its
        open alerts (``resolve_after`` past the alert's last irregular one)."""
        return {job: last + self.resolve_after for job, last in self.reporting_from().items()}

    def on_incident(self, incident: Incident) -> list[Alert]:
        """Open or update the alerts of an incident's suspects; the alerts that changed."""
        absorbed = [(self.open.get((e.job, e.device)), self._absorb(e)) for e in evidence_from_incident(incident)]
        changed = [alert for _, alert in absorbed if alert is not None]
        # An incident that only grew (its episode lasts on) postpones resolution, as an irregular iteration does.
        quiet = [alert for before, alert in absorbed if alert is not None and before is not None
                 and (before.severity, before.cause, before.incidents) == (alert.severity, alert.cause, alert.incidents)]
        self._save_quietly(quiet)
        self.open.update((a.key, a) for a in quiet)
        return quiet + self._commit([a for a in changed if a not in quiet])

    def on_irregular(self, job: str, iteration: int) -> list[Alert]:
        """An irregular iteration of ``job``: it postpones the resolution of the job's open alerts."""
        changed = [a.replace(last_irregular=iteration) for a in self.open.values()
                   if a.job == job and iteration > a.last_irregular]
        self._save_quietly(changed)  # not announced: nothing a receiver shows changed
        self.open.update((a.key, a) for a in changed)
        return changed

    def resolve(self, completed: Mapping[str, int]) -> list[Alert]:
        """Resolve the open alerts of jobs that completed ``resolve_after`` iterations past their last irregular one.

        ``completed``: job -> the last iteration every rank of it finished.
        """
        now = self.clock()
        done = [a.replace(status=AlertStatus.RESOLVED, ends_ns=now,
                          resolution=f"{completed[a.job] - a.last_irregular} regular iterations past the last "
                                     f"irregular one ({a.last_irregular})")
                for a in self.open.values()
                if a.job in completed and completed[a.job] - a.last_irregular >= self.resolve_after]
        return self._commit(done)

    def reporting_from(self) -> dict[str, int]:
        """job -> the least last irregular iteration of its open alerts: where its newest iteration is looked for."""
        since: dict[str, int] = {}
        for alert in self.open.values():
            since[alert.job] = min(since.get(alert.job, alert.last_irregular), alert.last_irregular)
        return since

    def resolve_stopped(self, newest: Mapping[str, int]) -> list[Alert]:
        """Resolve the open alerts of jobs whose newest iteration has not moved for ``stopped_after_s``.

        ``newest``: job -> its newest iteration from ``reporting_from()`` on; a job left out has none there.
        """
        now = self.clock()
        jobs = {a.job for a in self.open.values()}
        self.progress = {job: seen for job, seen in self.progress.items() if job in jobs}
        stopped: dict[str, tuple[int, int]] = {}
        for job in jobs:
            at = newest.get(job, -1)
            if job not in self.progress or self.progress[job][0] != at:
                self.progress[job] = (at, now)
            elif now - self.progress[job][1] >= self.stopped_after_ns:
                stopped[job] = self.progress[job]
        # An alert opened after its job was last seen to move (a late incident) ends when it started.
        done = [a.replace(status=AlertStatus.RESOLVED, ends_ns=max(stopped[a.job][1], a.starts_ns),
                          resolution=_stopped_words(stopped[a.job][0], a.last_irregular, self.stopped_after_ns))
                for a in self.open.values() if a.job in stopped]
        for job in stopped:
            del self.progress[job]
        return self._commit(done)

    def announce_pending(self) -> list[Alert]:
        """Announce the changes saved but not announced yet (a crash or a failed ``notify``); those announced."""
        pending = list(self.unannounced.values())
        if not pending:
            return []
        self.notify(pending)
        self.store.save(pending, announced=True)
        for alert in pending:
            del self.unannounced[_identity(alert)]
        return pending

    def reannounce(self) -> None:
        """The open alerts, unchanged, to ``refresh`` (which decides what is due)."""
        if self.refresh is not None and self.open:
            self.refresh(list(self.open.values()))

    def _absorb(self, evidence: Evidence) -> Alert | None:
        severity = severity_of(evidence.slowdown, evidence.gpu_hours_lost, critical_slowdown=self.critical_slowdown,
                               critical_gpu_hours=self.critical_gpu_hours)
        current = self.open.get((evidence.job, evidence.device))
        if current is None:
            return Alert(job=evidence.job, device=evidence.device, starts_ns=self.clock(), status=AlertStatus.FIRING,
                         severity=severity, cause=evidence.cause, kind=evidence.kind, score=evidence.score,
                         incident=evidence.incident, incidents=(evidence.incident,), slowdown=evidence.slowdown,
                         gpu_hours_lost=evidence.gpu_hours_lost, first_irregular=evidence.first_irregular,
                         last_irregular=evidence.last_irregular, advice=evidence.advice)
        known = evidence.incident in current.incidents
        if known and evidence.last_irregular <= current.last_irregular:
            return None  # a replay of evidence already taken
        return current.replace(
            severity=severity, cause=evidence.cause, score=evidence.score, incident=evidence.incident,
            incidents=current.incidents + (() if known else (evidence.incident,)), slowdown=evidence.slowdown,
            gpu_hours_lost=evidence.gpu_hours_lost, first_irregular=min(current.first_irregular, evidence.first_irregular),
            last_irregular=max(current.last_irregular, evidence.last_irregular), advice=evidence.advice,
        )

    def _commit(self, changed: list[Alert]) -> list[Alert]:
        if not changed:
            return []
        self.store.save(changed, announced=False)
        self.unannounced.update((_identity(a), a) for a in changed)
        for alert in changed:
            if alert.status is AlertStatus.FIRING:
                self.open[alert.key] = alert
            else:
                self.open.pop(alert.key, None)
        self._count_open()
        self.announce_pending()
        return changed

    def _save_quietly(self, alerts: list[Alert]) -> None:
        """Save changes that announce nothing; an alert with an announcement pending keeps it pending, now of this version."""
        pending = [a for a in alerts if _identity(a) in self.unannounced]
        self.unannounced.update((_identity(a), a) for a in pending)
        self.store.save(pending, announced=False)
        self.store.save([a for a in alerts if _identity(a) not in self.unannounced])


def _stopped_words(newest: int, last_irregular: int, after_ns: int) -> str:
    where = f"iteration {newest}" if newest >= 0 else f"no iteration past the last irregular one ({last_irregular})"
    return f"the job stopped reporting: {where}, then nothing for {after_ns / 1e9:g} s"


def _identity(alert: Alert) -> tuple[str, str, int]:
    """An alert's row key: a new alert for the same job and device after a resolution starts later."""
    return alert.job, alert.device, alert.starts_ns
