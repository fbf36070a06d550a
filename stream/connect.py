"""Clients for the services the stream talks to, built from ``Settings`` in one place."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sleuth.settings import Settings


def clickhouse_client(settings: Settings, *, database: str | None = None) -> Any:
    """A clickhouse-driver ``Client`` for the configured server (connects lazily)."""
    from clickhouse_driver import Client

    # Short timeouts: the worker retries on its own schedule rather than hanging in a socket.
    return Client(
        settings.clickhouse_host,
        port=settings.clickhouse_port,
        database=database or "default",
        connect_timeout=5,
        send_receive_timeout=60,
    )


def ensure_gateway_topics(settings: Settings) -> None:
    """The topics the gateway writes: records, dead letters, and the compacted job specs."""
    ensure_topics(settings, {settings.records_topic: settings.records_partitions, settings.rejects_topic: 1,
                             settings.jobs_topic: 1}, compacted={settings.jobs_topic})


def ensure_topics(settings: Settings, topics: dict[str, int], *, compacted: Iterable[str] = ()) -> None:
    """Create the named topics (topic -> partitions) unless they exist; ``compacted`` keep the last value per key."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=10_000)
    try:
        missing = {t: n for t, n in topics.items() if t not in set(admin.list_topics())}
        if missing:
            try:
                admin.create_topics(
                    [NewTopic(t, n, 1, topic_configs={"cleanup.policy": "compact"} if t in set(compacted) else {})
                     for t, n in missing.items()],
                    wait_for_metadata=True,
                )
            except TopicAlreadyExistsError:
                pass  # another process created it between list and create
    finally:
        admin.close()
