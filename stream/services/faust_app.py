"""The faust-streaming app every stream service (worker, localizer, alerter) runs in, configured and
served in one place."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from sleuth.settings import Settings

# faust resolves its top-level names lazily: two services' threads resolving them at once can find
# the module half built ("module 'faust' has no attribute 'App'"), so they take turns.
_FAUST_IMPORT = threading.Lock()


def create_app(settings: Settings, group: str, *, loop: asyncio.AbstractEventLoop, datadir: str) -> Any:
    """A faust app in consumer group ``group`` on the configured broker; topics are created by sleuth, not faust."""
    with _FAUST_IMPORT:
        from faust import App

    return App(
        group,
        broker=f"kafka://{settings.kafka_bootstrap}",
        loop=loop,
        datadir=datadir,
        store="memory://",  # no tables: state is rebuilt from the stream, or replayed from unacknowledged events
        web_enabled=False,
        topic_replication_factor=settings.kafka_replication,
        topic_allow_declare=False,  # our topics (``connect.ensure_topics``)
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=1.0,
        # A ClickHouse outage holds one batch in retry; stay in the group through a long one.
        broker_max_poll_interval=600.0,
        # A killed member's partitions move to the others after 10 s, not the default 60 s.
        broker_session_timeout=10.0,
        broker_heartbeat_interval=3.0,
        # Stopping must not wait for work that cannot finish; its events stay unacknowledged.
        stream_wait_empty=False,
    )


async def serve_until(
    stop: threading.Event,
    build_app: Callable[[asyncio.AbstractEventLoop, str], Any],
    *,
    name: str,
    on_started: Callable[[Any], None] | None = None,
    tick: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Start the app ``build_app(loop, datadir)`` makes (its data in a temporary folder), then,
    every 0.1 s until ``stop`` is set, run ``tick``; stop the app however this ends."""
    with tempfile.TemporaryDirectory(prefix=f"sleuth-{name}-") as datadir:
        app = build_app(asyncio.get_running_loop(), datadir)
        await app.start()
        if on_started is not None:
            on_started(app)
        try:
            while not stop.is_set():
                if tick is not None:
                    await tick()
                await asyncio.sleep(0.1)
        finally:
            await app.stop()


def assigned_partitions(app: Any, topic: str) -> tuple[int, frozenset[int]] | None:
    """(how many partitions ``topic`` has, those of them assigned to this member of ``app``'s group),
    or None while the member knows neither yet."""
    consumer = app.consumer
    # faust's ``consumer.topic_partitions`` answers on the group's leader only (it reads the snapshot
    # the leader assigns from); every member's aiokafka consumer holds the cluster's metadata.
    partitions = consumer._thread._ensure_consumer().partitions_for_topic(topic)
    if not partitions:
        return None
    return len(partitions), frozenset(tp.partition for tp in consumer.assignment() if tp.topic == topic)


def run_in_own_loop(serve: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``serve()`` to its end on a new event loop in this thread (a service's ``run(stop)``)."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(serve())
    finally:
        loop.close()
