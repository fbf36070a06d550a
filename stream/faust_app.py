"""The faust-streaming app every stream service (worker, localizer) runs in, configured in one place."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from sleuth.settings import Settings


def create_app(settings: Settings, group: str, *, loop: asyncio.AbstractEventLoop, datadir: str) -> Any:
    """A faust app in consumer group ``group`` on the configured broker; topics are created by sleuth, not faust."""
    import faust

    return faust.App(
        group,
        broker=f"kafka://{settings.kafka_bootstrap}",
        loop=loop,
        datadir=datadir,
        store="memory://",  # no tables: state is rebuilt from the stream, or replayed from unacknowledged events
        web_enabled=False,
        topic_replication_factor=1,
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


def run_in_own_loop(serve: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``serve()`` to its end on a new event loop in this thread (a service's ``run(stop)``)."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(serve())
    finally:
        loop.close()
