"""Clients for the services the stream talks to, built from ``Settings`` in one place."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sleuth.errors import ConfigError
from sleuth.settings import Settings

if TYPE_CHECKING:
    from clickhouse_driver import Client
    from kafka import KafkaProducer


def clickhouse_client(settings: Settings, *, database: str | None = None) -> Client:
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


def kafka_producer(settings: Settings) -> KafkaProducer:
    """A kafka-python producer for small acknowledged messages (irregularities, incidents): acks from all replicas."""
    from kafka import KafkaProducer

    return KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", retries=5, linger_ms=5)


def ensure_gateway_topics(settings: Settings) -> None:
    """The topics the gateway writes: records, dead letters, and the compacted job specs."""
    ensure_topics(settings, {settings.records_topic: settings.records_partitions, settings.rejects_topic: 1,
                             settings.jobs_topic: 1}, compacted={settings.jobs_topic})


def topic_configs(settings: Settings, compacted: bool) -> dict[str, str]:
    """A new topic's configs: acks=all waits for ``SLEUTH_KAFKA_MIN_INSYNC_REPLICAS`` replicas; job specs keep the last per key."""
    if settings.kafka_min_insync > settings.kafka_replication:
        # Kafka would take the topic and then refuse every acks=all send to it.
        raise ConfigError(f"SLEUTH_KAFKA_MIN_INSYNC_REPLICAS ({settings.kafka_min_insync}) exceeds "
                          f"SLEUTH_KAFKA_REPLICATION ({settings.kafka_replication})")
    configs = {"min.insync.replicas": str(settings.kafka_min_insync)}
    return configs | ({"cleanup.policy": "compact"} if compacted else {})


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
                admin.create_topics([NewTopic(t, n, settings.kafka_replication, topic_configs=topic_configs(settings, t in set(compacted)))
                                     for t, n in missing.items()], wait_for_metadata=True)
            except TopicAlreadyExistsError:
                pass  # another process created it between list and create
    finally:
        admin.close()
