"""``sleuth alerter``: a faust-streaming app turning ``sleuth.incidents`` into alerts.

Two agents and a timer, in one consumer group (``SLEUTH_ALERTER_GROUP``):

* incidents (``SLEUTH_INCIDENTS_TOPIC``, ``Incident.to_json()`` keyed by job) open and update alerts;
* irregularities (``SLEUTH_IRREGULARITIES_TOPIC``) postpone the resolution of a job's alerts;
* every ``check_s`` seconds, the open alerts' jobs' progress is read from ClickHouse and resolves them
  (enough regular iterations, or none at all for ``SLEUTH_JOB_IDLE_S``: the job stopped reporting),
  and the open alerts are reannounced to Alertmanager when due (``SLEUTH_ALERT_RESEND_S``).

All three hand their work to one thread (``Alerter`` is not thread-safe, and its ClickHouse and
HTTP calls block), which keeps the event loop free to heartbeat the group. An incident message is
acknowledged only once its alert changes are saved (``stream.at_least_once``, as the worker does):
while ClickHouse is away the agent retries it with backoff and reads no further, and a stop
meanwhile leaves it unacknowledged for the next alerter, whose replay rule (``Alerter``) keeps a
replay from alerting twice. An alert change is saved, marked unannounced, before it is announced;
the timer announces what a failed announcement or a crash of the previous process left unannounced
(``Alerter.announce_pending``), so an incident acknowledged once its change was saved still reaches
the receivers.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sleuth.errors import RecordError
from sleuth.localizer.incident import Incident
from sleuth.oncall.alerter import Alerter
from sleuth.oncall.alertmanager import AlertmanagerPusher, alerts_api
from sleuth.oncall.links import incident_url
from sleuth.oncall.notify import Notifier
from sleuth.oncall.webhook import WebhookSender
from sleuth.settings import Settings
from sleuth.storage.alerts import ClickHouseAlertStore
from sleuth.storage.progress import completed_iterations, newest_iterations
from sleuth.stores import Bus
from sleuth.stream.services.at_least_once import acknowledged_when_done, until_done
from sleuth.stream.services.faust_app import create_app, serve_until

if TYPE_CHECKING:
    from clickhouse_driver import Client

_log = logging.getLogger(__name__)

__all__ = ["AlerterService", "build_alerter"]


def build_alerter(settings: Settings, *, client: Client, producer: Bus | None = None) -> Alerter:
    """An ``Alerter`` wired to ClickHouse, the alerts topic (when ``producer`` is given), the webhooks and Alertmanagers."""
    def sender(urls: list[str]) -> WebhookSender:
        return WebhookSender(urls, retries=settings.alert_retries, backoff_s=settings.alert_backoff_s)

    def link(incident: str) -> str:
        return incident_url(settings.serve_base_url, incident)

    webhooks = sender(settings.alert_webhook_urls) if settings.alert_webhook_urls else None
    alertmanager = (AlertmanagerPusher(sender([alerts_api(url) for url in settings.alertmanager_urls]),
                                       resend_s=settings.alert_resend_s, incident_url=link)
                    if settings.alertmanager_urls else None)
    notifier = Notifier(topic=settings.alerts_topic, producer=producer, webhooks=webhooks, alertmanager=alertmanager,
                        incident_url=link)
    return Alerter(ClickHouseAlertStore(client, settings.clickhouse_database), notify=notifier, refresh=notifier.refresh,
                   resolve_after=settings.alert_resolve_iterations, stopped_after_s=settings.job_idle_s,
                   critical_slowdown=settings.alert_critical_slowdown,
                   critical_gpu_hours=settings.alert_critical_gpu_hours)


#: Incident messages taken at once: few arrive, and each waits for its save before the next.
_INCIDENTS_AT_ONCE = 100


class AlerterService:
    """``retry_max_s``: the longest pause between two attempts to save an incident's alert changes."""

    def __init__(self, settings: Settings, *, alerter: Alerter, client: Client, check_s: float = 5.0,
                 retry_max_s: float = 5.0) -> None:
        self.settings = settings
        self.alerter = alerter
        self.client = client
        self.check_s = check_s
        self.retry_max_s = retry_max_s
        self.incidents_seen = 0
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alerter")

    def run(self, stop: threading.Event) -> None:
        try:
            asyncio.run(self._serve(stop))  # this thread's own event loop
        finally:
            self._thread.shutdown(wait=True)

    async def _serve(self, stop: threading.Event) -> None:
        await serve_until(stop, lambda loop, datadir: self._build_app(loop, datadir, stop), name="alerter")

    async def _call(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, function, *args)

    def handle_incident(self, payload: bytes) -> None:
        """Open or update the alerts of one incident message; raises when they could not be saved
        (the caller retries it: what an earlier try saved comes back as a replay, which changes nothing)."""
        try:
            incident = Incident.from_json(payload, source=f"{self.settings.incidents_topic} message")
            self.alerter.on_incident(incident)
        except (ValueError, RecordError) as error:  # a foreign or broken message: skip it, keep the partition going
            _log.error("skipping incident message: %s", error)
            return
        self.incidents_seen += 1

    async def _handle_incidents(self, events: Sequence[Any], stop: threading.Event) -> bool:
        """Each incident in turn, retried until its alert changes are saved; False once stopping before."""
        for event in events:
            handle = functools.partial(self._call, self.handle_incident, event.value)
            if not await until_done(handle, stop, what="saving an incident's alerts", retry_max_s=self.retry_max_s):
                return False
        return True

    def handle_irregularity(self, payload: bytes) -> None:
        try:
            document = json.loads(payload)
            job, iteration = str(document["job"]), int(document["iteration"])
        except (ValueError, KeyError, TypeError) as error:
            _log.error("skipping irregularity message: %s", error)
            return
        self.alerter.on_irregular(job, iteration)

    def check_resolutions(self) -> None:
        database = self.settings.clickhouse_database
        since = self.alerter.resolvable_from()
        if since:
            self.alerter.resolve(completed_iterations(self.client, database, since))
        self.alerter.resolve_stopped(newest_iterations(self.client, database, self.alerter.reporting_from()))

    def _build_app(self, loop: asyncio.AbstractEventLoop, datadir: str, stop: threading.Event) -> Any:
        settings = self.settings
        app = create_app(settings, settings.alerter_group, loop=loop, datadir=datadir)
        incidents = app.topic(settings.incidents_topic, key_serializer="raw", value_serializer="raw")
        irregularities = app.topic(settings.irregularities_topic, key_serializer="raw", value_serializer="raw")

        on_incidents = acknowledged_when_done(lambda events: self._handle_incidents(events, stop),
                                              max_events=_INCIDENTS_AT_ONCE, within_s=0.2)

        async def on_irregularities(stream: Any) -> None:
            async for payload in stream:
                await self._call(self.handle_irregularity, payload)

        async def resolve() -> None:
            try:
                await self._call(self.check_resolutions)
            except Exception as error:  # ClickHouse away: try again on the next tick
                _log.warning("resolution check failed: %s", error)
            try:
                await self._call(self.alerter.announce_pending)  # what a crash or a failed notify left unannounced
            except Exception as error:
                _log.warning("announcing pending alert changes failed: %s", error)
            await self._call(self.alerter.reannounce)

        app.agent(incidents, name=f"{settings.alerter_group}.incidents")(on_incidents)
        app.agent(irregularities, name=f"{settings.alerter_group}.irregularities")(on_irregularities)
        app.timer(self.check_s)(resolve)
        return app
